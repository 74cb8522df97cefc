// Package fluxsource tests MarkdownViews served from a Flux source against
// the real engine: Flux's source-controller (bin/source-controller, run out
// of cluster against envtest's API server) serving a GitRepository from a
// real Git server on loopback (git http-backend), the manager under its
// real RBAC, and the viewer in-process, reading the ConfigMap's artifact
// as its pods would from their volume.
package fluxsource

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/controller/view"
	"github.com/trellis-dev/trellis/internal/manager"
	"github.com/trellis-dev/trellis/internal/testenv"
	"github.com/trellis-dev/trellis/internal/viewer"
)

var (
	k8s   client.Client
	suite *testenv.Suite
	// mgrWrites counts the manager's writes.
	mgrWrites testenv.WriteCounter
)

func TestMain(m *testing.M) {
	suite = &testenv.Suite{
		AddToScheme: []func(*k8sruntime.Scheme) error{viewv1.AddToScheme, gatewayv1.Install},
		Admission:   true,
		FluxSource:  true,
		Options: func(opts *manager.Options) {
			opts.ViewerImage = "example.com/viewer:test"
			// source-controller's storage, and "localhost" (any port)
			// standing for a trusted producer of ExternalArtifacts: a
			// server on 127.0.0.1 other than source-controller's is an
			// address the manager must not be aimed at.
			opts.ArtifactHosts = []string{suite.SourceController.StorageAddr, "localhost"}
		},
		Controllers: []setup.Controller{view.Controller},
		Wrap:        mgrWrites.Wrap,
	}
	os.Exit(suite.Run(m, func(s *testenv.Suite) error {
		k8s = s.Client
		return nil
	}))
}

const (
	timeout  = 60 * time.Second
	interval = 100 * time.Millisecond
)

// png is the smallest file the viewer serves as a PNG: its signature.
var png = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR")

func site(readme string) map[string][]byte {
	return map[string][]byte{
		"README.md":           []byte(readme),
		"guide/README.md":     []byte("# Guide\n\n![Logo](../img/logo.png)\n\n[Setup](setup.md)"),
		"guide/setup.md":      []byte("# Setup\n\n[Back home](../README.md)"),
		"img/logo.png":        png,
		"main.go":             []byte("package main"),
		".github/CODEOWNERS":  []byte("* @team"),
		"guide/deep/notes.md": []byte("# Notes"),
	}
}

func newNamespace(ctx context.Context, t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "site-"}}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func markdownView(ns, name string, src viewv1.SourceReference) *viewv1.MarkdownView {
	return &viewv1.MarkdownView{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       viewv1.MarkdownViewSpec{Source: src},
	}
}

// podViewer is a viewer of the view "handbook" as a pod runs it: its
// artifact file is the ConfigMap's key, copied here as the kubelet would copy it into the volume.
type podViewer struct {
	t    *testing.T
	key  client.ObjectKey
	file string
	src  *viewer.ArtifactSource
	srv  http.Handler
}

func newPodViewer(t *testing.T, ns string) *podViewer {
	file := filepath.Join(t.TempDir(), viewer.ArtifactFile)
	src := &viewer.ArtifactSource{File: file, Client: &http.Client{Timeout: 10 * time.Second},
		Limits: viewer.DefaultLimits, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return &podViewer{t: t, key: client.ObjectKey{Namespace: ns, Name: "markdowns-handbook"}, file: file, src: src,
		srv: viewer.NewServer(src, slog.New(slog.NewTextHandler(io.Discard, nil)))}
}

// sync copies the ConfigMap's artifact into the file and lets the viewer
// fetch what it names.
func (p *podViewer) sync(ctx context.Context) error {
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, p.key, cm); err != nil {
		return err
	}
	if err := os.WriteFile(p.file, []byte(cm.Data[viewer.ArtifactFile]), 0o644); err != nil {
		return err
	}
	p.src.Sync(ctx)
	return nil
}

func (p *podViewer) get(path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	p.srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}

// servedRevision is the revision the viewer serves, once the ConfigMap's
// artifact is fetched.
func (p *podViewer) servedRevision(ctx context.Context) func(Gomega) string {
	return func(g Gomega) string {
		g.Expect(p.sync(ctx)).To(Succeed())
		return p.src.Status().Serving.Revision
	}
}

