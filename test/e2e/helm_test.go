//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/internal/s3"
)

// The Helm chart (charts/trellis) on the real-node cluster, along the path a
// user of today's `make deploy` takes (docs/operations.md, "Migrate from make
// deploy"): the chart takes the installed objects over without restarting
// the manager or touching what Trellis made; `helm uninstall` leaves the
// CRDs with every Trellis object, the namespaces and the buckets; installed
// again, the chart's manager serves the sample site and rewrites nothing.

const helmRelease = "trellis"

func helm(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "helm"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s\n%s", strings.Join(args, " "), err, out, describeManagerPods())
	}
	return string(out)
}

// trellisChildren is every object Trellis made (labelled managed-by
// trellis), by "kind namespace/name", with its resourceVersion and UID.
func trellisChildren(t *testing.T) map[string]string {
	t.Helper()
	out, err := kubectl("get", childKinds, "-A", "-l", "app.kubernetes.io/managed-by=trellis", "-o",
		`jsonpath={range .items[*]}{.kind} {.metadata.namespace}/{.metadata.name} {.metadata.uid}/{.metadata.resourceVersion}{"\n"}{end}`)
	if err != nil {
		t.Fatal(err)
	}
	children := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); len(f) == 3 {
			children[f[0]+" "+f[1]] = f[2]
		}
	}
	return children
}

// sameChildren fails the test when a child was created, deleted or written.
func sameChildren(t *testing.T, when string, before map[string]string) {
	t.Helper()
	after := trellisChildren(t)
	var changed []string
	for k, v := range before {
		if after[k] != v {
			changed = append(changed, fmt.Sprintf("%s: %s -> %q", k, v, after[k]))
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			changed = append(changed, k+" created")
		}
	}
	sort.Strings(changed)
	if len(changed) > 0 {
		t.Errorf("%s, Trellis' children changed:\n  %s", when, strings.Join(changed, "\n  "))
	}
}

func samplesReady(t *testing.T) {
	t.Helper()
	for _, obj := range sampleObjects {
		if _, err := kubectl("wait", "--for=condition=Ready", obj, "-n", "default", "--timeout=180s"); err != nil {
			t.Fatalf("%v\n%s", err, describeManagerPods())
		}
	}
}

// uid is the object's UID ("" when it does not exist).
func uid(args ...string) string {
	out, err := kubectl(append([]string{"get"}, append(args, "-o", "jsonpath={.metadata.uid}")...)...)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}

