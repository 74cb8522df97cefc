package viewer

import (
	"testing"

	. "github.com/onsi/gomega"
)

// setOf returns an exists function for ParseSummary that knows exactly names.
func setOf(names ...string) func(string) bool {
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return func(name string) bool { return set[name] }
}

func TestParseSummary(t *testing.T) {
	files := setOf("intro.md", "preface.md", "a.md", "a1.md", "a1x.md", "b.md", "b1.md",
		"c.md", "appendix.md", "README.md", "sub dir.md")

	tests := []struct {
		name string
		src  string
		want []NavItem
	}{
		{
			name: "empty",
			src:  "",
			want: nil,
		},
		{
			name: "only the title",
			src:  "# Summary\n",
			want: nil,
		},
		{
			name: "title is ignored, prefix chapter kept",
			src:  "# Summary\n\n[Introduction](intro.md)\n",
			want: []NavItem{{Title: "Introduction", File: "intro.md"}},
		},
		{
			name: "title with any text is ignored",
			src:  "# My Book's Table of Contents\n[Introduction](intro.md)\n",
			want: []NavItem{{Title: "Introduction", File: "intro.md"}},
		},
		{
			name: "no title at all",
			src:  "- [A](a.md)\n- [B](b.md)\n",
			want: []NavItem{{Title: "A", File: "a.md"}, {Title: "B", File: "b.md"}},
		},
		{
			name: "prefix chapters without bullets, then numbered chapters, then suffix chapter",
			src: "# Summary\n\n[Introduction](intro.md)\n[Preface](preface.md)\n\n" +
				"- [A](a.md)\n- [B](b.md)\n\n[Appendix](appendix.md)\n",
			want: []NavItem{
				{Title: "Introduction", File: "intro.md"},
				{Title: "Preface", File: "preface.md"},
				{Title: "A", File: "a.md"},
				{Title: "B", File: "b.md"},
				{Title: "Appendix", File: "appendix.md"},
			},
		},
		{
			name: "nested chapters with 2-space indentation and '-' bullets",
			src:  "- [A](a.md)\n  - [A1](a1.md)\n    - [A1x](a1x.md)\n- [B](b.md)\n  - [B1](b1.md)\n",
			want: []NavItem{
				{Title: "A", File: "a.md", Depth: 0},
				{Title: "A1", File: "a1.md", Depth: 1},
				{Title: "A1x", File: "a1x.md", Depth: 2},
				{Title: "B", File: "b.md", Depth: 0},
				{Title: "B1", File: "b1.md", Depth: 1},
			},
		},
		{
			name: "nested chapters with '*' bullets",
			src:  "* [A](a.md)\n  * [A1](a1.md)\n    * [A1x](a1x.md)\n* [B](b.md)\n",
			want: []NavItem{
				{Title: "A", File: "a.md", Depth: 0},
				{Title: "A1", File: "a1.md", Depth: 1},
				{Title: "A1x", File: "a1x.md", Depth: 2},
				{Title: "B", File: "b.md", Depth: 0},
			},
		},
		{
			name: "mixed '-' and '*' bullets",
			src:  "- [A](a.md)\n  * [A1](a1.md)\n* [B](b.md)\n",
			want: []NavItem{
				{Title: "A", File: "a.md", Depth: 0},
				{Title: "A1", File: "a1.md", Depth: 1},
				{Title: "B", File: "b.md", Depth: 0},
			},
		},
		{
			name: "nested chapters with tab indentation: one tab is one level",
			src:  "- [A](a.md)\n\t- [A1](a1.md)\n\t\t- [A1x](a1x.md)\n- [B](b.md)\n",
			want: []NavItem{
				{Title: "A", File: "a.md", Depth: 0},
				{Title: "A1", File: "a1.md", Depth: 1},
				{Title: "A1x", File: "a1x.md", Depth: 2},
				{Title: "B", File: "b.md", Depth: 0},
			},
		},
		{
			name: "nested chapters with 4-space indentation, as in mdBook's own guide",
			src:  "- [A](a.md)\n    - [A1](a1.md)\n        - [A1x](a1x.md)\n- [B](b.md)\n",
			want: []NavItem{
				{Title: "A", File: "a.md", Depth: 0},
				{Title: "A1", File: "a1.md", Depth: 1},
				{Title: "A1x", File: "a1x.md", Depth: 2},
				{Title: "B", File: "b.md", Depth: 0},
			},
		},
		{
			name: "part titles",
			src: "# Summary\n\n[Introduction](intro.md)\n\n# Part I\n\n- [A](a.md)\n  - [A1](a1.md)\n\n" +
				"## Part II\n- [B](b.md)\n",
			want: []NavItem{
				{Title: "Introduction", File: "intro.md"},
				{Title: "Part I", Part: true},
				{Title: "A", File: "a.md"},
				{Title: "A1", File: "a1.md", Depth: 1},
				{Title: "Part II", Part: true},
				{Title: "B", File: "b.md"},
			},
		},
		{
			name: "part title text is kept verbatim (escaping is the template's job)",
			src:  "# Summary\n# <b>Bold</b> & co\n- [A](a.md)\n",
			want: []NavItem{
				{Title: "<b>Bold</b> & co", Part: true},
				{Title: "A", File: "a.md"},
			},
		},
		{
			name: "a part title that comes first after prefix chapters, with no book title",
			src:  "[Introduction](intro.md)\n\n# Part I\n- [A](a.md)\n",
			want: []NavItem{
				{Title: "Introduction", File: "intro.md"},
				{Title: "Part I", Part: true},
				{Title: "A", File: "a.md"},
			},
		},
		{
			name: "separators",
			src:  "# Summary\n[Introduction](intro.md)\n---\n- [A](a.md)\n\n-----\n\n[Appendix](appendix.md)\n",
			want: []NavItem{
				{Title: "Introduction", File: "intro.md"},
				{Rule: true},
				{Title: "A", File: "a.md"},
				{Rule: true},
				{Title: "Appendix", File: "appendix.md"},
			},
		},
		{
			name: "two dashes are not a separator",
			src:  "- [A](a.md)\n--\n- [B](b.md)\n",
			want: []NavItem{{Title: "A", File: "a.md"}, {Title: "B", File: "b.md"}},
		},
		{
			name: "draft chapters",
			src:  "- [A](a.md)\n  - [Draft](a.md)\n  - [Draft]()\n- [Not written yet]()\n",
			want: []NavItem{
				{Title: "A", File: "a.md"},
				{Title: "Draft", File: "a.md", Depth: 1},
				{Title: "Draft", File: "", Depth: 1},
				{Title: "Not written yet", File: ""},
			},
		},
		{
			name: "./ prefix, #anchor and ?query are stripped",
			src:  "- [A](./a.md)\n- [B](b.md#section-2)\n- [C](./c.md#x)\n- [A1](a1.md?raw=1)\n",
			want: []NavItem{
				{Title: "A", File: "a.md"},
				{Title: "B", File: "b.md"},
				{Title: "C", File: "c.md"},
				{Title: "A1", File: "a1.md"},
			},
		},
		{
			name: "a bare anchor links to no file",
			src:  "- [Top](#top)\n",
			want: []NavItem{{Title: "Top"}},
		},
		{
			name: "links to files that do not exist keep their title but lose the file",
			src:  "- [A](a.md)\n- [Gone](gone.md)\n  - [Also gone](./nope/x.md)\n- [Case](A.md)\n",
			want: []NavItem{
				{Title: "A", File: "a.md"},
				{Title: "Gone"},
				{Title: "Also gone", Depth: 1},
				{Title: "Case"},
			},
		},
		{
			name: "links outside the site never keep a file",
			src: "- [Secret](../secret.md)\n- [Up](./../a.md)\n- [Abs](/a.md)\n- [Evil](http://evil)\n" +
				"- [Evil md](https://evil.example/a.md)\n- [JS](javascript:alert%281%29)\n" +
				"- [Dir](sub/a.md)\n- [Data](data:text/html,x)\n- [Back](..\\a.md)\n",
			want: []NavItem{
				{Title: "Secret"}, {Title: "Up"}, {Title: "Abs"}, {Title: "Evil"}, {Title: "Evil md"},
				{Title: "JS"}, {Title: "Dir"}, {Title: "Data"}, {Title: "Back"},
			},
		},
		{
			name: "file names with spaces are matched exactly",
			src:  "- [Sub](sub dir.md)\n",
			want: []NavItem{{Title: "Sub", File: "sub dir.md"}},
		},
		{
			name: "CRLF line endings",
			src:  "# Summary\r\n\r\n[Introduction](intro.md)\r\n\r\n# Part I\r\n- [A](a.md)\r\n  - [A1](a1.md)\r\n---\r\n- [Draft]()\r\n",
			want: []NavItem{
				{Title: "Introduction", File: "intro.md"},
				{Title: "Part I", Part: true},
				{Title: "A", File: "a.md"},
				{Title: "A1", File: "a1.md", Depth: 1},
				{Rule: true},
				{Title: "Draft"},
			},
		},
		{
			name: "lines that are not links are ignored",
			src: "# Summary\n\nSome prose.\n- A plain bullet\n- [A](a.md) trailing words\n<!-- comment -->\n" +
				"> [quoted](b.md)\n- [B](b.md)\n",
			want: []NavItem{{Title: "B", File: "b.md"}},
		},
		{
			name: "trailing whitespace after a link is fine",
			src:  "- [A](a.md)   \n- [B](b.md)\t\n",
			want: []NavItem{{Title: "A", File: "a.md"}, {Title: "B", File: "b.md"}},
		},
		{
			name: "titles keep their raw text",
			src:  "- [<script>alert(1)</script>](a.md)\n- [A & B \"quoted\"](b.md)\n",
			want: []NavItem{
				{Title: "<script>alert(1)</script>", File: "a.md"},
				{Title: `A & B "quoted"`, File: "b.md"},
			},
		},
		{
			name: "README.md as a chapter",
			src:  "# Summary\n[Home](README.md)\n",
			want: []NavItem{{Title: "Home", File: "README.md"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := ParseSummary(tt.src, files)
			if len(tt.want) == 0 {
				g.Expect(got).To(BeEmpty())
				return
			}
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestParseSummaryAsksOnlyAboutCleanedNames(t *testing.T) {
	g := NewWithT(t)
	var asked []string
	ParseSummary("# Summary\n[A](./a.md#top)\n- [B](b.md?x)\n- [C]()\n# Part\n---\n", func(name string) bool {
		asked = append(asked, name)
		return true
	})
	g.Expect(asked).To(ContainElements("a.md", "b.md"))
	for _, name := range asked {
		g.Expect(name).NotTo(ContainSubstring("#"))
		g.Expect(name).NotTo(ContainSubstring("?"))
		g.Expect(name).NotTo(HavePrefix("./"))
	}
}

func TestParseSummaryNeverTrustsExistsForRulesAndParts(t *testing.T) {
	g := NewWithT(t)
	// Even an exists function that accepts everything must not give parts and
	// separators a file.
	got := ParseSummary("# Summary\n# Part\n---\n", func(string) bool { return true })
	g.Expect(got).To(Equal([]NavItem{{Title: "Part", Part: true}, {Rule: true}}))
}

func TestAlphabeticalNav(t *testing.T) {
	tests := []struct {
		name  string
		files []string
		want  []NavItem
	}{
		{name: "nil", files: nil, want: nil},
		{name: "only SUMMARY.md", files: []string{"SUMMARY.md"}, want: nil},
		{
			name:  "sorted by name, SUMMARY.md skipped, .md stripped from titles",
			files: []string{"zeta.md", "SUMMARY.md", "alpha.md", "mid.md"},
			want: []NavItem{
				{Title: "alpha", File: "alpha.md"},
				{Title: "mid", File: "mid.md"},
				{Title: "zeta", File: "zeta.md"},
			},
		},
		{
			name:  "byte order: upper case before lower case, digits first",
			files: []string{"b.md", "B.md", "1.md", "a.md", "README.md"},
			want: []NavItem{
				{Title: "1", File: "1.md"},
				{Title: "B", File: "B.md"},
				{Title: "README", File: "README.md"},
				{Title: "a", File: "a.md"},
				{Title: "b", File: "b.md"},
			},
		},
		{
			name:  "only the last .md is stripped",
			files: []string{"notes.md.md"},
			want:  []NavItem{{Title: "notes.md", File: "notes.md.md"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			in := append([]string(nil), tt.files...)
			got := AlphabeticalNav(in)
			g.Expect(in).To(Equal(tt.files), "the caller's slice must not be reordered")
			if len(tt.want) == 0 {
				g.Expect(got).To(BeEmpty())
				return
			}
			g.Expect(got).To(Equal(tt.want))
			for _, item := range got {
				g.Expect(item.Depth).To(BeZero())
				g.Expect(item.Part).To(BeFalse())
				g.Expect(item.Rule).To(BeFalse())
			}
		})
	}
}

func TestAlphabeticalNavOmitsNamesThatCannotBeServed(t *testing.T) {
	g := NewWithT(t)
	got := AlphabeticalNav([]string{".draft.md", "guide.md", "notes.txt"})
	g.Expect(got).To(Equal([]NavItem{{Title: "guide", File: "guide.md"}}))
}
