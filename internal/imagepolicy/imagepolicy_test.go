package imagepolicy

import (
	"strings"
	"testing"
)

func TestRepository(t *testing.T) {
	for in, want := range map[string]string{
		"viewer":                                                  "viewer",
		"viewer:1.2":                                              "viewer",
		"trellis-viewer:dev":                                      "trellis-viewer",
		"registry.example.com/team/viewer:1.2":                    "registry.example.com/team/viewer",
		"registry.example.com:5000/team/viewer":                   "registry.example.com:5000/team/viewer",
		"registry.example.com:5000/team/viewer:v1":                "registry.example.com:5000/team/viewer",
		"ghcr.io/a/b@sha256:" + strings.Repeat("a", 64):           "ghcr.io/a/b",
		"ghcr.io/a/b:1@sha256:" + strings.Repeat("a", 64):         "ghcr.io/a/b",
		"localhost:5000/viewer@sha256:" + strings.Repeat("0", 64): "localhost:5000/viewer",
	} {
		if got := Repository(in); got != want {
			t.Errorf("Repository(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAllows(t *testing.T) {
	digest := "@sha256:" + strings.Repeat("a", 64)
	cases := []struct {
		list, defaultImage string
		allowed, refused   []string
	}{{
		// The default: the repository of the manager's viewer, any tag or digest.
		defaultImage: "registry.example.com/trellis/viewer:v1",
		allowed:      []string{"registry.example.com/trellis/viewer", "registry.example.com/trellis/viewer:v2", "registry.example.com/trellis/viewer" + digest},
		refused: []string{"registry.example.com/trellis/viewer-evil:v1", "registry.example.com/trellis/viewer/sub:v1",
			"registry.example.com/trellis/other:v1", "evil.example.com/trellis/viewer:v1", "viewer:v1", "registry.example.com/trellis:v1"},
	}, {
		defaultImage: "trellis-viewer:dev",
		allowed:      []string{"trellis-viewer:dev", "trellis-viewer:other"},
		refused:      []string{"docker.io/library/trellis-viewer:dev", "trellis-viewer-x:dev", "nginx"},
	}, {
		list:    "registry.example.com/team/*",
		allowed: []string{"registry.example.com/team/viewer:1", "registry.example.com/team/sub/viewer" + digest},
		refused: []string{"registry.example.com/team:1", "registry.example.com/teamx/viewer:1", "registry.example.com/viewer:1"},
	}, {
		list:    "localhost:5000/*, ghcr.io/acme/docs-viewer",
		allowed: []string{"localhost:5000/x:1", "ghcr.io/acme/docs-viewer:2"},
		refused: []string{"localhost:5001/x:1", "ghcr.io/acme/docs-viewer-2:1", "ghcr.io/acme/other"},
	}, {
		list:    "*",
		allowed: []string{"anything:1", "registry.example.com/x/y" + digest},
	}}
	for _, tc := range cases {
		a, err := Parse(tc.list, tc.defaultImage)
		if err != nil {
			t.Fatalf("Parse(%q, %q): %v", tc.list, tc.defaultImage, err)
		}
		for _, img := range tc.allowed {
			if !a.Allows(img) {
				t.Errorf("%q refuses %q", a, img)
			}
		}
		for _, img := range tc.refused {
			if a.Allows(img) {
				t.Errorf("%q allows %q", a, img)
			}
		}
	}
}

func TestParseRefusesBadPatterns(t *testing.T) {
	for _, list := range []string{
		"viewer:1",                      // a tag
		"registry.example.com/viewer:1", // a tag
		"registry.example.com/viewer@sha256:" + strings.Repeat("a", 64),
		"registry.example.com/*/viewer", // * inside
		"registry.example.com/team*",    // * not after a /
		"**",
		"Registry.example.com/Team/viewer", // upper case in the path
		" , ",                              // no pattern at all
		"a b",
	} {
		if a, err := Parse(list, "viewer:1"); err == nil {
			t.Errorf("Parse(%q) = %q, want an error", list, a)
		}
	}
	if a, err := Parse("", "registry.example.com/viewer@sha256:"+strings.Repeat("a", 64)); err != nil || a.String() != "registry.example.com/viewer" {
		t.Errorf("default from a digest reference: %q, %v", a, err)
	}
	if _, err := Parse("", ""); err == nil {
		t.Error("an empty default image gives no repository to allow")
	}
}

func TestZeroValueAllowsNothing(t *testing.T) {
	if (AllowList{}).Allows("viewer") {
		t.Error("the zero AllowList allows an image")
	}
}

func FuzzAllowsNeverPanics(f *testing.F) {
	f.Add("registry.example.com/team/*", "registry.example.com/team/viewer:1")
	f.Add("*", "x@sha256:")
	f.Fuzz(func(t *testing.T, list, image string) {
		a, err := Parse(list, "viewer:1")
		if err != nil {
			return
		}
		// An allowed image's repository is matched by a pattern: a tag or
		// digest never widens what is allowed.
		if a.Allows(image) && !a.Allows(Repository(image)) {
			t.Errorf("%q allows %q but not its repository", a, image)
		}
	})
}
