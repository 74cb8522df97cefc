// Package testenv starts a real kube-apiserver and etcd (envtest, with the
// binaries `make tools` builds into bin/) for the controllers' integration
// tests, and counts the writes a client sends so tests can assert "zero writes".
package testenv

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// RepoRoot is the repository's top directory, found from this file.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Start runs a control plane with the CRDs from config/crd/bases installed.
// It fails when the binaries are missing instead of downloading anything.
func Start(scheme *k8sruntime.Scheme) (*envtest.Environment, *rest.Config, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(RepoRoot(), "bin")
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			return nil, nil, fmt.Errorf("%s not found in %s: run `make tools` first", bin, assets)
		}
	}
	env := &envtest.Environment{
		Scheme:                scheme,
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop() // Start may fail after launching etcd and the API server
		return nil, nil, fmt.Errorf("starting envtest: %w", err)
	}
	return env, cfg, nil
}

// WriteCounter counts mutating requests (POST, PUT, PATCH, DELETE) sent through
// a rest.Config it wrapped.
type WriteCounter struct {
	n     atomic.Int64
	mu    sync.Mutex
	paths []string
}

// Wrap returns a copy of cfg whose requests are counted.
func (c *WriteCounter) Wrap(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			switch req.Method {
			case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
				c.n.Add(1)
				c.mu.Lock()
				c.paths = append(c.paths, req.Method+" "+req.URL.Path)
				c.mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	return out
}

// Writes returns the number of writes so far and what they were.
func (c *WriteCounter) Writes() (int64, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n.Load(), append([]string(nil), c.paths...)
}

// Reset forgets the writes counted so far.
func (c *WriteCounter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n.Store(0)
	c.paths = nil
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
