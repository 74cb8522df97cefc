package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// SourceControllerCRDs is the directory of Flux source-controller's CRDs
// that `make source-controller` copies into bin/ from the module it pins.
func SourceControllerCRDs() (string, error) {
	dir := filepath.Join(RepoRoot(), "bin", "source-controller-crds")
	if _, err := os.Stat(filepath.Join(dir, "source.toolkit.fluxcd.io_gitrepositories.yaml")); err != nil {
		return "", fmt.Errorf("source-controller's CRDs are not in %s: run `make source-controller` first", dir)
	}
	return dir, nil
}

// GitRepository is a Flux GitRepository of url's branch main, polled
// every second. Its ignore list is its own: Flux's default drops images
// (*.png, *.jpg...) from the artifact.
func GitRepository(ns, name, url string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "source.toolkit.fluxcd.io/v1",
		"kind":       "GitRepository",
		"metadata":   map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{
			"url":      url,
			"interval": "1s",
			"timeout":  "20s",
			"ref":      map[string]any{"branch": "main"},
			"ignore":   "/.git/\n",
		},
	}}
}

// SourceController is Flux's source-controller (bin/source-controller), run
// out of cluster against an envtest API server, its artifacts stored in a
// temporary directory and served on loopback.
type SourceController struct {
	// Storage is the directory of the artifacts, for tests that tamper with one.
	Storage string
	// StorageAddr is where it serves them (host:port).
	StorageAddr string

	process
}

// StartSourceController runs source-controller as cfg's user (cluster-admin
// in the tests: it is Flux's controller, not the one under test) until Stop.
func StartSourceController(cfg *rest.Config) (*SourceController, error) {
	bin := filepath.Join(RepoRoot(), "bin", "source-controller")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("source-controller is not in bin/: run `make source-controller` first")
	}
	dir, err := os.MkdirTemp("", "source-controller-")
	if err != nil {
		return nil, err
	}
	sc := &SourceController{Storage: filepath.Join(dir, "storage"), process: process{dir: dir, grace: 10 * time.Second}}
	if err := os.Mkdir(sc.Storage, 0o755); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(cfg, kubeconfig); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	sc.StorageAddr = "127.0.0.1:" + strconv.Itoa(ports[0])
	cmd := exec.Command(bin,
		"--storage-path="+sc.Storage,
		"--storage-addr="+sc.StorageAddr,
		"--storage-adv-addr="+sc.StorageAddr,
		"--metrics-addr=127.0.0.1:"+strconv.Itoa(ports[1]),
		"--health-addr=127.0.0.1:"+strconv.Itoa(ports[2]),
		"--enable-leader-election=false",
		"--log-level=error",
	)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "RUNTIME_NAMESPACE=flux-system")
	if err := sc.start(cmd); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("starting source-controller: %w", err)
	}
	// Up when its artifact server answers (with 404 for /: no artifact).
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if ended, err := sc.exited(); ended {
			return nil, errors.Join(fmt.Errorf("source-controller exited: %w\n%s", err, sc.Log()), sc.Stop())
		}
		if resp, err := http.Get("http://" + sc.StorageAddr + "/"); err == nil {
			_ = resp.Body.Close()
			return sc, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil, errors.Join(fmt.Errorf("source-controller's artifact server did not answer on %s\n%s", sc.StorageAddr, sc.Log()), sc.Stop())
}

// writeKubeconfig writes cfg (an envtest user's: certificate or token; or
// a kubeconfig's, whose certificates may be files) as a kubeconfig file.
func writeKubeconfig(cfg *rest.Config, path string) error {
	cfg = rest.CopyConfig(cfg)
	if err := rest.LoadTLSFiles(cfg); err != nil {
		return err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken,
	}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest"}
	kc.CurrentContext = "envtest"
	return clientcmd.WriteToFile(*kc, path)
}

func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// GitServer is a real Git repository served over smart HTTP on loopback by
// git's own http-backend (Debian's git), with a work tree the test commits
// to and pushes from.
type GitServer struct {
	// URL of the repository, for a GitRepository's spec.url.
	URL string

	root, work string
	srv        *httptest.Server
}

// StartGitServer creates a bare repository "site.git" with a branch main
// and serves it until Stop.
func StartGitServer() (*GitServer, error) {
	backend, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return nil, fmt.Errorf("git is not installed: %w", err)
	}
	root, err := os.MkdirTemp("", "git-server-")
	if err != nil {
		return nil, err
	}
	g := &GitServer{root: filepath.Join(root, "repos"), work: filepath.Join(root, "work")}
	bare := filepath.Join(g.root, "site.git")
	for _, args := range [][]string{
		{"init", "--quiet", "--bare", "--initial-branch=main", bare},
		{"-C", bare, "config", "http.receivepack", "true"},
		{"init", "--quiet", "--initial-branch=main", g.work},
		// Pushes of up to 64 MiB in one request with a length: git sends
		// larger ones (by default over 1 MiB) chunked, which CGI cannot pass on.
		{"-C", g.work, "config", "http.postBuffer", strconv.Itoa(64 << 20)},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			_ = os.RemoveAll(root)
			return nil, fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, out)
		}
	}
	g.srv = httptest.NewServer(&cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(backend)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + g.root, "GIT_HTTP_EXPORT_ALL=1"},
	})
	g.URL = g.srv.URL + "/site.git"
	return g, nil
}

// Push replaces the work tree's files by files (path: content), commits
// and pushes to main, and returns the commit's hash.
func (g *GitServer) Push(ctx context.Context, files map[string][]byte) (string, error) {
	commit, err := g.Commit(ctx, files)
	if err != nil {
		return "", err
	}
	return commit, g.PushCommitted(ctx)
}

// Commit replaces the work tree's files by files (path: content) and
// commits, without pushing; it returns the commit's hash.
func (g *GitServer) Commit(ctx context.Context, files map[string][]byte) (string, error) {
	entries, err := os.ReadDir(g.work)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if e.Name() != ".git" {
			if err := os.RemoveAll(filepath.Join(g.work, e.Name())); err != nil {
				return "", err
			}
		}
	}
	for name, body := range files {
		path := filepath.Join(g.work, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(path, body, 0o644); err != nil {
			return "", err
		}
	}
	if _, err := g.git(ctx, "add", "--all"); err != nil {
		return "", err
	}
	if _, err := g.git(ctx, "commit", "--quiet", "--allow-empty", "-m", "update"); err != nil {
		return "", err
	}
	return g.git(ctx, "rev-parse", "HEAD")
}

// PushCommitted pushes what Commit committed to main.
func (g *GitServer) PushCommitted(ctx context.Context) error {
	_, err := g.git(ctx, "push", "--quiet", g.URL, "main")
	return err
}

// git runs git in the work tree, as the test's author.
func (g *GitServer) git(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", g.work}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// Stop stops serving and removes the repositories.
func (g *GitServer) Stop() error {
	g.srv.Close()
	return os.RemoveAll(filepath.Dir(g.root))
}