func getView(ctx context.Context, g Gomega, ns, name string) *viewv1.MarkdownView {
	mv := &viewv1.MarkdownView{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, mv)).To(Succeed())
	return mv
}

func readyReason(mv *viewv1.MarkdownView) string {
	if c := conditions.Get(mv.Status.Conditions, conditions.Ready); c != nil {
		return c.Reason
	}
	return ""
}

// TestGitRepositorySite serves a repository as a site: its folders, the
// relative links between its pages and to its images, a folder's README
// as its page, nothing that is neither Markdown nor an image; and a push
// reaches the served site within seconds.
func TestGitRepositorySite(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	git, err := testenv.StartGitServer()
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = git.Stop() }()
	first, err := git.Push(ctx, site("# Handbook\n\nSee [the guide](guide/) and [setup](guide/setup.md)."))
	g.Expect(err).NotTo(HaveOccurred())

	ns := newNamespace(ctx, t)
	g.Expect(k8s.Create(ctx, testenv.GitRepository(ns, "handbook", git.URL))).To(Succeed())
	g.Expect(k8s.Create(ctx, markdownView(ns, "handbook", viewv1.SourceReference{Kind: "GitRepository", Name: "handbook"}))).To(Succeed())

	pod := newPodViewer(t, ns)
	g.Eventually(pod.servedRevision(ctx), timeout, interval).Should(Equal("main@sha1:" + first))
	g.Eventually(func(g Gomega) string {
		return getView(ctx, g, ns, "handbook").Status.Source.Revision
	}, timeout, interval).Should(Equal("main@sha1:" + first))

	root := pod.get("/").Body.String()
	g.Expect(root).To(ContainSubstring(`<a href="guide/">the guide</a>`))
	g.Expect(root).To(ContainSubstring(`<a href="guide/setup.md">setup</a>`))
	g.Expect(root).To(ContainSubstring("Revision main@sha1:" + first))
	g.Expect(root).To(ContainSubstring(`<a href="/guide/deep/notes.md">notes</a>`))
	guide := pod.get("/guide/")
	g.Expect(guide.Code).To(Equal(http.StatusOK))
	g.Expect(guide.Body.String()).To(ContainSubstring(`<img src="../img/logo.png" alt="Logo">`))
	g.Expect(pod.get("/img/logo.png").Header().Get("Content-Type")).To(Equal("image/png"))
	g.Expect(pod.get("/guide/setup.md").Body.String()).To(ContainSubstring(`<a href="../README.md">Back home</a>`))
	for _, path := range []string{"/main.go", "/.github/CODEOWNERS"} {
		g.Expect(pod.get(path).Code).To(Equal(http.StatusNotFound), path)
	}

	// No write beyond what changes: events on the source that bring no new
	// artifact (here, labels) make the manager write nothing at all.
	mgrWrites.Reset()
	for i := range 3 {
		src := &unstructured.Unstructured{}
		src.SetGroupVersionKind(schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "GitRepository"})
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "handbook"}, src)).To(Succeed())
		src.SetLabels(map[string]string{"touched": strconv.Itoa(i)})
		g.Expect(k8s.Update(ctx, src)).To(Succeed())
	}
	g.Consistently(func() []string { _, paths := mgrWrites.Writes(); return paths }, 3*time.Second, interval).Should(BeEmpty())

	// The pods read the artifact's address from their volume and download
	// into a bounded /tmp (the root filesystem is read-only).
	d := &appsv1.Deployment{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "viewer-handbook"}, d)).To(Succeed())
	spec := d.Spec.Template.Spec
	g.Expect(spec.Containers[0].Args).To(ContainElement("--artifact=/markdown/" + viewer.ArtifactFile))
	g.Expect(spec.Containers[0].VolumeMounts).To(ContainElement(HaveField("MountPath", "/tmp")))
	g.Expect(spec.Volumes).To(ContainElement(HaveField("EmptyDir.SizeLimit.String()", "64Mi")))
	g.Expect(*spec.AutomountServiceAccountToken).To(BeFalse())

	// A push: source-controller (polling every second) makes an artifact,
	// the manager points the viewers at it, they fetch it.
	pushed := time.Now()
	second, err := git.Push(ctx, site("# Handbook, second edition"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(pod.servedRevision(ctx), timeout, interval).Should(Equal("main@sha1:" + second))
	took := time.Since(pushed)
	t.Logf("push to served: %s", took)
	g.Expect(took).To(BeNumerically("<", 20*time.Second))
	g.Expect(pod.get("/").Body.String()).To(ContainSubstring("second edition"))
}

// externalArtifact is an ExternalArtifact whose status.artifact the test
// writes, as the producer of one does: a source of any bytes, digest and
// size it says.
func externalArtifact(ctx context.Context, g Gomega, ns, name, url, digest string, size int64) {
	externalArtifactAs(ctx, g, k8s, ns, name, url, digest, size)
}

func externalArtifactAs(ctx context.Context, g Gomega, k8s client.Client, ns, name, url, digest string, size int64) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "source.toolkit.fluxcd.io/v1",
		"kind":       "ExternalArtifact",
		"metadata":   map[string]any{"namespace": ns, "name": name},
		"spec":       map[string]any{},
	}}
	g.Expect(k8s.Create(ctx, u)).To(Succeed())
	u.Object["status"] = map[string]any{"artifact": map[string]any{
		"url": url, "digest": digest, "revision": "v1@" + digest, "path": "ext/" + name + ".tar.gz",
		"size": size, "lastUpdateTime": time.Now().UTC().Format(time.RFC3339),
	}}
	g.Expect(k8s.Status().Update(ctx, u)).To(Succeed())
}

