package view

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/outcome"
)

// A MarkdownView with spec.source is served from a Flux source's artifact.
// The manager never holds the site: it reads the source's
// status.artifact (url, revision, digest, size), checks the size and
// streams the tarball once through SHA-256 (its memory does not grow with
// the site), and writes the artifact's address into the viewer's
// ConfigMap, one write per new revision. The viewers fetch it themselves,
// with no Kubernetes credentials, check the digest again while it streams
// and keep the last good site on any failure (internal/viewer).

// sourceGroup is Flux's source API group; every kind spec.source names is
// served at v1 by source-controller v1.7 and later.
const sourceGroup = "source.toolkit.fluxcd.io"

// SourceKinds are the Flux kinds spec.source may name.
var SourceKinds = []string{"GitRepository", "OCIRepository", "Bucket", "ExternalArtifact"}

func sourceGVK(kind string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: sourceGroup, Version: "v1", Kind: kind}
}

// maxArtifactBytes is the largest artifact the manager hands to viewers:
// the viewer's own download limit (viewer.DefaultLimits.Download).
const maxArtifactBytes = 32 << 20

// artifactVerifyTimeout bounds one check of an artifact's digest.
const artifactVerifyTimeout = time.Minute

// sourceRetry is how soon a view looks at its source again when what is
// wrong may change without an event: Flux installed after the manager
// started (its kinds are watched only when served at start-up), an
// artifact server that did not answer.
const sourceRetry = 30 * time.Second

// Condition reasons of a view served from a source.
const (
	ReasonFluxNotInstalled       = "FluxNotInstalled"
	ReasonSourceNotFound         = "SourceNotFound"
	ReasonArtifactNotReady       = "ArtifactNotReady"
	ReasonArtifactTooLarge       = "ArtifactTooLarge"
	ReasonArtifactDigestMismatch = "ArtifactDigestMismatch"
	ReasonArtifactUnreachable    = "ArtifactUnreachable"
	ReasonArtifactHostRefused    = "ArtifactHostRefused"
)

// artifactHostAllowed reports whether the manager may fetch rawURL: plain
// HTTP or HTTPS on one of hosts, each a host name (any port) or a
// host:port. A source's status.artifact.url is written by whoever may
// write the source's status (Flux's own flux-edit role, aggregated into
// every namespace's edit, grants it), so without this a namespace editor
// would make the manager GET any address its network reaches.
func artifactHostAllowed(rawURL string, hosts []string) bool {
	u, err := neturl.Parse(rawURL)
	if err != nil || !artifactSchemes[u.Scheme] || u.User != nil || u.Host == "" {
		return false
	}
	name := normalHost(u.Hostname())
	for _, h := range hosts {
		host, port, err := net.SplitHostPort(h)
		if err != nil { // no port: any port
			if normalHost(h) == name {
				return true
			}
			continue
		}
		if normalHost(host) == name && port == u.Port() {
			return true
		}
	}
	return false
}

// artifactSchemes are the schemes Flux serves artifacts over.
var artifactSchemes = map[string]bool{"http": true, "https": true}

