package benchsite

import (
	"bytes"
	"maps"
	"path"
	"regexp"
	"strings"
	"testing"
)

var linkTarget = regexp.MustCompile(`\]\(([^)]+)\)`)

// TestRepositoryLinksResolve: the repository has exactly the pages asked
// for, is the same on every call, and every relative link of every page
// reaches a page, a folder with a page, or an image that is a PNG, as it
// would on GitHub.
func TestRepositoryLinksResolve(t *testing.T) {
	for _, pages := range []int{3, 100, 450} {
		files := Repository(pages, 2<<10, 4, 1<<10)
		if !maps.EqualFunc(files, Repository(pages, 2<<10, 4, 1<<10), bytes.Equal) {
			t.Fatalf("%d pages: two calls made different repositories", pages)
		}
		md := 0
		for name, body := range files {
			switch {
			case strings.HasSuffix(name, ".md"):
				md++
			case strings.HasSuffix(name, ".png"):
				if !bytes.HasPrefix(body, []byte("\x89PNG\r\n\x1a\n")) {
					t.Errorf("%s is not a PNG", name)
				}
				continue
			default:
				t.Errorf("unexpected file %s", name)
				continue
			}
			for _, m := range linkTarget.FindAllStringSubmatch(string(body), -1) {
				target, _, _ := strings.Cut(m[1], "#")
				resolved := path.Join(path.Dir(name), target)
				if strings.HasSuffix(target, "/") {
					resolved = path.Join(resolved, "README.md")
				}
				if _, ok := files[resolved]; !ok {
					t.Errorf("%d pages: %s links to %s, which resolves to %s: no such file", pages, name, m[1], resolved)
				}
			}
		}
		if md != pages {
			t.Errorf("%d pages asked, %d made", pages, md)
		}
	}
}