func tarball(g Gomega, files map[string][]byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range files {
		g.Expect(tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})).To(Succeed())
		_, err := tw.Write(body)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(tw.Close()).To(Succeed())
	g.Expect(zw.Close()).To(Succeed())
	return buf.Bytes()
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// TestFailedArtifactKeepsTheLastGoodSite: once a view serves a
// GitRepository's site, pointing it at an artifact whose bytes do not
// match its digest, at one too large, or at a source that does not exist
// leaves the viewers' ConfigMap as it was (the site served stays) and says
// why: Reconciling for the digest (it may be repaired), Stalled for the
// others (a person must act).
func TestFailedArtifactKeepsTheLastGoodSite(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	git, err := testenv.StartGitServer()
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = git.Stop() }()
	good, err := git.Push(ctx, site("# Good site"))
	g.Expect(err).NotTo(HaveOccurred())

	// An artifact server for the ExternalArtifacts.
	tampered := tarball(g, map[string][]byte{"README.md": []byte("# Tampered")})
	noise := make([]byte, 33<<20) // over the 32 MiB viewers fetch, incompressible
	_, _ = rand.Read(noise)
	big := tarball(g, map[string][]byte{"README.md": []byte("# Big"), "noise.bin": noise})
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/tampered.tar.gz":
			_, _ = w.Write(tampered)
		case "/big.tar.gz":
			_, _ = w.Write(big)
		default:
			http.NotFound(w, r)
		}
	}))
	defer files.Close()
	producer := strings.Replace(files.URL, "127.0.0.1", "localhost", 1)

	ns := newNamespace(ctx, t)
	g.Expect(k8s.Create(ctx, testenv.GitRepository(ns, "handbook", git.URL))).To(Succeed())
	g.Expect(k8s.Create(ctx, markdownView(ns, "handbook", viewv1.SourceReference{Kind: "GitRepository", Name: "handbook"}))).To(Succeed())
	pod := newPodViewer(t, ns)
	g.Eventually(pod.servedRevision(ctx), timeout, interval).Should(Equal("main@sha1:" + good))
	cmKey := client.ObjectKey{Namespace: ns, Name: "markdowns-handbook"}
	goodCM := &corev1.ConfigMap{}
	g.Expect(k8s.Get(ctx, cmKey, goodCM)).To(Succeed())

	// The digest the source claims is another artifact's; the big one says
	// its size truthfully (the manager refuses it unread); the liar about
	// its size is caught while the manager streams it.
	externalArtifact(ctx, g, ns, "tampered", producer+"/tampered.tar.gz", digestOf([]byte("what was published")), int64(len(tampered)))
	externalArtifact(ctx, g, ns, "big", producer+"/big.tar.gz", digestOf(big), int64(len(big)))
	externalArtifact(ctx, g, ns, "big-unsized", producer+"/big.tar.gz", digestOf(big), 1024)

	for _, tc := range []struct {
		name    string
		src     viewv1.SourceReference
		reason  string
		stalled bool
	}{
		{"a digest that does not match", viewv1.SourceReference{Kind: "ExternalArtifact", Name: "tampered"}, view.ReasonArtifactDigestMismatch, false},
		{"an artifact too large", viewv1.SourceReference{Kind: "ExternalArtifact", Name: "big"}, view.ReasonArtifactTooLarge, true},
		{"an artifact larger than it says", viewv1.SourceReference{Kind: "ExternalArtifact", Name: "big-unsized"}, view.ReasonArtifactTooLarge, true},
		{"a missing source", viewv1.SourceReference{Kind: "GitRepository", Name: "gone"}, view.ReasonSourceNotFound, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			mv := getView(ctx, g, ns, "handbook")
			mv.Spec.Source = tc.src
			g.Expect(k8s.Update(ctx, mv)).To(Succeed())
			g.Eventually(func(g Gomega) {
				mv := getView(ctx, g, ns, "handbook")
				g.Expect(mv.Status.ObservedGeneration).To(Equal(mv.Generation))
				g.Expect(readyReason(mv)).To(Equal(tc.reason))
				g.Expect(conditions.IsTrue(mv.Status.Conditions, conditions.Stalled)).To(Equal(tc.stalled))
				g.Expect(conditions.IsTrue(mv.Status.Conditions, conditions.Reconciling)).To(Equal(!tc.stalled))
				g.Expect(mv.Status.Source.Revision).To(Equal("main@sha1:" + good))
			}, timeout, interval).Should(Succeed())
			cm := &corev1.ConfigMap{}
			g.Expect(k8s.Get(ctx, cmKey, cm)).To(Succeed())
			g.Expect(cm.Data).To(Equal(goodCM.Data))
			g.Expect(pod.servedRevision(ctx)(g)).To(Equal("main@sha1:" + good))
			g.Expect(pod.get("/").Body.String()).To(ContainSubstring("Good site"))
		})
	}
}

