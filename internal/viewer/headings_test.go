package viewer

import (
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	. "github.com/onsi/gomega"
)

func headingIDsOf(g Gomega, src string) []string {
	r, err := RenderPage([]byte(src))
	g.Expect(err).NotTo(HaveOccurred())
	ids := make([]string, 0, len(r.Headings))
	for _, h := range r.Headings {
		ids = append(ids, h.ID)
	}
	return ids
}

// TestHeadingIDsMatchGitHub: each page's headings get the ids github.com
// gives them. The rules are GitHub's ("Section links",
// https://docs.github.com/en/get-started/writing-on-github/getting-started-with-writing-and-formatting-on-github/basic-writing-and-formatting-syntax#section-links):
// lower case, spaces to '-', other punctuation and whitespace removed, "-1",
// "-2"… for repeats. The cases and their ids are from github-slugger's
// test/fixtures.json (github.com/Flet/github-slugger, v2.0.0), which its
// script/generate-fixtures.js made by rendering the headings in a gist on
// github.com and reading back the anchors; the short category samples at the
// end follow the same fixtures' per-category lines.
func TestHeadingIDsMatchGitHub(t *testing.T) {
	tests := []struct {
		name     string
		headings []string // one "# " heading each, in Markdown (as the fixtures' gist had them)
		want     []string
	}{
		{name: "basic usage", headings: []string{"alpha", "alpha"}, want: []string{"alpha", "alpha-1"}},
		{name: "camel case", headings: []string{"bravoCharlieDelta"}, want: []string{"bravocharliedelta"}},
		{name: "prototypal names", headings: []string{`\_\_proto\_\_`, `\_\_proto\_\_`, "hasOwnProperty"}, want: []string{"__proto__", "__proto__-1", "hasownproperty"}},
		{
			name:     "repetition",
			headings: []string{"echo", "echo", "echo 1", "echo-1", "echo"},
			want:     []string{"echo", "echo-1", "echo-1-1", "echo-1-2", "echo-2"},
		},
		{name: "more repetition", headings: []string{"foxtrot-1", "foxtrot", "foxtrot"}, want: []string{"foxtrot-1", "foxtrot", "foxtrot-2"}},
		{name: "dash", headings: []string{"heading with a - dash"}, want: []string{"heading-with-a---dash"}},
		{name: "underscore", headings: []string{"heading with an _ underscore"}, want: []string{"heading-with-an-_-underscore"}},
		{name: "dot", headings: []string{"heading with a period.txt"}, want: []string{"heading-with-a-periodtxt"}},
		{
			name:     "dots, parens, brackets",
			headings: []string{"exchange.bind_headers(exchange, routing [, bindCallback])"},
			want:     []string{"exchangebind_headersexchange-routing--bindcallback"},
		},
		{name: "spaces at the ends", headings: []string{"&#x20;", "&#x20;a", "a&#x20;", "&#x20;a&#x20;", "-a-"}, want: []string{"-", "-a", "a-", "-a-", "-a--1"}},
		{name: "apostrophe", headings: []string{"apostrophe’s should be trimmed"}, want: []string{"apostrophes-should-be-trimmed"}},
		{name: "symbol", headings: []string{"I ♥ unicode"}, want: []string{"i--unicode"}},
		{name: "en and em dashes", headings: []string{"dash-dash", "en–dash", "em—dash"}, want: []string{"dash-dash", "endash", "emdash"}},
		{
			name:     "emoji",
			headings: []string{"😄 unicode emoji", "😄-😄 unicode emoji", "😄_😄 unicode emoji", "😄 - an emoji"},
			want:     []string{"-unicode-emoji", "--unicode-emoji", "_-unicode-emoji", "---an-emoji"},
		},
		{
			name:     "gemoji shortcodes stay text",
			headings: []string{":smile: - a gemoji", ":ok: No underscore", ":ok_hand: Single", ":ok_hand::hatched_chick: Two in a row with no spaces"},
			want:     []string{"smile---a-gemoji", "ok-no-underscore", "ok_hand-single", "ok_handhatched_chick-two-in-a-row-with-no-spaces"},
		},
		{
			name:     "Cyrillic and Han",
			headings: []string{"Привет", "Профили пользователей", "Привет non-latin 你好"},
			want:     []string{"привет", "профили-пользователей", "привет-non-latin-你好"},
		},
		{name: "upper case in full, dotted I too", headings: []string{"Ǉ Σ Ü İ"}, want: []string{"ǉ-σ-ü-i\u0307"}},
		{name: "titlecase letters", headings: []string{"aǅ ῼb"}, want: []string{"aǆ-ῳb"}},
		{name: "letter numbers kept, lower-cased", headings: []string{"aⅠ Ⅱ 〇b"}, want: []string{"aⅰ-ⅱ-〇b"}},
		{name: "other numbers dropped", headings: []string{"a² ½ ①b"}, want: []string{"a--b"}},
		{name: "decimal digits of any script", headings: []string{"a0 ١ ०b"}, want: []string{"a0-١-०b"}},
		{name: "connector punctuation kept", headings: []string{"a_ ‿ ＿b"}, want: []string{"a_-‿-＿b"}},
		{name: "marks kept", headings: []string{"à ँ"}, want: []string{"à-ँ"}},
		{name: "letters drawn as symbols kept", headings: []string{"aⒺ ¦ 🄺b"}, want: []string{"aⓔ--🄺b"}},
		{name: "other separators dropped", headings: []string{"a\u00a0b", "a\u3000b", "a\u2029b"}, want: []string{"ab", "ab-1", "ab-2"}},
		{name: "format characters dropped", headings: []string{"a\u200bb\u00ad"}, want: []string{"ab"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var src strings.Builder
			for _, h := range tt.headings {
				src.WriteString("# " + h + "\n\n")
			}
			g.Expect(headingIDsOf(g, src.String())).To(Equal(tt.want))
		})
	}
}

