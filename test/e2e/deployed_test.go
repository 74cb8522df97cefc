//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// The manager as a user installs it (`make install`, `make deploy IMG=...`),
// its two replicas running from the image `make images` built on the real
// node, as its own ServiceAccount.

// applySamples applies config/samples as `make dev` does, the ObjectStore
// pointed at this run's S3 server. It takes back fields another test edited.
func applySamples(t *testing.T) {
	t.Helper()
	applySamplesOf(t, "")
}

// applySamplesOf applies config/samples as they were at commit ("": this
// tree's), taken out of git.
func applySamplesOf(t *testing.T, commit string) {
	t.Helper()
	dir := root
	if commit != "" {
		dir = t.TempDir()
		archive := exec.Command("git", "archive", commit, "config/samples")
		archive.Dir = root
		tarball, err := archive.Output()
		if err != nil {
			t.Fatalf("git archive %s config/samples: %v %s", commit, err, exitStderr(err))
		}
		untar := exec.Command("tar", "-x", "-C", dir)
		untar.Stdin = bytes.NewReader(tarball)
		if out, err := untar.CombinedOutput(); err != nil {
			t.Fatalf("unpacking %s's config/samples: %v %s", commit, err, out)
		}
	}
	samples, err := exec.Command(filepath.Join(bin, "kustomize"), "build", filepath.Join(dir, "config", "samples")).Output()
	if err != nil {
		t.Fatalf("kustomize build config/samples: %v %s", err, exitStderr(err))
	}
	samples = []byte(strings.ReplaceAll(string(samples), "http://127.0.0.1:7070", s3Endpoint()))
	if _, err := kubectlIn(samples, "apply", "--server-side", "--force-conflicts", "-f", "-"); err != nil {
		t.Fatal(err)
	}
}

// TestDeployedManagerServesTheSampleSite is the check the README promises: the
// deployed manager reconciles the samples under its ServiceAccount; then
// `kubectl port-forward svc/viewer-markdownview-sample PORT:80` and a
// browser show the rendered Markdown, and an edit of the MarkdownView
// reaches the page.
func TestDeployedManagerServesTheSampleSite(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium not installed: `make chromium` installs it from Debian's packages")
	}
	useDeployedManager(t)
	sa, err := kubectl("-n", managerNS, "get", "deployment", deployment, "-o", "jsonpath={.spec.template.spec.serviceAccountName}")
	if err != nil || sa != managerAccount {
		t.Fatalf("the deployed manager runs as ServiceAccount %q (%v), want %s", sa, err, managerAccount)
	}
	// Anything reconciled from here on is the deployed manager's doing: no
	// other manager runs.
	applySamples(t)
	for _, obj := range []string{"markdownview/markdownview-sample", "tenant/team-a", "objectstore/local-s3", "storagebucket/assets"} {
		if _, err := kubectl("wait", "--for=condition=Ready", obj, "-n", "default", "--timeout=180s"); err != nil {
			t.Fatalf("%v\n%s", err, describeManagerPods())
		}
	}
	// The viewer pods carry their view's UID, not its name (docs/markdownview.md).
	uid := jsonpath(t, "jsonpath={.metadata.uid}", "markdownview", "markdownview-sample", "-n", "default")
	node, _ := kubectl("get", "pods", "-n", "default", "-l", "view.trellis.dev/markdownview-uid="+uid, "-o", "jsonpath={.items[*].spec.nodeName}")
	if strings.TrimSpace(node) != "real-node" {
		t.Fatalf("the sample's viewer runs on %q, want real-node", node)
	}

	port := portForward(t, "default", "svc/viewer-markdownview-sample", 80)
	site := fmt.Sprintf("http://localhost:%d/", port)
	dom := dumpDOM(t, chromium, site)
	for _, want := range []string{`<h1 id="the-trellis-handbook">The Trellis handbook</h1>`, `<img src="logo.svg"`, `href="/getting-started.md"`, "日本語のページ"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the sample site lacks %q:\n%s", want, dom)
		}
	}
	// The image the page shows is served from the MarkdownView too.
	if resp, err := http.Get(site + "logo.svg"); err != nil {
		t.Error(err)
	} else {
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/svg+xml" {
			t.Errorf("logo.svg: %s, Content-Type %q", resp.Status, resp.Header.Get("Content-Type"))
		}
	}

	if _, err := kubectl("patch", "markdownview", "markdownview-sample", "-n", "default", "--type=merge",
		"-p", `{"spec":{"markdowns":{"README.md":"# The Trellis handbook\n\nEdited through the cluster.\n"}}}`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { applySamples(t) }) // the sample as it was
	edited := time.Now()
	for !strings.Contains(dumpDOM(t, chromium, site), "Edited through the cluster.") {
		if time.Since(edited) > 120*time.Second {
			t.Fatal("the edit did not reach the page within 2 minutes")
		}
		time.Sleep(time.Second)
	}
	t.Logf("the edit reached the page through the Service %.1fs after the patch", time.Since(edited).Seconds())
}