func TestHelmChartTakesOverUninstallsAndInstalls(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium not installed: `make chromium` installs it from Debian's packages")
	}
	if _, err := os.Stat(filepath.Join(bin, "helm")); err != nil {
		t.Fatal("bin/helm missing: make tools")
	}
	chart := filepath.Join(root, "charts", "trellis")
	// What users have today: `make deploy`, reconciling the samples.
	useDeployedManager(t)
	t.Cleanup(func() { handBackToMakeDeploy(t) })
	applySamples(t)
	samplesReady(t)
	children := trellisChildren(t)
	if len(children) < 5 {
		t.Fatalf("the samples have %d children: %v", len(children), children)
	}
	spec := func() string {
		out, _ := kubectl("-n", managerNS, "get", "deployment", deployment, "-o", "jsonpath={.spec}")
		return out
	}
	specBefore, podsBefore := spec(), strings.Join(managerPods(), " ")

	// The migration: the chart takes every object of config/default over.
	// --force-conflicts: kubectl's apply owns the fields the chart sets
	// differently (the managed-by label).
	helm(t, "install", helmRelease, chart, "-n", managerNS, "--take-ownership", "--force-conflicts", "--wait", "--timeout=3m")
	config, err := exec.Command(filepath.Join(bin, "kustomize"), "build", filepath.Join(root, "config", "default")).Output()
	if err != nil {
		t.Fatal(err)
	}
	manifest := helm(t, "get", "manifest", helmRelease, "-n", managerNS)
	if got, want := strings.Count(manifest, "\nkind: "), strings.Count(string(config), "\nkind: "); got != want {
		t.Errorf("the release holds %d objects, config/default %d", got, want)
	}
	if got, _ := kubectl("-n", managerNS, "get", "deployment", deployment, "-o", `jsonpath={.metadata.labels.app\.kubernetes\.io/managed-by} {.metadata.annotations.meta\.helm\.sh/release-name}`); got != "Helm trellis" {
		t.Errorf("the manager's Deployment is not the release's: %q", got)
	}
	if after := spec(); after != specBefore {
		t.Errorf("taking the Deployment over changed its spec:\nbefore: %s\nafter:  %s", specBefore, after)
	}
	if pods := strings.Join(managerPods(), " "); pods != podsBefore {
		t.Errorf("the manager pods were %s before the take-over, %s after", podsBefore, pods)
	}
	samplesReady(t)
	sameChildren(t, "after the chart took the install over", children)

	// Uninstall: the manager goes; the CRDs, and so every Trellis object,
	// the namespaces, the buckets and keys, and the policies that restrict stay.
	key := accessKeyOf(t)
	namespaces := map[string]string{}
	for _, ns := range []string{managerNS, "team-a-dev", "team-a-prod"} {
		namespaces[ns] = uid("namespace", ns)
	}
	saveDeployedManagerLogs()
	helm(t, "uninstall", helmRelease, "-n", managerNS, "--wait", "--timeout=3m")
	if uid("-n", managerNS, "deployment", deployment) != "" {
		t.Error("the manager's Deployment outlived helm uninstall")
	}
	for _, kind := range []string{"tenant", "storagebucket", "bucketaccess"} {
		if uid("mutatingadmissionpolicy", "trellis-"+kind+"-finalizer") != "" {
			t.Errorf("the %s finalizer policy outlived helm uninstall (no manager would remove its finalizer)", kind)
		}
	}
	for ns, id := range namespaces {
		if got := uid("namespace", ns); got != id {
			t.Errorf("namespace %s: UID %q after uninstall, was %s", ns, got, id)
		}
	}
	for _, kept := range [][]string{
		{"crd", "tenants.tenancy.trellis.dev"}, {"crd", "storagebuckets.storage.trellis.dev"},
		{"validatingadmissionpolicy", "trellis-tenant-guardrails"}, {"validatingadmissionpolicybinding", "trellis-tenant-guardrails"},
		{"tenant", "team-a"}, {"-n", "default", "storagebucket", "assets"}, {"-n", "default", "markdownview", "markdownview-sample"},
	} {
		if uid(kept...) == "" {
			t.Errorf("%v did not outlive helm uninstall", kept)
		}
	}
	store, err := s3.New(s3Root(t))
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := store.BucketExists(context.Background(), "default-assets"); err != nil || !ok {
		t.Errorf("the sample's bucket after helm uninstall: exists %v (%v)", ok, err)
	}
	if len(accountsOf(t, key)) != 1 {
		t.Errorf("the BucketAccess key %s is gone from the store after helm uninstall", key)
	}
	sameChildren(t, "after helm uninstall", children)

	// Installed again onto what uninstall kept: its own objects are adopted
	// (the same release), the manager reconciles and rewrites nothing.
	helm(t, "install", helmRelease, chart, "-n", managerNS, "--create-namespace", "--wait", "--timeout=3m")
	deadline := time.Now().Add(60 * time.Second)
	for !strings.HasPrefix(leaseHolder(), deployment+"-") {
		if time.Now().After(deadline) {
			t.Fatalf("no pod of the chart's manager took the lease (holder %q)", leaseHolder())
		}
		time.Sleep(200 * time.Millisecond)
	}
	mv := "apiVersion: view.trellis.dev/v1\nkind: MarkdownView\nmetadata: {name: helm-installed, namespace: default}\nspec:\n  markdowns: {index.md: \"# Installed by Helm\"}\n"
	if _, err := kubectlIn([]byte(mv), "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = kubectl("-n", "default", "delete", "markdownview", "helm-installed", "--wait=false") })
	if _, err := kubectl("wait", "--for=condition=Ready", "markdownview/helm-installed", "-n", "default", "--timeout=180s"); err != nil {
		t.Fatalf("the chart's manager did not reconcile: %v\n%s", err, describeManagerPods())
	}
	samplesReady(t)
	for k, v := range trellisChildren(t) {
		if strings.Contains(k, "helm-installed") {
			children[k] = v // the new view's own
		}
	}
	sameChildren(t, "after the chart's manager started on the samples", children)

	port := portForward(t, "default", "svc/viewer-markdownview-sample", 80)
	dom := dumpDOM(t, chromium, fmt.Sprintf("http://localhost:%d/", port))
	if want := `<h1 id="the-trellis-handbook">The Trellis handbook</h1>`; !strings.Contains(dom, want) {
		t.Errorf("the sample site lacks %q:\n%s", want, dom)
	}
}

// accessKeyOf is the access key id in the sample BucketAccess' Secret.
func accessKeyOf(t *testing.T) string {
	t.Helper()
	out, err := kubectl("-n", "default", "get", "secret", "assets-s3", "-o", "jsonpath={.data.AWS_ACCESS_KEY_ID}")
	if err != nil {
		t.Fatal(err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(out))
	if err != nil || len(key) == 0 {
		t.Fatalf("the sample's access key: %q (%v)", out, err)
	}
	return string(key)
}

// handBackToMakeDeploy leaves the cluster as useDeployedManager expects it:
// no release, config/default applied as `make deploy` does (forcing the
// fields Helm took back to kubectl), a new ServiceAccount token for local
// managers (uninstall deleted the ServiceAccount).
func handBackToMakeDeploy(t *testing.T) {
	saveDeployedManagerLogs()
	if out, err := exec.Command(filepath.Join(bin, "helm"), "--kubeconfig", kubeconfig, "uninstall", helmRelease, "-n", managerNS,
		"--ignore-not-found", "--wait", "--timeout=3m").CombinedOutput(); err != nil {
		t.Errorf("helm uninstall: %v %s", err, out)
	}
	config, err := exec.Command(filepath.Join(bin, "kustomize"), "build", filepath.Join(root, "config", "default")).Output()
	if err != nil {
		t.Error(err)
		return
	}
	if _, err := kubectlIn(config, "apply", "--server-side", "--force-conflicts", "-f", "-"); err != nil {
		t.Error(err)
		return
	}
	deployed, managerConfigPath = true, ""
	if err := os.Remove(filepath.Join(root, ".dev", cluster+"-manager.kubeconfig")); err != nil && !os.IsNotExist(err) {
		t.Error(err)
	}
}