// TestHeadingIDs: what GitHub's rules make of Markdown. An id is made from
// the heading's rendered text.
func TestHeadingIDs(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{name: "words", src: "# Getting Started\n", want: []string{"getting-started"}},
		{name: "punctuation dropped, spaces kept as dashes", src: "## Install & Run!\n", want: []string{"install--run"}},
		{name: "underscores and dashes kept", src: "## max_concurrent-reconciles\n", want: []string{"max_concurrent-reconciles"}},
		{name: "markup is not part of the id", src: "## The `spec.assets` **field** [link](x.md)\n", want: []string{"the-specassets-field-link"}},
		{name: "entities are decoded first", src: "## A &amp; B &#x43;\n", want: []string{"a--b-c"}},
		{name: "escaped underscores are underscores", src: "## a\\_b \\*c\\*\n", want: []string{"a_b-c"}},
		{name: "Japanese", src: "# はじめに\n## ページの作り方\n", want: []string{"はじめに", "ページの作り方"}},
		{name: "Chinese", src: "## 安装 指南\n", want: []string{"安装-指南"}},
		{name: "accents kept, lower-cased", src: "## Über Café\n", want: []string{"über-café"}},
		{name: "every space is a dash", src: "## a  b\n", want: []string{"a--b"}},
		{name: "tabs are dropped", src: "## a\tb\n", want: []string{"ab"}},
		{name: "repeats are numbered", src: "## Usage\n## Usage\n## Usage\n", want: []string{"usage", "usage-1", "usage-2"}},
		{name: "a numbered repeat never takes an id in use", src: "## A 1\n## A\n## A\n", want: []string{"a-1", "a", "a-2"}},
		{name: "empty and symbol-only headings", src: "#\n## !!!\n## ***\n", want: []string{"", "-1", "-2"}},
		{name: "setext headings", src: "Title\n=====\n\nSub\n---\n", want: []string{"title", "sub"}},
		{name: "a line break in a heading is no space", src: "Two\nlines\n===\n\nHard\\\nbreak\n---\n", want: []string{"twolines", "hardbreak"}},
		{name: "headings in lists and quotes", src: "> ## Quoted\n\n- ## Listed\n", want: []string{"quoted", "listed"}},
		{name: "raw HTML is not text", src: "## A <b onclick=x>bold</b> move\n", want: []string{"a-bold-move"}},
		{name: "an image's alt text is not text", src: "## ![logo](logo.png) Trellis\n", want: []string{"-trellis"}},
		{name: "a footnote reference is its number", src: "## Notes[^n]\n\n[^n]: text\n", want: []string{"notes1"}},
		{name: "attribute syntax stays text", src: "## Title {#custom onclick=x}\n", want: []string{"title-custom-onclickx"}},
		{name: "long headings are not cut", src: "## " + strings.Repeat("word ", 40) + "\n", want: []string{strings.TrimSuffix(strings.Repeat("word-", 40), "-")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(headingIDsOf(g, tt.src)).To(Equal(tt.want))
			out, err := Render([]byte(tt.src))
			g.Expect(err).NotTo(HaveOccurred())
			for _, id := range tt.want {
				if id == "" {
					continue
				}
				g.Expect(string(out)).To(ContainSubstring(`id="` + id + `"`))
			}
			g.Expect(string(out)).NotTo(ContainSubstring(`id=""`), "no empty id attribute")
		})
	}
}

// TestHeadingIDsStableAcrossEdits: an id depends only on the headings before
// it, so editing text, or headings further down, keeps links working.
func TestHeadingIDsStableAcrossEdits(t *testing.T) {
	g := NewWithT(t)
	before := headingIDsOf(g, "# Guide\n\nintro\n\n## Install\n\ntext\n\n## Configure\n\n## Usage\n")
	after := headingIDsOf(g, "# Guide\n\nnew intro, longer\n\n## Install\n\nother text\n\n## Configure\n\n## Usage\n\n## FAQ\n")
	g.Expect(after[:len(before)]).To(Equal(before))
	g.Expect(headingIDsOf(g, "# Guide\n\n## Install\n")).To(Equal(headingIDsOf(g, "# Guide\n\n## Install\n")))
}

