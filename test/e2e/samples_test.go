//go:build e2e

package e2e

import (
	"crypto/tls"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSamplesBecomeReady applies config/samples and waits, as a user would,
// with `kubectl wait --for=condition=Ready`.
func TestSamplesBecomeReady(t *testing.T) {
	useLocalManager(t)
	applySamples(t)
	for _, obj := range []string{"markdownview/markdownview-sample", "tenant/team-a", "objectstore/local-s3", "storagebucket/assets"} {
		if _, err := kubectl("wait", "--for=condition=Ready", obj, "-n", "default", "--timeout=120s"); err != nil {
			t.Fatal(err)
		}
	}
	// The viewer Deployment really became Available: its pod passed its
	// readiness probe on the real node, where namespace default is steered.
	out, err := kubectl("get", "deployment", "viewer-markdownview-sample", "-n", "default",
		"-o", `jsonpath={.status.availableReplicas}`)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out) != "1" {
		t.Fatalf("availableReplicas = %q, want 1", out)
	}
	// The printer columns show what the issue promises.
	out, err = kubectl("get", "markdownview", "markdownview-sample", "-n", "default")
	if err != nil {
		t.Fatal(err)
	}
	for _, col := range []string{"REPLICAS", "AVAILABLE", "READY", "URL", "AGE", "http://viewer-markdownview-sample.default.svc"} {
		if !strings.Contains(out, col) {
			t.Errorf("kubectl get markdownview lacks %q:\n%s", col, out)
		}
	}
}

// TestDefaultManifestsApply checks that `kustomize build config/default` is
// accepted by a real API server (server-side dry run).
func TestDefaultManifestsApply(t *testing.T) {
	manifests, err := exec.Command(filepath.Join(bin, "kustomize"), "build", filepath.Join(root, "config", "default")).Output()
	if err != nil {
		t.Fatalf("kustomize build config/default: %v %s", err, exitStderr(err))
	}
	if _, err := kubectlIn(manifests, "apply", "--server-side", "--dry-run=server", "-f", "-"); err != nil {
		t.Fatal(err)
	}
}

// TestMetricsRefuseAnonymousScrapes: the metrics endpoint is HTTPS and asks
// the API server to authenticate and authorize every scrape.
func TestMetricsRefuseAnonymousScrapes(t *testing.T) {
	m := useLocalManager(t)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // self-signed serving cert of a local process
	}}
	resp, err := c.Get("https://" + m.metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		t.Fatalf("anonymous scrape got %s, want 401 or 403", resp.Status)
	}
}