// TestDeployedManagerSurvivesLeaderPodDeletion deletes the pod holding the
// lease: the other replica takes it, the Deployment replaces the pod, and
// the new leader reconciles.
func TestDeployedManagerSurvivesLeaderPodDeletion(t *testing.T) {
	useDeployedManager(t)
	holder := leaseHolder()
	leader, _, _ := strings.Cut(holder, "_")
	saveDeployedManagerLogs() // the deleted pod's log goes with it
	deleted := time.Now()
	if _, err := kubectl("-n", managerNS, "delete", "pod", leader, "--wait=false"); err != nil {
		t.Fatal(err)
	}
	var took time.Duration
	for {
		h := leaseHolder()
		if h != "" && h != holder && strings.HasPrefix(h, deployment+"-") && !strings.HasPrefix(h, leader+"_") {
			took = time.Since(deleted)
			break
		}
		// The promise: lease duration + renew deadline of config/manager (15s + 10s).
		if time.Since(deleted) > 25*time.Second {
			t.Fatalf("no replica took the lease within 25s of deleting %s (holder %q)", leader, h)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("lease handed over %.2fs after the leader pod %s was deleted (to %s)", took.Seconds(), leader, leaseHolder())

	if _, err := kubectl("-n", managerNS, "rollout", "status", "deployment/"+deployment, "--timeout=180s"); err != nil {
		t.Fatalf("the Deployment did not recover: %v\n%s", err, describeManagerPods())
	}
	mv := "apiVersion: view.trellis.dev/v1\nkind: MarkdownView\nmetadata: {name: after-leader-pod, namespace: default}\nspec:\n  markdowns: {index.md: \"# New leader\"}\n"
	if _, err := kubectlIn([]byte(mv), "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	if _, err := kubectl("wait", "--for=condition=Ready", "markdownview/after-leader-pod", "-n", "default", "--timeout=120s"); err != nil {
		t.Fatalf("the new leader did not reconcile: %v", err)
	}
}

// TestDeployedManagerMetricsNeedTheReaderRole scrapes the metrics Service
// over HTTPS with the tokens of two ServiceAccounts: the one bound to
// trellis-metrics-reader gets the metrics, the other is refused, and so is a
// scrape without a token.
func TestDeployedManagerMetricsNeedTheReaderRole(t *testing.T) {
	useDeployedManager(t)
	apply := func(create ...string) {
		t.Helper()
		manifest, err := kubectl(append(create, "--dry-run=client", "-o", "yaml")...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kubectlIn([]byte(manifest), "apply", "--server-side", "-f", "-"); err != nil {
			t.Fatal(err)
		}
	}
	apply("-n", "default", "create", "serviceaccount", "e2e-scraper")
	apply("-n", "default", "create", "serviceaccount", "e2e-stranger")
	apply("create", "clusterrolebinding", "e2e-scraper-metrics", "--clusterrole=trellis-metrics-reader",
		"--serviceaccount=default:e2e-scraper")
	token := func(sa string) string {
		out, err := kubectl("-n", "default", "create", "token", sa, "--duration=10m")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}

	scrape := deployedMetrics(t)
	scrapedWith(t, scrape, func() string { return token("e2e-scraper") })
	if code, _ := scrape(token("e2e-stranger")); code != http.StatusForbidden {
		t.Errorf("a ServiceAccount without the metrics-reader role got %d, want 403", code)
	}
	if code, _ := scrape(""); code != http.StatusUnauthorized {
		t.Errorf("a scrape without a token got %d, want 401", code)
	}
}

// deployedMetrics scrapes the deployed manager's metrics Service over HTTPS
// with a bearer token ("" none): the status code and the body.
func deployedMetrics(t *testing.T) func(token string) (int, string) {
	t.Helper()
	port := portForward(t, managerNS, "svc/trellis-controller-manager-metrics", 8443)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // the manager's self-signed serving certificate
	}}
	return func(token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.TLS == nil {
			t.Fatal("metrics served without TLS")
		}
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
}

// scrapedWith waits until a scrape with token() gets the metrics: a new
// binding may take a moment to reach the authorizer's cache.
func scrapedWith(t *testing.T, scrape func(string) (int, string), token func() string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := scrape(token())
		// Either replica answers; both have Trellis' own and Go's metrics.
		if code == http.StatusOK && strings.Contains(body, "trellis_storagebucket_check_duration_seconds") &&
			strings.Contains(body, "go_goroutines") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the scrape got %d:\n%s", code, tail(body, 10))
		}
		time.Sleep(time.Second)
	}
}

