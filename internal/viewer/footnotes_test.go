package viewer

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// idAttr finds every id in rendered HTML (goldmark quotes attributes with '"').
var idAttr = regexp.MustCompile(`\bid="([^"]*)"`)

// idsOf lists the ids in out, in order.
func idsOf(out []byte) []string {
	matches := idAttr.FindAllSubmatch(out, -1)
	ids := make([]string, 0, len(matches))
	for _, m := range matches {
		ids = append(ids, string(m[1]))
	}
	return ids
}

func TestRenderFootnotes(t *testing.T) {
	ref := func(n, refIndex int) string {
		id := "fnref:"
		if refIndex > 0 {
			id = fmt.Sprintf("fnref%d:", refIndex)
		}
		return fmt.Sprintf(`<sup id="%s%d"><a href="#fn:%d" class="footnote-ref" role="doc-noteref">%d</a></sup>`, id, n, n, n)
	}
	tests := []struct {
		name    string
		src     string
		want    []string
		notWant []string
	}{
		{
			name: "a reference and its note",
			src:  "Text[^1].\n\n[^1]: The note.\n",
			want: []string{
				"<p>Text" + ref(1, 0) + ".</p>",
				`<div class="footnotes" role="doc-endnotes">` + "\n<hr>\n<ol>\n" + `<li id="fn:1">` + "\n" +
					`<p>The note.&#160;<a href="#fnref:1" class="footnote-backref" role="doc-backlink">&#x21a9;&#xfe0e;</a></p>` + "\n</li>\n</ol>\n</div>",
			},
		},
		{
			name: "numbered in the order they are first referred to, as GitHub does",
			src:  "B[^b] A[^a]\n\n[^a]: first defined\n[^b]: second defined\n",
			want: []string{"B" + ref(1, 0) + " A" + ref(2, 0), "<li id=\"fn:1\">\n<p>second defined", "<li id=\"fn:2\">\n<p>first defined"},
		},
		{
			name: "a second reference to a note has an id of its own",
			src:  "x[^n] y[^n]\n\n[^n]: note\n",
			want: []string{"x" + ref(1, 0) + " y" + ref(1, 1), `href="#fnref:1"`, `href="#fnref1:1"`},
		},
		{
			name: "a note of several blocks",
			src:  "x[^long]\n\n[^long]: First.\n\n    Second, *indented*.\n",
			want: []string{"<p>First.</p>", "<p>Second, <em>indented</em>.&#160;<a href=\"#fnref:1\""},
		},
		{
			name:    "labels never reach the page",
			src:     "x[^\"><b>label</b>] y[^it's]\n\n[^\"><b>label</b>]: one\n[^it's]: two\n",
			want:    []string{"x" + ref(1, 0) + " y" + ref(2, 0)},
			notWant: []string{"label", "it's", "it&#39;s", "&lt;b&gt;"},
		},
		{name: "a reference to no note is text", src: "x[^missing]\n", want: []string{"<p>x[^missing]</p>"}, notWant: []string{"footnotes"}},
		{name: "a note no one refers to is left out", src: "x\n\n[^1]: unused\n", want: []string{"<p>x</p>\n"}, notWant: []string{"unused", "footnotes"}},
		{
			name: "in a heading, a table, a list and an alert",
			src:  "## Title[^1]\n\n| a |\n|---|\n| b[^1] |\n\n- c[^1]\n\n> [!NOTE]\n> d[^1]\n\n[^1]: note\n",
			want: []string{`<h2 id="title1">Title` + ref(1, 0) + "</h2>", "<td>b" + ref(1, 1) + "</td>", "<li>c" + ref(1, 2) + "</li>", "<p>d" + ref(1, 3) + "</p>"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			out, err := Render([]byte(tt.src))
			g.Expect(err).NotTo(HaveOccurred())
			for _, w := range tt.want {
				g.Expect(string(out)).To(ContainSubstring(w))
			}
			for _, w := range tt.notWant {
				g.Expect(string(out)).NotTo(ContainSubstring(w))
			}
			g.Expect(safetyProblems(out)).To(BeEmpty())
		})
	}
}

// TestFootnoteIDsNeverCollideWithHeadings: headings named after footnote ids
// get ids of their own, and every id in the page is used once.
func TestFootnoteIDsNeverCollideWithHeadings(t *testing.T) {
	g := NewWithT(t)
	src := "# fn:1\n\n# fnref:1\n\n# fn-1\n\n# fnref1:1\n\nx[^1] y[^1] z[^2]\n\n[^1]: one\n[^2]: two\n\n# fn:2\n"
	out, err := Render([]byte(src))
	g.Expect(err).NotTo(HaveOccurred())
	ids := idsOf(out)
	g.Expect(ids).To(Equal([]string{"fn1", "fnref1", "fn-1", "fnref11", "fnref:1", "fnref1:1", "fnref:2", "fn2", "fn:1", "fn:2"}))
}

// TestFootnotesAreBounded: past maxFootnotes definitions and references a
// page's "[^x]" are what they would be without footnotes, so a page of many
// costs no more than the bound.
func TestFootnotesAreBounded(t *testing.T) {
	g := NewWithT(t)
	var src strings.Builder
	for i := range maxFootnotes + 10 {
		fmt.Fprintf(&src, "r[^%d]\n", i)
	}
	src.WriteString("\n")
	for i := range maxFootnotes + 10 {
		fmt.Fprintf(&src, "[^%d]: note %d\n\n", i, i)
	}
	out, err := Render([]byte(src.String()))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.Count(string(out), `<li id="fn:`)).To(Equal(maxFootnotes))
	g.Expect(strings.Count(string(out), `class="footnote-ref"`)).To(Equal(maxFootnotes))
	g.Expect(string(out)).To(ContainSubstring(fmt.Sprintf("note %d", maxFootnotes+9)), "a definition past the bound is a paragraph")
	g.Expect(safetyProblems(out)).To(BeEmpty())
}