// TestManyRepeatedHeadingsCostLinearTime: the nth repeat of a heading does
// not try the n ids before it (a page of 20,000 empty headings took 35 s
// that way; a 1 MiB page holds 500,000).
func TestManyRepeatedHeadingsCostLinearTime(t *testing.T) {
	g := NewWithT(t)
	const n = 50_000
	src := strings.Repeat("#\n", n) + strings.Repeat("# a\n", n)
	start := time.Now()
	r, err := RenderPage([]byte(src))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(time.Since(start)).To(BeNumerically("<", 10*time.Second))
	g.Expect(r.Headings).To(HaveLen(2 * n))
	g.Expect(r.Headings[n-1].ID).To(Equal("-" + strconv.Itoa(n-1)))
	g.Expect(r.Headings[2*n-1].ID).To(Equal("a-" + strconv.Itoa(n-1)))
}

func TestRenderPageSections(t *testing.T) {
	g := NewWithT(t)
	r, err := RenderPage([]byte("Intro with *emphasis*\nand a soft break.\n\n" +
		"# Title\n\nFirst | para.\n\n| a | b |\n|---|---|\n| one | two |\n\n" +
		"## Code\n\n```go\nfunc main() {}\n```\n\n<div>raw html</div>\n\nAn <span>inline</span> tag &amp; an entity.\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Headings).To(Equal([]Heading{{Level: 1, ID: "title", Text: "Title"}, {Level: 2, ID: "code", Text: "Code"}}))
	g.Expect(r.Sections).To(HaveLen(3))
	g.Expect(r.Sections[0].Heading).To(Equal(Heading{}))
	g.Expect(r.Sections[0].Text).To(Equal("Intro with emphasis and a soft break."))
	g.Expect(r.Sections[1].Text).To(ContainSubstring("First | para."))
	g.Expect(strings.Fields(r.Sections[1].Text)).To(ContainElements("one", "two"), "table cells stay separate words")
	g.Expect(r.Sections[2].Text).To(ContainSubstring("func main() {}"))
	g.Expect(r.Sections[2].Text).To(ContainSubstring("An inline tag & an entity."))
	g.Expect(r.Sections[2].Text).NotTo(ContainSubstring("raw html"), "omitted from the page, so not searchable")
	g.Expect(r.Sections[2].Text).NotTo(ContainSubstring("<span>"))
}

// idRune reports whether r may be in a heading id: what GitHub keeps, and
// never a quote, a space, '#', ':' (footnote ids have one) or markup, so an id
// is safe in an attribute, usable as a fragment and no footnote's.
func idRune(r rune) bool {
	return r == '-' || unicode.In(r, unicode.L, unicode.M, unicode.Nd, unicode.Nl, unicode.Pc, unicode.Other_Alphabetic)
}

func FuzzHeadingIDs(f *testing.F) {
	f.Add("# A\n## A\n## A 1\n")
	f.Add("# はじめに\n## 安装\n")
	f.Add("#\n## ***\n## <b>x</b>\n")
	f.Add("Title\n=====\n> # q\n- ## l\n")
	f.Add("## " + strings.Repeat("é", 100) + "\n")
	f.Add("# Ⅱ İ ½ Ⓐ a‿b\n## x[^1]\n\n[^1]: y\n# -\n# -1\n#\n")
	f.Add("# fn:1\n# fnref:1\nx[^a] y[^a] z[^b]\n\n[^a]: # fn:2\n[^b]: > [!NOTE]\n    > ## n\n")
	f.Fuzz(func(t *testing.T, src string) {
		g := NewWithT(t)
		r, err := RenderPage([]byte(src))
		g.Expect(err).NotTo(HaveOccurred())
		seen := map[string]bool{}
		for _, h := range r.Headings {
			g.Expect(strings.IndexFunc(h.ID, func(r rune) bool { return !idRune(r) })).To(Equal(-1), "heading %q: id %q", h.Text, h.ID)
			g.Expect(seen[h.ID]).To(BeFalse(), "id %q used twice in %q", h.ID, src)
			seen[h.ID] = true
			g.Expect(h.Level).To(BeNumerically(">=", 1))
			g.Expect(h.Level).To(BeNumerically("<=", 6))
		}
		pageIDs := map[string]bool{}
		for _, id := range idsOf(r.HTML) {
			g.Expect(pageIDs[id]).To(BeFalse(), "id %q used twice in the page of %q", id, src)
			pageIDs[id] = true
		}
		again, err := RenderPage([]byte(src))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(again.Headings).To(Equal(r.Headings), "ids are the same on every render")
	})
}