// TestServiceMonitorTokenReadsTheMetrics: the token the chart's
// ServiceMonitor sends (monitoring.serviceMonitor.enabled) reads the
// deployed manager's metrics. The chart renders, beside the ServiceMonitor,
// the scraper's ServiceAccount, its binding to trellis-metrics-reader and
// its token Secret, which the cluster fills; the ServiceMonitor's endpoint
// names that Secret's key. The e2e cluster runs no Prometheus Operator: the
// test applies the rest and sends the key the ServiceMonitor names, as the
// operator would have Prometheus do.
func TestServiceMonitorTokenReadsTheMetrics(t *testing.T) {
	useDeployedManager(t)
	// render returns the chart's objects by "Kind/name", and their keys in
	// the order Helm installs them (a ServiceAccount before its token
	// Secret: the token controller deletes a token Secret whose
	// ServiceAccount it cannot find).
	render := func(args ...string) (map[string]string, []string) {
		t.Helper()
		out, err := exec.Command(filepath.Join(bin, "helm"), append([]string{"template", "trellis",
			filepath.Join(root, "charts", "trellis"), "-n", managerNS}, args...)...).Output()
		if err != nil {
			t.Fatalf("helm template %v: %v %s", args, err, exitStderr(err))
		}
		docs, order := map[string]string{}, []string(nil)
		for _, doc := range strings.Split(string(out), "\n---\n") {
			var o struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
				t.Fatal(err)
			}
			if o.Kind != "" {
				docs[o.Kind+"/"+o.Metadata.Name] = doc
				order = append(order, o.Kind+"/"+o.Metadata.Name)
			}
		}
		return docs, order
	}
	plain, _ := render()
	monitored, order := render("--set", "monitoring.serviceMonitor.enabled=true")
	var added []byte
	var monitor string
	for _, key := range order {
		switch doc := monitored[key]; {
		case strings.HasPrefix(key, "ServiceMonitor/"):
			monitor = doc
		case plain[key] == "":
			added = append(added, []byte("---\n"+doc+"\n")...)
		}
	}
	var sm struct {
		Spec struct {
			Endpoints []struct {
				Authorization struct {
					Type        string `json:"type"`
					Credentials struct {
						Name string `json:"name"`
						Key  string `json:"key"`
					} `json:"credentials"`
				} `json:"authorization"`
				BearerTokenFile string `json:"bearerTokenFile"`
			} `json:"endpoints"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(monitor), &sm); err != nil || len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("the ServiceMonitor (%v):\n%s", err, monitor)
	}
	e := sm.Spec.Endpoints[0]
	if e.Authorization.Type != "Bearer" || e.Authorization.Credentials.Name == "" || e.BearerTokenFile != "" {
		t.Fatalf("the ServiceMonitor's endpoint sends %+v", e)
	}
	if _, err := kubectlIn(added, "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = kubectlIn(added, "delete", "--ignore-not-found", "-f", "-") })

	token := func() string {
		out, err := kubectl("-n", managerNS, "get", "secret", e.Authorization.Credentials.Name,
			"-o", "go-template={{index .data \""+e.Authorization.Credentials.Key+"\" | base64decode}}")
		if err != nil || out == "<no value>" {
			return ""
		}
		return out
	}
	scrapedWith(t, deployedMetrics(t), token)
}

// TestRealNodePodsRunNonRootReadOnly checks every pod Trellis ships (the
// manager) or creates (the sample's viewer) on the real node, twice: as
// declared (runAsNonRoot, readOnlyRootFilesystem; the kubelet refuses to
// start a runAsNonRoot container whose image would run as root) and as the
// kernel sees the processes (user 65532, root filesystem mounted read-only).
func TestRealNodePodsRunNonRootReadOnly(t *testing.T) {
	useDeployedManager(t)
	applySamples(t)
	if _, err := kubectl("wait", "--for=condition=Ready", "markdownview/markdownview-sample", "-n", "default", "--timeout=180s"); err != nil {
		t.Fatal(err)
	}

	out, err := kubectl("get", "pods", "-A", "--field-selector", "spec.nodeName=real-node", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var pods struct {
		Items []struct {
			Metadata struct {
				Name, Namespace string
				Labels          map[string]string
			}
			Spec struct {
				SecurityContext struct{ RunAsNonRoot *bool } `json:"securityContext"`
				Containers      []struct {
					Name            string
					SecurityContext struct {
						RunAsNonRoot           *bool `json:"runAsNonRoot"`
						ReadOnlyRootFilesystem *bool `json:"readOnlyRootFilesystem"`
					} `json:"securityContext"`
				}
			}
			Status struct{ Phase string }
		}
	}
	if err := json.Unmarshal([]byte(out), &pods); err != nil {
		t.Fatal(err)
	}
	var managers, viewers int
	for _, p := range pods.Items {
		switch {
		case p.Metadata.Labels["app.kubernetes.io/component"] == managerBinary:
			managers++
		case p.Metadata.Labels["app.kubernetes.io/managed-by"] == "trellis":
			viewers++
		default:
			continue
		}
		name := p.Metadata.Namespace + "/" + p.Metadata.Name
		if p.Status.Phase != "Running" {
			t.Errorf("%s is %s, want Running", name, p.Status.Phase)
		}
		for _, c := range p.Spec.Containers {
			nonRoot := p.Spec.SecurityContext.RunAsNonRoot
			if c.SecurityContext.RunAsNonRoot != nil {
				nonRoot = c.SecurityContext.RunAsNonRoot
			}
			if nonRoot == nil || !*nonRoot {
				t.Errorf("%s container %s: runAsNonRoot not set", name, c.Name)
			}
			if ro := c.SecurityContext.ReadOnlyRootFilesystem; ro == nil || !*ro {
				t.Errorf("%s container %s: readOnlyRootFilesystem not set", name, c.Name)
			}
		}
	}
	if managers < 2 || viewers < 1 {
		t.Fatalf("on real-node: %d manager pods and %d viewer pods, want 2 and at least 1", managers, viewers)
	}

	procs := realNodeProcesses(t)
	seen := map[string]int{}
	for _, p := range procs {
		if p.comm != managerBinary && p.comm != viewerBinary {
			continue
		}
		seen[p.comm]++
		if p.uids != "65532 65532 65532 65532" {
			t.Errorf("%s (pid %d) runs as uids %q, want 65532", p.comm, p.pid, p.uids)
		}
		if !p.rootReadOnly {
			t.Errorf("%s (pid %d): its root filesystem is writable", p.comm, p.pid)
		}
	}
	if seen[managerBinary] < 2 || seen[viewerBinary] < 1 {
		t.Fatalf("found %v processes in the real node's pod cgroups, want 2 managers and a viewer", seen)
	}
}

// The images' entrypoints, /manager and /viewer: their processes' names, and
// the manager pods' component label.
const (
	managerBinary = "manager"
	viewerBinary  = "viewer"
)

// nodeProcess is a process in one of the real node's pods, as the kernel sees it.
type nodeProcess struct {
	pid          int
	comm         string
	uids         string // real, effective, saved and filesystem UID
	rootReadOnly bool   // "/" is mounted read-only in its mount namespace
}

// realNodeProcesses lists the processes in the real node's pod cgroups
// (hack/lib/node.sh puts them under /trellis-node-ID, ID from its state dir
// and the cluster name).
func realNodeProcesses(t *testing.T) []nodeProcess {
	t.Helper()
	sum := sha256.Sum256([]byte(filepath.Join(root, ".dev", cluster)))
	cgroup := filepath.Join("/sys/fs/cgroup/pids", "trellis-node-"+hex.EncodeToString(sum[:])[:8])
	var procs []nodeProcess
	err := filepath.WalkDir(cgroup, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, f := range strings.Fields(string(b)) {
			var p nodeProcess
			if _, err := fmt.Sscan(f, &p.pid); err != nil {
				return err
			}
			comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p.pid))
			if err != nil {
				continue // exited
			}
			p.comm = strings.TrimSpace(string(comm))
			p.uids = procStatusField(p.pid, "Uid:")
			p.rootReadOnly = rootMountReadOnly(p.pid)
			procs = append(procs, p)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading the real node's cgroups: %v", err)
	}
	return procs
}

func procStatusField(pid int, field string) string {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), field); ok {
			return strings.Join(strings.Fields(rest), " ")
		}
	}
	return ""
}

// rootMountReadOnly reads the process's mountinfo: the options (6th field)
// of the mount at "/" (5th field) include ro.
func rootMountReadOnly(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 5 && f[4] == "/" {
			for _, o := range strings.Split(f[5], ",") {
				if o == "ro" {
					return true
				}
			}
			return false
		}
	}
	return false
}

// portForward runs `kubectl port-forward TARGET LOCAL:REMOTE` in NS until the
// test ends and returns LOCAL, a free port (not a fixed one: runs share the machine).
func portForward(t *testing.T, ns, target string, remote int) int {
	t.Helper()
	local := freePort()
	cmd := exec.Command(filepath.Join(bin, "kubectl"), "--kubeconfig", kubeconfig, "-n", ns,
		"port-forward", target, fmt.Sprintf("%d:%d", local, remote))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := make(chan bool, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			if strings.HasPrefix(s.Text(), "Forwarding from") {
				ready <- true
				break
			}
		}
		ready <- false
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("kubectl port-forward %s ended: %s", target, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("kubectl port-forward %s did not start: %s", target, stderr.String())
	}
	return local
}
