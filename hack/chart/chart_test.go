package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// The chart is tested by rendering it with the pinned helm (make tools):
// with its defaults it is config/default, object for object; each value
// changes what it says and nothing else.

func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "bin", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("bin/%s missing: make tools", name)
	}
	return p
}

// helmTemplate renders chart (a directory or .tgz) as release "trellis"
// in trellis-system and returns the objects by "Kind namespace/name": the
// release's, not its `helm test` hooks (helmTestHooks).
func helmTemplate(t *testing.T, chart string, args ...string) map[string]map[string]any {
	t.Helper()
	return render(t, chart, append([]string{"--skip-tests"}, args...)...)
}

func render(t *testing.T, chart string, args ...string) map[string]map[string]any {
	t.Helper()
	cmd := exec.Command(tool(t, "helm"), append([]string{"template", "trellis", chart, "--namespace", "trellis-system"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return byName(t, out)
}

func byName(t *testing.T, manifests []byte) map[string]map[string]any {
	t.Helper()
	list, err := splitObjects(manifests)
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]map[string]any{}
	for _, o := range list {
		key := fmt.Sprintf("%s %s/%s", o["kind"], str(o, "metadata", "namespace"), str(o, "metadata", "name"))
		if _, dup := objs[key]; dup {
			t.Fatalf("%s twice", key)
		}
		objs[key] = o
	}
	return objs
}

// kustomizeDefault is config/default: what make deploy and install.yaml apply.
func kustomizeDefault(t *testing.T) map[string]map[string]any {
	t.Helper()
	return kustomizeOverlay(t, "../../config/default")
}

func kustomizeOverlay(t *testing.T, dir string) map[string]map[string]any {
	t.Helper()
	out, err := kustomizeBuild(tool(t, "kustomize"), dir)
	if err != nil {
		t.Fatal(err)
	}
	return byName(t, out)
}

// withoutHelm is o without Helm's labels and the keep annotation, as JSON
// values (numbers as float64) so that the two renderings compare.
func withoutHelm(t *testing.T, o map[string]any) map[string]any {
	t.Helper()
	var c map[string]any
	data, _ := json.Marshal(o)
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	meta := c["metadata"].(map[string]any)
	for _, field := range []string{"labels", "annotations"} {
		m, _ := meta[field].(map[string]any)
		for _, k := range append(helmLabels, keepAnnotation) {
			delete(m, k)
		}
		if len(m) == 0 {
			delete(meta, field)
		}
	}
	return c
}

func keys(m map[string]map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// TestDefaultsRenderConfigDefault: `helm template` with the defaults gives
// exactly the objects of `kustomize build config/default` (what make deploy
// and install.yaml apply), but for Helm's labels and the keep annotation.
func TestDefaultsRenderConfigDefault(t *testing.T) {
	sameObjects(t, helmTemplate(t, "../../charts/trellis"), kustomizeDefault(t))
}

// TestBucketEventsRenderTheComponent: bucketEvents.enabled renders what
// `make deploy BUCKET_EVENTS=1` applies (config/default-with-bucket-events).
func TestBucketEventsRenderTheComponent(t *testing.T) {
	sameObjects(t, helmTemplate(t, "../../charts/trellis", "--set", "bucketEvents.enabled=true"),
		kustomizeOverlay(t, "../../config/default-with-bucket-events"))
}

func sameObjects(t *testing.T, rendered, want map[string]map[string]any) {
	t.Helper()
	if got, w := keys(rendered), keys(want); !reflect.DeepEqual(got, w) {
		t.Fatalf("the chart renders\n  %v\nconfig/default has\n  %v", got, w)
	}
	for key, o := range rendered {
		if got, w := withoutHelm(t, o), withoutHelm(t, want[key]); !reflect.DeepEqual(got, w) {
			g, _ := json.MarshalIndent(got, "", " ")
			wj, _ := json.MarshalIndent(w, "", " ")
			t.Errorf("%s differs:\nchart:  %s\nconfig: %s", key, g, wj)
		}
		labels, _ := o["metadata"].(map[string]any)["labels"].(map[string]any)
		if labels["app.kubernetes.io/managed-by"] != "Helm" || labels["app.kubernetes.io/instance"] != defaultName {
			t.Errorf("%s lacks Helm's labels: %v", key, labels)
		}
	}
}

// TestKeptOnUninstall: what holds data or restricts (the CRDs, the
// namespace with the stores' Secrets, the ValidatingAdmissionPolicies and
// their bindings) carries helm.sh/resource-policy: keep; nothing else does.
func TestKeptOnUninstall(t *testing.T) {
	for key, o := range helmTemplate(t, "../../charts/trellis") {
		kind := o["kind"].(string)
		want := kind == kindCRD || kind == kindNamespace || strings.HasPrefix(kind, "ValidatingAdmissionPolicy")
		if got := str(o, "metadata", "annotations", keepAnnotation) == "keep"; got != want {
			t.Errorf("%s: kept on uninstall %v, want %v", key, got, want)
		}
	}
}

// managerOf is the rendered manager Deployment's pod spec and container.
func managerOf(t *testing.T, objs map[string]map[string]any) (deployment, pod, container map[string]any) {
	t.Helper()
	deployment = objs["Deployment trellis-system/trellis-controller-manager"]
	if deployment == nil {
		t.Fatalf("no manager Deployment in %v", keys(objs))
	}
	pod = deployment["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	return deployment, pod, pod["containers"].([]any)[0].(map[string]any)
}

func argsOf(c map[string]any) []string {
	list := c["args"].([]any)
	args := make([]string, 0, len(list))
	for _, a := range list {
		args = append(args, a.(string))
	}
	return args
}

const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestValues(t *testing.T) {
	defaultArgs := []string{"--leader-elect", "--metrics-bind-address=:8443", "--health-probe-bind-address=:8081"}
	pdb := "PodDisruptionBudget trellis-system/trellis-controller-manager"
	for name, tc := range map[string]struct {
		set   []string
		check func(t *testing.T, objs map[string]map[string]any)
	}{
		"replicas, and a PDB with more than one": {[]string{"--set", "replicas=3"}, func(t *testing.T, objs map[string]map[string]any) {
			d, _, _ := managerOf(t, objs)
			if got := d["spec"].(map[string]any)["replicas"]; got != 3.0 {
				t.Errorf("replicas %v, want 3", got)
			}
			if got := objs[pdb]["spec"].(map[string]any)["minAvailable"]; got != 1.0 {
				t.Errorf("PDB minAvailable %v, want 1", got)
			}
		}},
		"no PDB for one replica": {[]string{"--set", "replicas=1"}, func(t *testing.T, objs map[string]map[string]any) {
			if objs[pdb] != nil {
				t.Error("a PDB with minAvailable 1 for a single replica would block every drain")
			}
		}},
		"no PDB when disabled": {[]string{"--set", "podDisruptionBudget.enabled=false"}, func(t *testing.T, objs map[string]map[string]any) {
			if objs[pdb] != nil {
				t.Error("PDB rendered while disabled")
			}
		}},
		"images by digest": {[]string{"--set", "image.repository=registry.example.com/trellis-manager,image.tag=v1.2.3,image.digest=" + digest,
			"--set", "viewerImage.repository=registry.example.com/trellis-viewer,viewerImage.tag=,viewerImage.digest=" + digest,
			"--set", "image.pullPolicy=Always"}, func(t *testing.T, objs map[string]map[string]any) {
			_, _, c := managerOf(t, objs)
			if got, want := c["image"], "registry.example.com/trellis-manager:v1.2.3@"+digest; got != want {
				t.Errorf("image %v, want %s", got, want)
			}
			if c["imagePullPolicy"] != "Always" {
				t.Errorf("imagePullPolicy %v, want Always", c["imagePullPolicy"])
			}
			want := append(append([]string{}, defaultArgs...), "--viewer-image=registry.example.com/trellis-viewer@"+digest)
			if got := argsOf(c); !reflect.DeepEqual(got, want) {
				t.Errorf("args %q, want %q", got, want)
			}
		}},
		"flags": {[]string{"--set", "viewerImageAllow={registry.example.com/trellis-viewer,registry.example.com/team/*}",
			"--set", "artifactHosts={source-controller.flux.svc.cluster.local.}",
			"--set", "controllers={tenant,storage}", "--set", "logLevel=debug", "--set", "extraArgs={--tenant-protected-namespaces=infra-.*}"},
			func(t *testing.T, objs map[string]map[string]any) {
				_, _, c := managerOf(t, objs)
				want := append(append([]string{}, defaultArgs...), "--viewer-image=trellis-viewer:dev",
					"--viewer-image-allow=registry.example.com/trellis-viewer,registry.example.com/team/*",
					"--artifact-hosts=source-controller.flux.svc.cluster.local.",
					"--controllers=tenant,storage", "--zap-log-level=debug", "--tenant-protected-namespaces=infra-.*")
				if got := argsOf(c); !reflect.DeepEqual(got, want) {
					t.Errorf("args %q, want %q", got, want)
				}
			}},
		"a shard of a ring": {[]string{"--set", "controllerRing=trellis-markdownview"}, func(t *testing.T, objs map[string]map[string]any) {
			_, _, c := managerOf(t, objs)
			want := append([]string{"--controller-ring=trellis-markdownview"}, defaultArgs[1:]...)
			want = append(want, "--viewer-image=trellis-viewer:dev")
			if got := argsOf(c); !reflect.DeepEqual(got, want) {
				t.Errorf("args %q, want %q", got, want)
			}
		}},
		"numeric log level": {[]string{"--set", "logLevel=3"}, func(t *testing.T, objs map[string]map[string]any) {
			_, _, c := managerOf(t, objs)
			if got := argsOf(c); got[len(got)-1] != "--zap-log-level=3" {
				t.Errorf("args %q, want --zap-log-level=3 last", got)
			}
		}},
		"resources and placement": {[]string{"--set", "resources.limits.memory=1Gi,resources.requests.cpu=200m",
			"--set", "nodeSelector.pool=system", "--set", "tolerations[0].key=dedicated,tolerations[0].operator=Exists",
			"--set", "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=pool",
			"--set", "imagePullSecrets[0].name=registry"}, func(t *testing.T, objs map[string]map[string]any) {
			_, pod, c := managerOf(t, objs)
			r := c["resources"].(map[string]any)
			if r["limits"].(map[string]any)["memory"] != "1Gi" || r["requests"].(map[string]any)["cpu"] != "200m" ||
				r["requests"].(map[string]any)["memory"] != "128Mi" {
				t.Errorf("resources %v", r)
			}
			if pod["nodeSelector"].(map[string]any)["pool"] != "system" {
				t.Errorf("nodeSelector %v", pod["nodeSelector"])
			}
			if tol := pod["tolerations"].([]any); len(tol) != 1 || tol[0].(map[string]any)["key"] != "dedicated" {
				t.Errorf("tolerations %v", pod["tolerations"])
			}
			if pod["affinity"] == nil {
				t.Error("no affinity")
			}
			if s := pod["imagePullSecrets"].([]any); len(s) != 1 || s[0].(map[string]any)["name"] != "registry" {
				t.Errorf("imagePullSecrets %v", pod["imagePullSecrets"])
			}
		}},
		"a namespace created by someone else": {[]string{"--set", "namespace.create=false"}, func(t *testing.T, objs map[string]map[string]any) {
			for key := range objs {
				if strings.HasPrefix(key, "Namespace ") {
					t.Errorf("%s rendered with namespace.create=false", key)
				}
			}
		}},
	} {
		t.Run(name, func(t *testing.T) { tc.check(t, helmTemplate(t, "../../charts/trellis", tc.set...)) })
	}
}

// TestSchemaRefusesMistakes: values.schema.json turns a typo or a value
// the manager would refuse into an error at install, not a default.
func TestSchemaRefusesMistakes(t *testing.T) {
	for set, want := range map[string]string{
		"replica=3":                  "additional properties 'replica' not allowed",
		"image.digest=sha256:abc":    "/image/digest",
		"controllers={tenants}":      "/controllers/0",
		"extraArgs={leader-elect}":   "/extraArgs/0",
		"image.pullPolicy=Sometimes": "/image/pullPolicy",
		"namespace.create=yes":       "/namespace/create",
		"tests.enabled=yes":          "/tests/enabled",
	} {
		out, err := exec.Command(tool(t, "helm"), "template", "trellis", "../../charts/trellis", "--set", set).CombinedOutput()
		if err == nil || !strings.Contains(string(out), want) {
			t.Errorf("--set %s: %v, want an error naming %q:\n%s", set, err, want, out)
		}
	}
}

// TestOtherNamespace: installed elsewhere, every namespaced object and
// every binding's subject follow the release's namespace.
func TestOtherNamespace(t *testing.T) {
	out, err := exec.Command(tool(t, "helm"), "template", "trellis", "../../charts/trellis", "--namespace", "platform").Output()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out, []byte("trellis-system")) {
		t.Errorf("rendered in namespace platform, the chart still names trellis-system")
	}
	objs := byName(t, out)
	if objs["Namespace /platform"] == nil || objs["Deployment platform/trellis-controller-manager"] == nil {
		t.Errorf("rendered %v", keys(objs))
	}
}

// TestMonitoringIsOptional: config/prometheus' ServiceMonitor and
// PrometheusRule and config/grafana's dashboards render only when their
// value says so, each as config has it.
func TestMonitoringIsOptional(t *testing.T) {
	config := "../../config"
	files, err := generate(tool(t, "kustomize"), config, defaultRelease)
	if err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(t.TempDir(), "trellis")
	if err := writeChart(chart, files); err != nil {
		t.Fatal(err)
	}
	monitor, rule, dashboards := "ServiceMonitor trellis-system/trellis-controller-manager-metrics",
		"PrometheusRule trellis-system/trellis-alerts", "ConfigMap trellis-system/trellis-grafana-dashboards"

	off := helmTemplate(t, chart)
	for _, key := range []string{monitor, rule, dashboards} {
		if off[key] != nil {
			t.Errorf("%s rendered by default", key)
		}
	}
	// Off, the chart is still config/default.
	if got, want := keys(off), keys(kustomizeDefault(t)); !reflect.DeepEqual(got, want) {
		t.Errorf("monitoring off renders %v, want %v", got, want)
	}

	for _, tc := range []struct{ value, key string }{
		{"monitoring.serviceMonitor.enabled", monitor}, {"monitoring.prometheusRule.enabled", rule}, {"monitoring.dashboard.enabled", dashboards},
	} {
		on := helmTemplate(t, chart, "--set", tc.value+"=true")
		for _, key := range []string{monitor, rule, dashboards} {
			if (on[key] != nil) != (key == tc.key) {
				t.Errorf("%s=true: %s rendered %v", tc.value, key, on[key] != nil)
			}
		}
	}

	// On, the ServiceMonitor and PrometheusRule are config/prometheus' objects
	// (with the ServiceMonitor, the scraper's ServiceAccount, binding and
	// token Secret), as config has them.
	want := kustomizeDefault(t)
	for key, o := range kustomizeOverlay(t, filepath.Join(config, "prometheus")) {
		want[key] = o
	}
	sameObjects(t, helmTemplate(t, chart, "--set", "monitoring.serviceMonitor.enabled=true,monitoring.prometheusRule.enabled=true"), want)

	on := helmTemplate(t, chart, "--set", "monitoring.prometheusRule.enabled=true,monitoring.dashboard.enabled=true")
	// Prometheus' own templates ({{ $labels.x }}) reach the rule as
	// written, not read by Helm: the rule is config's, byte for byte.
	built, err := kustomizeBuild(tool(t, "kustomize"), filepath.Join(config, "prometheus"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(built), "{{ $labels.") {
		t.Fatal("config/prometheus has no {{ $labels.… }} template left to check")
	}
	wantRule := byName(t, built)[rule]
	if got, want := on[rule]["spec"], wantRule["spec"]; !reflect.DeepEqual(got, want) {
		t.Errorf("the rule's spec differs from config's:\n%v\nwant\n%v", got, want)
	}
	wantJSON, err := os.ReadFile(filepath.Join(config, "grafana", "trellis-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	cm := on[dashboards]
	if got := cm["data"].(map[string]any)["trellis-dashboard.json"]; got != strings.TrimRight(string(wantJSON), "\n") {
		t.Errorf("the dashboard's JSON is\n%v\nwant\n%s", got, wantJSON)
	}
	if str(cm, "metadata", "labels", "grafana_dashboard") != "1" {
		t.Errorf("the dashboards' ConfigMap is labelled %v", cm["metadata"])
	}
}

// fakeImages is an images.txt of release v1.2.3.
func fakeImages(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "images.txt")
	data := "trellis-manager.tar ghcr.io/trellis-dev/trellis-manager:v1.2.3@" + digest + "\n" +
		"trellis-viewer.tar ghcr.io/trellis-dev/trellis-viewer:v1.2.3@" + strings.Replace(digest, "0123", "4567", 1) + "\n"
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPackage: the packaged chart is the same bytes each time, every entry
// dated the epoch; it renders config/default with the release's images
// pinned by digest; a stale committed chart is refused.
func TestPackage(t *testing.T) {
	rel, err := releaseOf("v1.2.3", fakeImages(t))
	if err != nil {
		t.Fatal(err)
	}
	built := make([][]byte, 0, 2)
	for range 2 {
		dir := t.TempDir()
		p, err := packageChart(tool(t, "kustomize"), "../../config", "../../charts/trellis", rel, dir)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(p) != "trellis-1.2.3.tgz" {
			t.Errorf("packaged as %s", p)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		built = append(built, data)
		if len(built) == 2 {
			if !bytes.Equal(built[0], built[1]) {
				t.Fatal("two packages of the same chart differ")
			}
			checkEpoch(t, data)
			objs := helmTemplate(t, p)
			_, _, c := managerOf(t, objs)
			if c["image"] != "ghcr.io/trellis-dev/trellis-manager:v1.2.3@"+digest {
				t.Errorf("the packaged chart runs %v", c["image"])
			}
			if args := argsOf(c); args[3] != "--viewer-image=ghcr.io/trellis-dev/trellis-viewer:v1.2.3@"+strings.Replace(digest, "0123", "4567", 1) {
				t.Errorf("the packaged chart's viewer: %v", args)
			}
			labels := objs["Deployment trellis-system/trellis-controller-manager"]["metadata"].(map[string]any)["labels"].(map[string]any)
			if labels["helm.sh/chart"] != "trellis-1.2.3" || labels["app.kubernetes.io/version"] != "v1.2.3" {
				t.Errorf("the packaged chart's labels: %v", labels)
			}
		}
	}

	stale := filepath.Join(t.TempDir(), "trellis")
	if out, err := exec.Command("cp", "-r", "../../charts/trellis", stale).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	p := filepath.Join(stale, "templates", "manager", "deployment-trellis-controller-manager.yaml")
	data, _ := os.ReadFile(p)
	if err := os.WriteFile(p, bytes.Replace(data, []byte("replicas:"), []byte("replicas: 1 #"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := packageChart(tool(t, "kustomize"), "../../config", stale, rel, t.TempDir()); err == nil ||
		!strings.Contains(err.Error(), "templates/manager/deployment-trellis-controller-manager.yaml") {
		t.Errorf("packaging an edited chart: %v, want it refused naming the file", err)
	}
}

func checkEpoch(t *testing.T, data []byte) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if !zr.ModTime.IsZero() && zr.ModTime.Unix() != 0 {
		t.Errorf("gzip header time %v", zr.ModTime)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.ModTime.Unix() != 0 || !strings.HasPrefix(h.Name, "trellis/") {
			t.Errorf("%s dated %v", h.Name, h.ModTime)
		}
	}
}

// TestControllerRing: with controllerRing, the manager's replicas are shards
// running the markdownview controller only, so the chart runs the Tenant
// and storage controllers in one more Deployment, leader-elected, that
// receives the bucket events; and it installs the shard Lease policy
// (docs/scaling.md, "MarkdownViews as shards"). Without it, none of this
// renders: TestDefaultsRenderConfigDefault.
func TestControllerRing(t *testing.T) {
	objs := helmTemplate(t, "../../charts/trellis", "--set", "controllerRing=trellis-markdownview,bucketEvents.enabled=true,replicas=3",
		"--set", "logLevel=debug,extraArgs={--tenant-protected-namespaces=infra-.*},monitoring.serviceMonitor.enabled=true")
	shards, shardPod, shard := managerOf(t, objs)
	const ns = "trellis-system/"
	unsharded := objs["Deployment "+ns+"trellis-controller-manager-unsharded"]
	if unsharded == nil {
		t.Fatalf("no unsharded Deployment in %v", keys(objs))
	}
	pod := unsharded["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	c := pod["containers"].([]any)[0].(map[string]any)

	want := []string{"--leader-elect", "--controllers=tenant,storage", "--metrics-bind-address=:8443", "--health-probe-bind-address=:8081",
		"--viewer-image=trellis-viewer:dev", "--zap-log-level=debug", "--tenant-protected-namespaces=infra-.*",
		"--bucket-events-bind-address=:8082", "--bucket-events-token-secret=trellis-bucket-events"}
	if got := argsOf(c); !reflect.DeepEqual(got, want) {
		t.Errorf("unsharded args %q, want %q", got, want)
	}
	if got := unsharded["spec"].(map[string]any)["replicas"]; got != 2.0 {
		t.Errorf("unsharded replicas %v, want 2 (a leader and a standby)", got)
	}
	// The same pod but for its arguments and labels.
	same := func(c map[string]any) map[string]any {
		c = maps.Clone(c)
		delete(c, "args")
		return c
	}
	if !reflect.DeepEqual(same(c), same(shard)) {
		t.Errorf("the unsharded container differs from a shard's:\n%v\n%v", c, shard)
	}
	for _, field := range []string{"securityContext", "serviceAccountName", "terminationGracePeriodSeconds"} {
		if !reflect.DeepEqual(pod[field], shardPod[field]) {
			t.Errorf("unsharded pod's %s %v, a shard's %v", field, pod[field], shardPod[field])
		}
	}

	podLabels := func(d map[string]any) map[string]any {
		return d["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)["labels"].(map[string]any)
	}
	matchLabels := func(o map[string]any) map[string]any {
		sel := o["spec"].(map[string]any)["selector"].(map[string]any)
		if m, ok := sel["matchLabels"].(map[string]any); ok {
			return m
		}
		return sel
	}
	leader := func(labels map[string]any) map[string]any {
		l := maps.Clone(labels)
		l["trellis.dev/leader"] = "true"
		return l
	}
	shardPods, unshardedPods := leader(podLabels(shards)), leader(podLabels(unsharded))
	for _, tc := range []struct {
		key     string
		selects map[string]any // the pods it must select; it must not select the others
	}{
		{"Deployment " + ns + "trellis-controller-manager", shardPods},
		{"PodDisruptionBudget " + ns + "trellis-controller-manager", shardPods},
		{"Service " + ns + "trellis-controller-manager-metrics", shardPods},
		{"Deployment " + ns + "trellis-controller-manager-unsharded", unshardedPods},
		{"PodDisruptionBudget " + ns + "trellis-controller-manager-unsharded", unshardedPods},
		{"Service " + ns + "trellis-controller-manager-unsharded-metrics", unshardedPods},
		{"Service " + ns + "trellis-bucket-events", unshardedPods},
	} {
		o := objs[tc.key]
		if o == nil {
			t.Errorf("no %s", tc.key)
			continue
		}
		other := shardPods
		if reflect.DeepEqual(tc.selects, shardPods) {
			other = unshardedPods
		}
		sel := matchLabels(o)
		if !selects(sel, tc.selects) || selects(sel, other) {
			t.Errorf("%s selects %v: want the pods labelled %v only, not %v", tc.key, sel, tc.selects, other)
		}
	}
	// A shard is never labelled leader; were it, the Service still passes it by.
	if sel := matchLabels(objs["Service "+ns+"trellis-bucket-events"]); sel["trellis.dev/leader"] != "true" {
		t.Errorf("the bucket-event Service selects %v, not the leader alone", sel)
	}
	monitor := objs["ServiceMonitor "+ns+"trellis-controller-manager-metrics"]
	for _, svc := range []string{"trellis-controller-manager-metrics", "trellis-controller-manager-unsharded-metrics"} {
		meta, _ := objs["Service "+ns+svc]["metadata"].(map[string]any)
		if labels, _ := meta["labels"].(map[string]any); !selects(matchLabels(monitor), labels) {
			t.Errorf("the ServiceMonitor does not scrape Service %s", svc)
		}
	}

	policy := objs["ValidatingAdmissionPolicy /trellis-shard-leases"]
	binding := objs["ValidatingAdmissionPolicyBinding /trellis-shard-leases"]
	if policy == nil || binding == nil {
		t.Fatalf("no shard Lease policy and binding in %v", keys(objs))
	}
	vars := map[string]any{}
	for _, v := range policy["spec"].(map[string]any)["variables"].([]any) {
		vars[v.(map[string]any)["name"].(string)] = v.(map[string]any)["expression"]
	}
	if w := map[string]any{"ring": "'trellis-markdownview'", "shardNamespace": "'trellis-system'"}; !reflect.DeepEqual(vars, w) {
		t.Errorf("shard Lease policy variables %v, want %v", vars, w)
	}
	if got := str(binding, "spec", "policyName"); got != "trellis-shard-leases" {
		t.Errorf("the binding names policy %q", got)
	}
}

// selects says whether a matchLabels selector selects an object with labels.
func selects(selector, labels map[string]any) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}
