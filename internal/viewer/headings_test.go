package viewer

import (
	"regexp"
	"strings"
	"testing"

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
		{name: "Japanese", src: "# はじめに\n## ページの作り方\n", want: []string{"はじめに", "ページの作り方"}},
		{name: "Chinese", src: "## 安装 指南\n", want: []string{"安装-指南"}},
		{name: "accents kept, lower-cased", src: "## Über Café\n", want: []string{"über-café"}},
		{name: "repeats are numbered", src: "## Usage\n## Usage\n## Usage\n", want: []string{"usage", "usage-1", "usage-2"}},
		{name: "a numbered repeat never takes an id in use", src: "## A 1\n## A\n## A\n", want: []string{"a-1", "a", "a-2"}},
		{name: "empty and symbol-only headings", src: "#\n## !!!\n## ***\n", want: []string{"section", "section-1", "section-2"}},
		{name: "setext headings", src: "Title\n=====\n\nSub\n---\n", want: []string{"title", "sub"}},
		{name: "headings in lists and quotes", src: "> ## Quoted\n\n- ## Listed\n", want: []string{"quoted", "listed"}},
		{name: "raw HTML is not text", src: "## A <b onclick=x>bold</b> move\n", want: []string{"a-bold-move"}},
		{name: "attribute syntax stays text", src: "## Title {#custom onclick=x}\n", want: []string{"title-custom-onclickx"}},
		{name: "long headings are cut", src: "## " + strings.Repeat("word ", 40) + "\n", want: []string{strings.Repeat("word-", 16)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(headingIDsOf(g, tt.src)).To(Equal(tt.want))
			out, err := Render([]byte(tt.src))
			g.Expect(err).NotTo(HaveOccurred())
			for _, id := range tt.want {
				g.Expect(string(out)).To(ContainSubstring(`id="` + id + `"`))
			}
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

// idSyntax is what every heading id looks like: no quotes, spaces, '#' or
// markup, so it is safe in an attribute and usable as a fragment.
var idSyntax = regexp.MustCompile(`^[\p{L}\p{N}\p{M}_-]+$`)

func FuzzHeadingIDs(f *testing.F) {
	f.Add("# A\n## A\n## A 1\n")
	f.Add("# はじめに\n## 安装\n")
	f.Add("#\n## ***\n## <b>x</b>\n")
	f.Add("Title\n=====\n> # q\n- ## l\n")
	f.Add("## " + strings.Repeat("é", 100) + "\n")
	f.Fuzz(func(t *testing.T, src string) {
		g := NewWithT(t)
		r, err := RenderPage([]byte(src))
		g.Expect(err).NotTo(HaveOccurred())
		seen := map[string]bool{}
		for _, h := range r.Headings {
			g.Expect(h.ID).To(MatchRegexp(idSyntax.String()), "heading %q", h.Text)
			g.Expect(seen[h.ID]).To(BeFalse(), "id %q used twice in %q", h.ID, src)
			seen[h.ID] = true
			g.Expect(h.Level).To(BeNumerically(">=", 1))
			g.Expect(h.Level).To(BeNumerically("<=", 6))
		}
		again, err := RenderPage([]byte(src))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(again.Headings).To(Equal(r.Headings), "ids are the same on every render")
	})
}
