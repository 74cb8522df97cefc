// Package viewer renders a set of Markdown files as a small website: pages in
// GitHub-flavoured Markdown, navigation from an mdBook-style SUMMARY.md, and
// safe output for untrusted input. It has no Kubernetes dependency.
package viewer

import (
	"regexp"
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
