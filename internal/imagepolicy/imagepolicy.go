// Package imagepolicy decides which container images the manager may run for
// a MarkdownView that names its own viewer image. It has no Kubernetes
// imports.
//
// An allow-list is a comma-separated list of patterns, each one of:
//
//   - every image
//     registry.example.com/team/viewer   that repository, with any tag or digest
//     registry.example.com/team/*        every repository under registry.example.com/team/
//
// Repositories are compared as written: "viewer" and
// "docker.io/library/viewer" are different patterns.
package imagepolicy

import (
	"fmt"
	"regexp"
	"strings"
)

// AllowList is a parsed allow-list. Its zero value allows nothing.
type AllowList struct {
	patterns []string
	text     string
}

// Parts of an image reference, as the MarkdownView CRD accepts it.
const (
	hostPart = `[a-zA-Z0-9]([-a-zA-Z0-9.]*[a-zA-Z0-9])?(:[0-9]+)?`
	pathPart = `[a-z0-9]+([._-]+[a-z0-9]+)*`
)

var (
	// repositoryPattern: a reference without tag or digest
	// (viewer, team/viewer, registry.example.com:5000/team/viewer).
	repositoryPattern = regexp.MustCompile(`^(` + hostPart + `/)?` + pathPart + `(/` + pathPart + `)*$`)
	// prefixPattern: what may stand before "/*" (a registry, or a registry and a path).
	prefixPattern = regexp.MustCompile(`^` + hostPart + `(/` + pathPart + `)*$`)
)

// Parse reads an allow-list. An empty list stands for the repository of
// defaultImage (the manager's own viewer image), so that out of the box a
// MarkdownView may pick another tag of Trellis' viewer and nothing else.
func Parse(list, defaultImage string) (AllowList, error) {
	if strings.TrimSpace(list) == "" {
		repo := Repository(defaultImage)
		if !repositoryPattern.MatchString(repo) {
			return AllowList{}, fmt.Errorf("default viewer image %q has no repository to allow", defaultImage)
		}
		return AllowList{patterns: []string{repo}, text: repo}, nil
	}
	items := strings.Split(list, ",")
	patterns := make([]string, 0, len(items))
	for _, p := range items {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if err := checkPattern(p); err != nil {
			return AllowList{}, err
		}
		patterns = append(patterns, p)
	}
	if len(patterns) == 0 {
		return AllowList{}, fmt.Errorf("image allow-list %q names no pattern", list)
	}
	return AllowList{patterns: patterns, text: strings.Join(patterns, ",")}, nil
}

func checkPattern(p string) error {
	if p == "*" {
		return nil
	}
	if prefix, under := strings.CutSuffix(p, "/*"); under && prefixPattern.MatchString(prefix) || !under && repositoryPattern.MatchString(p) {
		return nil
	}
	return fmt.Errorf("image pattern %q: want a repository without tag or digest (registry.example.com/team/viewer), a prefix ending in /* (registry.example.com/team/*), or *", p)
}

// Allows reports whether image may run.
func (a AllowList) Allows(image string) bool {
	repo := Repository(image)
	for _, p := range a.patterns {
		switch prefix, under := strings.CutSuffix(p, "/*"); {
		case p == "*":
			return true
		case under && strings.HasPrefix(repo, prefix+"/"):
			return true
		case !under && repo == p:
			return true
		}
	}
	return false
}

// String is the list as parsed, for messages.
func (a AllowList) String() string { return a.text }

// Repository is image without its tag and digest:
// registry.example.com:5000/team/viewer:1.2@sha256:… → registry.example.com:5000/team/viewer.
func Repository(image string) string {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndexByte(image, ':'); i > strings.LastIndexByte(image, '/') {
		image = image[:i]
	}
	return image
}
