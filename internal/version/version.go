// Package version says which build of Trellis is running: the release it was
// built as and the commit it was built from. The release is set at link time
// (`make images` and `make release` pass -ldflags "-X
// github.com/trellis-dev/trellis/internal/version.Version=v0.1.0"); the commit
// comes from Go's VCS stamp unless the link sets it too (the Dockerfile's
// build, which has no .git, does).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set at link time with -ldflags -X; see the package comment.
var (
	// Version is the release, e.g. v0.1.0; "dev" for a build that names none.
	Version = "dev"
	// Revision is the commit; empty: the VCS stamp of the Go build.
	Revision = ""
)

// Info is what a build says about itself.
type Info struct {
	Version   string // v0.1.0, or dev
	Revision  string // the commit (with -dirty when built from a modified tree), or unknown
	GoVersion string // the Go toolchain, e.g. go1.26.8
}

// Get is this binary's Info.
func Get() Info {
	return get(Version, Revision, debug.ReadBuildInfo)
}

func get(version, revision string, buildInfo func() (*debug.BuildInfo, bool)) Info {
	if version == "" {
		version = "dev"
	}
	if revision == "" {
		revision = vcsRevision(buildInfo)
	}
	return Info{Version: version, Revision: revision, GoVersion: runtime.Version()}
}

// vcsRevision is the commit Go stamped into the binary (go build in a git
// checkout does, unless -buildvcs=false), "-dirty" when the tree had changes;
// "unknown" when there is no stamp (go test, go run of a file, no .git).
func vcsRevision(buildInfo func() (*debug.BuildInfo, bool)) string {
	bi, ok := buildInfo()
	if !ok {
		return "unknown"
	}
	var revision, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if revision == "" {
		return "unknown"
	}
	if modified == "true" {
		revision += "-dirty"
	}
	return revision
}

// String is the one line --version prints after the program's name:
// "v0.1.0 (revision 0123abc…, go1.26.8)".
func (i Info) String() string {
	return fmt.Sprintf("%s (revision %s, %s)", i.Version, i.Revision, i.GoVersion)
}
