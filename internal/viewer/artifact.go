package viewer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Artifact names the tarball of a Flux source that a site is served from:
// what the manager writes into the viewer's ConfigMap (ArtifactFile), one
// write per new revision.
type Artifact struct {
	// URL is where source-controller serves the tarball.
	URL string `json:"url"`
	// Digest is "sha256:<hex>", as in the source's status.artifact.
	Digest string `json:"digest"`
	// Revision is shown in the footer of every page.
	Revision string `json:"revision"`
	// Path is the folder of the artifact the site is made of ("" for all).
	Path string `json:"path,omitempty"`
}

// ArtifactFile is the ConfigMap key of the Artifact, as JSON.
const ArtifactFile = "artifact.json"

// ArtifactSource serves the site of the Artifact a file names (the mounted
// ConfigMap's ArtifactFile). Run fetches each new one, checks its digest
// while it streams, unpacks it within Limits and only then swaps it in: a
// failed fetch keeps the site served before it.
type ArtifactSource struct {
	// File holds the Artifact, as JSON.
	File string
	// Client fetches the tarball; it holds no credentials.
	Client *http.Client
	Limits Limits
	// Interval is how often File is read, and a failed fetch retried.
	Interval time.Duration
	Log      *slog.Logger

	snap   atomic.Pointer[Snapshot]
	mu     sync.Mutex
	status ArtifactStatus
}

// ArtifactStatus is what the source serves and the last fetch that failed:
// the viewer's /status.
type ArtifactStatus struct {
	// Serving is the artifact served ("" before the first good fetch).
	Serving Artifact `json:"serving"`
	// Failed is the artifact that could not be served, and Error why.
	Failed Artifact `json:"failed,omitzero"`
	Error  string   `json:"error,omitempty"`
}

// Status returns what the source serves and what it could not.
func (a *ArtifactSource) Status() ArtifactStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.status
}

// Version implements Source.
func (a *ArtifactSource) Version(context.Context) (string, error) {
	if s := a.snap.Load(); s != nil {
		return s.Version, nil
	}
	return "", errNoFilesYet
}

// Load implements Source.
func (a *ArtifactSource) Load(context.Context) (*Snapshot, error) {
	if s := a.snap.Load(); s != nil {
		return s, nil
	}
	return nil, errNoFilesYet
}

// Run reads File every Interval and serves each new Artifact it names,
// until ctx ends. An Artifact that failed is tried again at each Interval.
func (a *ArtifactSource) Run(ctx context.Context) {
	for {
		a.Sync(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(a.Interval):
		}
	}
}

// Sync serves the Artifact File names now, unless it is served already.
func (a *ArtifactSource) Sync(ctx context.Context) {
	want, err := readArtifactFile(a.File)
	if err != nil {
		a.fail(want, err)
		return
	}
	if cur := a.snap.Load(); cur != nil && cur.Version == versionOf(want) {
		return
	}
	snap, err := fetchArtifact(ctx, a.Client, want, a.Limits)
	if err != nil {
		a.fail(want, err)
		return
	}
	a.snap.Store(snap)
	a.mu.Lock()
	a.status = ArtifactStatus{Serving: want}
	a.mu.Unlock()
	a.Log.Info("serving artifact", "revision", want.Revision, "digest", want.Digest,
		"pages", len(snap.Pages), "images", len(snap.Assets))
}

func (a *ArtifactSource) fail(want Artifact, err error) {
	a.mu.Lock()
	first := a.status.Error != err.Error() || a.status.Failed != want
	a.status.Failed, a.status.Error = want, err.Error()
	a.mu.Unlock()
	if first {
		a.Log.Error("not serving artifact; the last good site stays", "revision", want.Revision, "err", err)
	}
}

func readArtifactFile(file string) (Artifact, error) {
	var want Artifact
	b, err := os.ReadFile(file)
	if err != nil {
		return want, fmt.Errorf("reading %s: %w", file, err)
	}
	if len(b) > 16<<10 {
		return want, fmt.Errorf("%s is over 16 KiB", file)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		return want, fmt.Errorf("reading %s: %w", file, err)
	}
	if !strings.HasPrefix(want.URL, "http://") && !strings.HasPrefix(want.URL, "https://") {
		return want, fmt.Errorf("artifact URL %q is not HTTP(S)", want.URL)
	}
	if _, err := sha256Digest(want.Digest); err != nil {
		return want, err
	}
	return want, nil
}

// versionOf names a site by what it is made of: a digest and a folder.
func versionOf(a Artifact) string { return "artifact:" + a.Digest + ":" + a.Path }

func sha256Digest(digest string) ([]byte, error) {
	hexSum, ok := strings.CutPrefix(digest, "sha256:")
	sum, err := hex.DecodeString(hexSum)
	if !ok || err != nil || len(sum) != sha256.Size {
		return nil, fmt.Errorf("digest %q is not sha256:<64 hex digits>", digest)
	}
	return sum, nil
}

// fetchArtifact downloads want into a temporary file, checking its size
// and digest on the way, and unpacks it only once both passed: no byte of
// an artifact whose digest is wrong is ever read as a page.
func fetchArtifact(ctx context.Context, c *http.Client, want Artifact, lim Limits) (*Snapshot, error) {
	sum, err := sha256Digest(want.Digest)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, want.URL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching the artifact: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching the artifact: %s", resp.Status)
	}
	if resp.ContentLength > lim.Download {
		return nil, fmt.Errorf("%w: the artifact has %d bytes, more than %d", ErrTooLarge, resp.ContentLength, lim.Download)
	}
	tmp, err := os.CreateTemp("", "artifact-*.tar.gz")
	if err != nil {
		return nil, err
	}
	defer func() { _ = tmp.Close(); _ = os.Remove(tmp.Name()) }()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(resp.Body, lim.Download+1))
	if err != nil {
		return nil, fmt.Errorf("fetching the artifact: %w", err)
	}
	if n > lim.Download {
		return nil, fmt.Errorf("%w: the artifact has more than %d bytes", ErrTooLarge, lim.Download)
	}
	if got := h.Sum(nil); string(got) != string(sum) {
		return nil, fmt.Errorf("%w: got sha256:%s, want %s", ErrDigest, hex.EncodeToString(got), want.Digest)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	snap, err := unpack(tmp, want.Path, lim)
	if err != nil {
		return nil, err
	}
	if len(snap.Pages) == 0 {
		return nil, fmt.Errorf("no Markdown page in the artifact's %q", "/"+want.Path)
	}
	snap.Version, snap.Revision = versionOf(want), want.Revision
	return snap, nil
}
