package view

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

func TestArtifactHostAllowed(t *testing.T) {
	hosts := []string{"source-controller.flux-system.svc.cluster.local.", "127.0.0.1:9090", "[::1]:9090"}
	for _, tc := range []struct {
		url  string
		want bool
	}{
		{"http://source-controller.flux-system.svc.cluster.local./gitrepository/ns/site/abc.tar.gz", true},
		{"http://source-controller.flux-system.svc.cluster.local/gitrepository/ns/site/abc.tar.gz", true},
		{"http://SOURCE-CONTROLLER.flux-system.svc.cluster.local.:80/a.tar.gz", true},
		{"https://source-controller.flux-system.svc.cluster.local./a.tar.gz", true},
		{"http://127.0.0.1:9090/a.tar.gz", true},
		{"http://[::1]:9090/a.tar.gz", true},
		{"http://127.0.0.1:9091/a.tar.gz", false},
		{"http://127.0.0.1/a.tar.gz", false},
		{"http://169.254.169.254/latest/meta-data/", false},
		{"http://kubernetes.default.svc/api", false},
		{"http://source-controller.flux-system.svc.cluster.local.evil.example/a.tar.gz", false},
		{"http://evil.example/source-controller.flux-system.svc.cluster.local./a.tar.gz", false},
		{"http://source-controller.flux-system.svc.cluster.local.@169.254.169.254/a.tar.gz", false},
		{"file:///etc/passwd", false},
		{"gopher://source-controller.flux-system.svc.cluster.local./", false},
		{"//source-controller.flux-system.svc.cluster.local./a.tar.gz", false},
		{"not a url", false},
	} {
		if got := artifactHostAllowed(tc.url, hosts); got != tc.want {
			t.Errorf("artifactHostAllowed(%q) = %v, want %v", tc.url, got, tc.want)
		}
	}
	if artifactHostAllowed("http://source-controller.flux-system.svc.cluster.local./a.tar.gz", nil) {
		t.Error("no hosts allowed one")
	}
}

// TestVerifierFollowsNoRedirect: an allowed artifact server that answers
// with a redirect does not lead the manager anywhere else.
func TestVerifierFollowsNoRedirect(t *testing.T) {
	body := []byte("artifact")
	sum := sha256.Sum256(body)
	var hits atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write(body)
	}))
	defer elsewhere.Close()
	redirector := httptest.NewServer(http.RedirectHandler(elsewhere.URL, http.StatusFound))
	defer redirector.Close()

	err := httpVerifier(&http.Client{})(context.Background(), redirector.URL, "sha256:"+hex.EncodeToString(sum[:]))
	if err == nil || !strings.Contains(err.Error(), "302") {
		t.Errorf("verify through a redirect: %v, want an error naming the 302", err)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the redirect's target got %d requests", n)
	}
}
