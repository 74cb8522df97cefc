// Package viewer renders a set of Markdown files as a small website: pages in
// GitHub-flavoured Markdown, navigation from an mdBook-style SUMMARY.md, and
// safe output for untrusted input. It has no Kubernetes dependency.
package viewer

import (
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// SummaryFile is the navigation file, in mdBook's format.
const SummaryFile = "SUMMARY.md"

// NavItem is one entry of the navigation.
type NavItem struct {
	Title string
	// File is the Markdown file the entry links to; empty for a draft
	// chapter, a part title, a separator or a link to a file that is missing.
	File  string
	Depth int
	Part  bool
	Rule  bool
}

// summaryLink matches "[Title](file.md)" with an optional list bullet, as in
// mdBook's prefix, numbered and suffix chapters.
var summaryLink = regexp.MustCompile(`^(\s*)(?:[-*+]\s+)?\[([^\]]*)\]\(([^)]*)\)\s*$`)

// ParseSummary reads an mdBook SUMMARY.md. Links are kept only when they name a
// file of the site, so the navigation can never point anywhere else.
func ParseSummary(src string, exists func(string) bool) []NavItem {
	var items []NavItem
	first := true
	// widths holds the indentation of the open list levels, so nesting by two
	// spaces, four spaces or tabs all give depth 0, 1, 2, ...
	var widths []int
	for _, line := range strings.Split(strings.ReplaceAll(src, "\r\n", "\n"), "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" {
			continue
		}
		isFirst := first
		first = false
		switch {
		case strings.HasPrefix(trimmed, "#"):
			if isFirst {
				continue // "# Summary": the book's own heading
			}
			widths = widths[:0]
			items = append(items, NavItem{Title: strings.TrimSpace(strings.TrimLeft(trimmed, "#")), Part: true})
		case strings.Trim(trimmed, "-") == "" && len(trimmed) >= 3:
			items = append(items, NavItem{Rule: true})
		default:
			m := summaryLink.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			indent := len(strings.ReplaceAll(m[1], "\t", "    "))
			for len(widths) > 0 && widths[len(widths)-1] >= indent {
				widths = widths[:len(widths)-1]
			}
			depth := len(widths)
			widths = append(widths, indent)
			file := strings.TrimPrefix(m[3], "./")
			if i := strings.IndexAny(file, "#?"); i >= 0 {
				file = file[:i]
			}
			if !exists(file) {
				file = ""
			}
			items = append(items, NavItem{Title: m[2], File: file, Depth: depth})
		}
	}
	return items
}

// AlphabeticalNav lists the files by name, for sites without a SUMMARY.md.
func AlphabeticalNav(files []string) []NavItem {
	names := append([]string(nil), files...)
	sort.Strings(names)
	items := make([]NavItem, 0, len(names))
	for _, name := range names {
		if name == SummaryFile || !IsMarkdownName(name) {
			continue
		}
		items = append(items, NavItem{Title: strings.TrimSuffix(name, ".md"), File: name})
	}
	return items
}

// folderPageNames are the pages that stand for their folder, best first,
// as on GitHub.
var folderPageNames = []string{"README.md", "index.md"}

// folderPages maps each folder of pages ("" for the root, "guide") to the
// page that stands for it: its README.md, else its index.md.
func folderPages(pages []string) map[string]string {
	folders := map[string]string{}
	for _, want := range slices.Backward(folderPageNames) {
		for _, name := range pages {
			if path.Base(name) == want {
				folders[strings.TrimSuffix(strings.TrimSuffix(name, want), "/")] = name
			}
		}
	}
	return folders
}

// TreeNav lists a site with folders as its tree: in each folder, its own
// page (README.md or index.md) first, then its other pages by name, then
// its sub-folders by name, each entry of a folder one level deeper than
// the folder's. A folder is named by its page's entry; a folder without
// one gets an entry that links nowhere.
func TreeNav(pages []string) []NavItem {
	folders := folderPages(pages)
	files, subs := map[string][]string{}, map[string][]string{}
	for _, name := range pages {
		if name == SummaryFile || !IsPagePath(name) {
			continue
		}
		dir := path.Dir(name)
		if dir == "." {
			dir = ""
		}
		files[dir] = append(files[dir], name)
		for dir != "" {
			parent := path.Dir(dir)
			if parent == "." {
				parent = ""
			}
			if !slices.Contains(subs[parent], dir) {
				subs[parent] = append(subs[parent], dir)
			}
			dir = parent
		}
	}
	var items []NavItem
	var walk func(dir string, depth int)
	walk = func(dir string, depth int) {
		own := folders[dir]
		if dir == "" && own != "" {
			items = append(items, NavItem{Title: strings.TrimSuffix(path.Base(own), ".md"), File: own})
		}
		for _, name := range files[dir] {
			if name != own {
				items = append(items, NavItem{Title: strings.TrimSuffix(path.Base(name), ".md"), File: name, Depth: depth})
			}
		}
		slices.Sort(subs[dir])
		for _, sub := range subs[dir] {
			items = append(items, NavItem{Title: path.Base(sub), File: folders[sub], Depth: depth})
			walk(sub, depth+1)
		}
	}
	walk("", 0)
	return items
}