// normalHost spells a host name one way: lower case, no final dot.
func normalHost(h string) string {
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// errDigestMismatch is what verifyArtifact returns for an artifact whose
// bytes are not the ones its digest names.
var errDigestMismatch = errors.New("the artifact's bytes do not match its digest")

// errArtifactTooLarge is what verifyArtifact returns for an artifact over
// maxArtifactBytes.
var errArtifactTooLarge = errors.New("the artifact is too large")

// artifact is the address of a source's artifact, as the viewers read it
// (viewer.Artifact: the same JSON).
type artifact struct {
	URL      string `json:"url"`
	Digest   string `json:"digest"`
	Revision string `json:"revision"`
	Path     string `json:"path,omitempty"`
}

// artifactKey is the ConfigMap key the viewers read the artifact from
// (viewer.ArtifactFile).
const artifactKey = "artifact.json"

// verifier checks an artifact's size and digest; a fake in tests.
type verifier func(ctx context.Context, url, digest string) error

// resolveSource reads the view's source and, when its artifact is new and
// sound, records it in obs for the ConfigMap. What a person must fix (Flux
// missing, no such source, an artifact too large) stops the reconcile as
// Stalled; what may pass (no artifact yet, a digest that does not match,
// an artifact server that does not answer) keeps the site as it is and is
// looked at again (Reconciling). Either way the viewers keep serving the
// last good artifact: their ConfigMap is not touched.
func (r *Reconciler) resolveSource(ctx context.Context, mv *viewv1.MarkdownView, obs *observation) error {
	ref := mv.Spec.Source
	if ref.Kind == "" {
		return nil
	}
	src := &unstructured.Unstructured{}
	src.SetGroupVersionKind(sourceGVK(ref.Kind))
	err := r.uncached.Get(ctx, client.ObjectKey{Namespace: mv.Namespace, Name: ref.Name}, src)
	switch {
	case meta.IsNoMatchError(err):
		return blockLookAgain(ReasonFluxNotInstalled, fmt.Sprintf("the cluster does not serve %s %s/v1: Flux's source-controller is not installed; the site keeps what it serves until it is", ref.Kind, sourceGroup))
	case apierrors.IsNotFound(err):
		return blockLookAgain(ReasonSourceNotFound, fmt.Sprintf("%s %s not found in namespace %s; the site keeps what it serves until it exists", ref.Kind, ref.Name, mv.Namespace))
	case err != nil:
		return fmt.Errorf("reading %s %s: %w", ref.Kind, ref.Name, err)
	}
	a, size, ok := artifactOf(src)
	if !ok {
		obs.sourceWaiting = &conditions.Summary{Progress: conditions.Working, Reason: ReasonArtifactNotReady,
			Message: fmt.Sprintf("%s %s has no artifact yet", ref.Kind, ref.Name)}
		return nil
	}
	a.Path = strings.Trim(ref.Path, "/")
	if !artifactHostAllowed(a.URL, r.artifactHosts) {
		return outcome.Block(ReasonArtifactHostRefused, fmt.Sprintf("the artifact of %s %s is served from %s, not from a host the manager fetches artifacts from (its --artifact-hosts); the site keeps what it serves", ref.Kind, ref.Name, hostOf(a.URL)))
	}
	if size > maxArtifactBytes {
		return blockLookAgain(ReasonArtifactTooLarge, artifactTooLargeMessage(ref, a, size))
	}
	if mv.Status.Source.Digest == a.Digest && mv.Status.Source.Revision == a.Revision {
		obs.artifact = &a // checked already
		return nil
	}
	verifyCtx, cancel := context.WithTimeout(ctx, artifactVerifyTimeout)
	defer cancel()
	switch err := r.verify(verifyCtx, a.URL, a.Digest); {
	case errors.Is(err, errArtifactTooLarge):
		return blockLookAgain(ReasonArtifactTooLarge, artifactTooLargeMessage(ref, a, -1))
	case errors.Is(err, errDigestMismatch):
		obs.sourceWaiting = &conditions.Summary{Progress: conditions.Working, Reason: ReasonArtifactDigestMismatch,
			Message: fmt.Sprintf("the artifact of %s %s (revision %s) does not match its digest %s: %v; %s", ref.Kind, ref.Name, a.Revision, a.Digest, err, keptMessage(mv))}
		return nil
	case err != nil:
		obs.sourceWaiting = &conditions.Summary{Progress: conditions.Working, Reason: ReasonArtifactUnreachable,
			Message: fmt.Sprintf("fetching the artifact of %s %s (revision %s): %v; %s", ref.Kind, ref.Name, a.Revision, err, keptMessage(mv))}
		return nil
	}
	obs.artifact = &a
	return nil
}

func blockLookAgain(reason, message string) error {
	return lookAgain{error: outcome.Block(reason, message)}
}

// lookAgain marks a Block that may lift without an event.
type lookAgain struct{ error }

func (l lookAgain) Unwrap() error { return l.error }

func artifactTooLargeMessage(ref viewv1.SourceReference, a artifact, size int64) string {
	if size < 0 {
		return fmt.Sprintf("the artifact of %s %s (revision %s) is over the %d bytes viewers fetch; the site keeps what it serves until it is smaller", ref.Kind, ref.Name, a.Revision, maxArtifactBytes)
	}
	return fmt.Sprintf("the artifact of %s %s (revision %s) takes %d bytes, over the %d viewers fetch; the site keeps what it serves until it is smaller", ref.Kind, ref.Name, a.Revision, size, maxArtifactBytes)
}

func keptMessage(mv *viewv1.MarkdownView) string {
	if r := mv.Status.Source.Revision; r != "" {
		return "the site keeps serving revision " + r
	}
	return "nothing is served yet"
}

// artifactOf reads status.artifact of a Flux source: its url, revision and
// digest (all required), and its size (-1 when not given).
func artifactOf(src *unstructured.Unstructured) (artifact, int64, bool) {
	url, _, _ := unstructured.NestedString(src.Object, "status", "artifact", "url")
	revision, _, _ := unstructured.NestedString(src.Object, "status", "artifact", "revision")
	digest, _, _ := unstructured.NestedString(src.Object, "status", "artifact", "digest")
	size, found, _ := unstructured.NestedInt64(src.Object, "status", "artifact", "size")
	if !found {
		size = -1
	}
	if url == "" || revision == "" || !strings.HasPrefix(digest, "sha256:") {
		return artifact{}, 0, false
	}
	return artifact{URL: url, Revision: revision, Digest: digest}, size, true
}

// hostOf is rawURL's host, for a message: never its path or query.
func hostOf(rawURL string) string {
	if u, err := neturl.Parse(rawURL); err == nil && u.Host != "" {
		return u.Host
	}
	return "an address that is no URL"
}

// artifactData is the ConfigMap content that points the viewers at a.
func artifactData(a artifact) map[string]string {
	b, _ := json.Marshal(a) // strings only: cannot fail
	return map[string]string{artifactKey: string(b)}
}

// httpVerifier streams the artifact at url through SHA-256, reading at
// most maxArtifactBytes, and compares the sum with digest. It keeps
// nothing: the manager's memory is the copy buffer's. It follows no
// redirect: one would lead past the hosts the URL was checked against.
func httpVerifier(c *http.Client) verifier {
	noRedirects := *c
	noRedirects.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c = &noRedirects
	return func(ctx context.Context, url, digest string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s answered %s", url, resp.Status)
		}
		h := sha256.New()
		n, err := io.Copy(h, io.LimitReader(resp.Body, maxArtifactBytes+1))
		if err != nil {
			return err
		}
		if n > maxArtifactBytes {
			return errArtifactTooLarge
		}
		if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != digest {
			return fmt.Errorf("%w: read %s", errDigestMismatch, got)
		}
		return nil
	}
}

// viewsOfSource maps a Flux source to the MarkdownViews of its namespace
// that name it (from the cache, which keeps spec.source).
func (r *Reconciler) viewsOfSource(kind string) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		var views viewv1.MarkdownViewList
		if err := r.client.List(ctx, &views, client.InNamespace(obj.GetNamespace())); err != nil {
			return nil
		}
		var reqs []reconcile.Request
		for _, mv := range views.Items {
			if mv.Spec.Source.Kind == kind && mv.Spec.Source.Name == obj.GetName() {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&mv)})
			}
		}
		return reqs
	}
}

// sourceMetadata is the metadata-only object the manager watches a source
// kind with: the cache keeps no spec or status of anyone's sources, and
// each status change still brings an event.
func sourceMetadata(kind string) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(sourceGVK(kind))
	return m
}