// TestViewerRefusesAnArtifactChangedInStorage: the viewer checks the
// digest itself. A fresh viewer pointed at an artifact whose file was
// changed in source-controller's storage after it was published serves
// nothing of it, and one that served it before keeps serving it.
func TestViewerRefusesAnArtifactChangedInStorage(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	git, err := testenv.StartGitServer()
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = git.Stop() }()
	rev, err := git.Push(ctx, site("# Published"))
	g.Expect(err).NotTo(HaveOccurred())
	ns := newNamespace(ctx, t)
	g.Expect(k8s.Create(ctx, testenv.GitRepository(ns, "handbook", git.URL))).To(Succeed())
	g.Expect(k8s.Create(ctx, markdownView(ns, "handbook", viewv1.SourceReference{Kind: "GitRepository", Name: "handbook"}))).To(Succeed())
	before := newPodViewer(t, ns)
	g.Eventually(before.servedRevision(ctx), timeout, interval).Should(Equal("main@sha1:" + rev))

	// Every artifact of the namespace's GitRepository, rewritten in place.
	stored, err := filepath.Glob(filepath.Join(suite.SourceController.Storage, "gitrepository", ns, "handbook", "*.tar.gz"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stored).NotTo(BeEmpty())
	for _, f := range stored {
		g.Expect(os.WriteFile(f, tarball(g, map[string][]byte{"README.md": []byte("# Tampered")}), 0o644)).To(Succeed())
	}

	after := newPodViewer(t, ns)
	g.Expect(after.sync(ctx)).To(Succeed())
	g.Expect(after.src.Status().Error).To(ContainSubstring(viewer.ErrDigest.Error()))
	g.Expect(after.get("/").Code).To(Equal(http.StatusServiceUnavailable))
	g.Expect(after.get("/").Body.String()).NotTo(ContainSubstring("Tampered"))
	g.Expect(before.sync(ctx)).To(Succeed())
	g.Expect(before.get("/").Body.String()).To(ContainSubstring("Published"))
	g.Expect(strings.Contains(before.get("/").Body.String(), "Tampered")).To(BeFalse())
}
