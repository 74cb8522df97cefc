package viewer

import (
	"bytes"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// normalDocuments seed the fuzzers with ordinary Markdown, so mutations
// explore the paths real pages take (tables, lists, code, links).
var normalDocuments = []string{
	"# Title\n\nSome *emphasis*, **strong**, `code` and a [link](other.md#part \"title\").\n",
	"| a | b |\n|:--|--:|\n| 1 | 2 |\n\n- [ ] open\n- [x] done\n",
	"```go\nfunc main() {}\n```\n\n> quote\n\n1. one\n2. two\n   - nested\n",
	"Setext\n======\n\n~~gone~~ https://example.com www.example.org <https://example.com/a>\n\n---\n",
	"[ref][1] ![img](https://example.com/i.png)\n\n[1]: https://example.com \"Ref\"\n",
	"Line with a hard break  \nnext line\\\nlast\n\n    indented code\n",
	"---\ntitle: Page\ntags: [a]\n---\n# Page\n\nText[^1] and more[^note].\n\n[^1]: One.\n[^note]: Two,\n\n    in two blocks.\n",
	"> [!NOTE]\n> Useful.\n\n> [!warning]\n>\n> - a\n> - b\n\n> [!TIP] not an alert\n\n- > [!CAUTION]\n  > nested\n",
}

func FuzzRender(f *testing.F) {
	for _, tt := range xssCorpus {
		f.Add([]byte(tt.src))
	}
	for _, doc := range normalDocuments {
		f.Add([]byte(doc))
	}
	f.Add(realisticMarkdown(4 << 10))

	f.Fuzz(func(t *testing.T, src []byte) {
		g := NewWithT(t)
		out, err := Render(src)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(safetyProblems(out)).To(BeEmpty(), "input: %q\noutput: %q", src, out)
	})
}

func FuzzParseSummary(f *testing.F) {
	f.Add("# Summary\n\n[Intro](README.md)\n\n# Part\n- [A](a.md)\n  - [B](./b.md#x)\n\t* [C](c.md)\n---\n- [Draft]()\n")
	f.Add("[x](../a.md)\n[y](http://evil)\n[z](/a.md)\n[w](a.md?q)\n")
	f.Add("# Summary\r\n- [A](a.md)\r\n    - [B](b.md)\r\n")
	f.Add("- [<script>](a.md)\n# <b>\n-----\n")
	f.Add("")

	set := map[string]bool{"a.md": true, "b.md": true, "README.md": true, "SUMMARY.md": true, "a b.md": true}
	exists := func(name string) bool { return set[name] }

	f.Fuzz(func(t *testing.T, src string) {
		g := NewWithT(t)
		items := ParseSummary(src, exists)
		for _, item := range items {
			g.Expect(item.File == "" || set[item.File]).To(BeTrue(), "file %q is not in the set", item.File)
			g.Expect(item.Depth).To(BeNumerically(">=", 0))
			g.Expect(item.Part && item.Rule).To(BeFalse())
			if item.Part || item.Rule {
				g.Expect(item.File).To(BeEmpty())
				g.Expect(item.Depth).To(BeZero())
			}
			if item.Rule {
				g.Expect(item.Title).To(BeEmpty())
			}
		}
		// The navigation kept once, marked for a page, is what the whole
		// template made for it: no title moves where " active" goes.
		nav, err := buildNav(items)
		g.Expect(err).NotTo(HaveOccurred())
		for _, current := range []string{"", "a.md", "b.md", "a b.md"} {
			var got, want bytes.Buffer
			nav.write(&got, current)
			g.Expect(referenceNav.Execute(&want, struct {
				Nav     []NavItem
				Current string
			}{items, current})).To(Succeed())
			g.Expect(got.String()).To(Equal(want.String()), "current %q", current)
			g.Expect(nav.len(current)).To(Equal(want.Len()))
		}
		// CRLF files read like LF files.
		if !strings.Contains(src, "\r") {
			g.Expect(ParseSummary(strings.ReplaceAll(src, "\n", "\r\n"), exists)).To(Equal(items))
		}
	})
}
