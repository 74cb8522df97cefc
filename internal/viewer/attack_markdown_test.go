package viewer

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// Attacks on alerts, footnotes, heading ids and front matter, as a namespace
// editor who writes a MarkdownView's files for a visitor to read.

// TestAttackMarkupThroughNewSyntax: markup in an alert, a footnote (label
// and body) and a front matter title reaches no page, navigation, <title>
// or search result as markup.
func TestAttackMarkupThroughNewSyntax(t *testing.T) {
	g := NewWithT(t)
	payloads := []string{
		`</title><script>alert(1)</script>`,
		`"><svg onload=alert(1)>`,
		`'><img src=x onerror=alert(1)>`,
		"{{.Title}}\u2028\u2029<!--",
		"</a></li></ol></nav><script>alert(1)</script>",
		"\x00<script>\x00alert(1)</script>",
	}
	files := map[string]string{}
	summary := "# Summary\n\n"
	for i, p := range payloads {
		yamlTitle := strings.ReplaceAll(strings.ReplaceAll(p, `\`, `\\`), `"`, `\"`)
		yamlTitle = strings.ReplaceAll(yamlTitle, "\x00", `\0`)
		page := fmt.Sprintf("p%d.md", i)
		files[page] = "---\ntitle: \"" + yamlTitle + " needle\"\n---\n" +
			"> [!WARNING]\n> " + p + " [x](javascript:alert(1)) needle\n\n" +
			"> [!NOTE] " + p + "\n> body\n\n" +
			"> [!TIP]\n" + p + "\n\n" +
			"## " + p + "[^" + p + "]\n\n" +
			"Text[^" + p + "] and[^b]\n\n" +
			"[^" + p + "]: " + p + " [y](javascript:alert(1))\n\n" +
			"[^b]: > [!CAUTION]\n    > " + p + "\n"
		summary += "- [" + strings.NewReplacer("[", "", "]", "").Replace(p) + "](" + page + ")\n"
	}
	files[SummaryFile] = summary
	s, _ := newTestServer(files)
	for name := range files {
		rec := do(s, http.MethodGet, "/"+name)
		g.Expect(rec.Code).To(Equal(http.StatusOK), name)
		body := rec.Body.String()
		g.Expect(safetyProblemsOfPage(body)).To(BeEmpty(), name)
		g.Expect(strings.ToLower(body)).NotTo(ContainSubstring("<script"), name)
		g.Expect(strings.ToLower(body)).NotTo(ContainSubstring("<svg"), name)
		g.Expect(strings.ToLower(body)).NotTo(ContainSubstring("<img"), name)
	}
	rec := do(s, http.MethodGet, "/search?q="+url.QueryEscape("needle"))
	g.Expect(rec.Code).To(Equal(http.StatusOK))
	g.Expect(safetyProblemsOfPage(rec.Body.String())).To(BeEmpty())
	g.Expect(strings.ToLower(rec.Body.String())).NotTo(ContainSubstring("<script"))
	g.Expect(rec.Body.String()).To(ContainSubstring("needle"))
}

// TestAttackIDsAreUniqueInTheWholePage: headings named after footnote ids,
// the template's names and each other, with footnotes referred to from
// headings, footnote definitions holding headings, leave every id of the
// served document used once, and no id is one the template links to.
func TestAttackIDsAreUniqueInTheWholePage(t *testing.T) {
	g := NewWithT(t)
	src := "# search\n# content\n# toc\n# sidebar\n# top\n# fn:1\n# fn1\n# fnref:1\n# fn[^1]\n# fn[^1]\n" +
		"# fn\uff1a1\n# fn\u02d01\n# fn\ua7891\n# -1\n#\n#\n# -1\n" +
		"x[^1] y[^1] z[^2]\n\n[^1]: # fn:1\n\n    # fn1\n[^2]: ## fnref1:1\n"
	s, _ := newTestServer(map[string]string{"a.md": src})
	body := do(s, http.MethodGet, "/a.md").Body.String()
	seen := map[string]int{}
	for _, id := range idsOf([]byte(body)) {
		seen[id]++
	}
	for id, n := range seen {
		g.Expect(n).To(Equal(1), "id %q is used %d times", id, n)
	}
	t.Logf("ids: %v", idsOf([]byte(body)))
}

// TestAttackFrontMatterTitleAmplifiedByTheNavigation: a front matter title
// names its page's first entry in the navigation only. Every page keeps the
// whole navigation, so a 16 KiB title over 86,000 entries "- [](a.md)" (a
// 1 MiB view) made a 1.4 GB navigation in each page: the viewer pod, with
// its 128 MiB limit, died at the first render.
func TestAttackFrontMatterTitleAmplifiedByTheNavigation(t *testing.T) {
	g := NewWithT(t)
	title := strings.Repeat("x", maxFrontMatterBytes-64)
	const entries = 860 // 1/100 of a 1 MiB view
	s, _ := newTestServer(map[string]string{
		"a.md":      "---\ntitle: " + title + "\n---\n# A\n",
		SummaryFile: strings.Repeat("- [Again](a.md)\n", entries),
	})
	rec := do(s, http.MethodGet, "/a.md")
	g.Expect(rec.Code).To(Equal(http.StatusOK))
	body := rec.Body.String()
	g.Expect(strings.Count(body, title)).To(Equal(2), "in <title> and the first entry")
	nav := navOf(g, body)
	g.Expect(nav).To(HaveLen(entries))
	g.Expect(nav[0]).To(Equal(`<li class="depth-0 active"><a href="/a.md">` + title + `</a></li>`))
	g.Expect(nav[1]).To(Equal(`<li class="depth-0 active"><a href="/a.md">Again</a></li>`))
}

// TestAttackCostOfHostileInput: each input, at most 1 MiB (16 KiB of front
// matter), renders in a few seconds at most: each cost is linear in the page.
func TestAttackCostOfHostileInput(t *testing.T) {
	fm := func(yaml string) string { return "---\n" + yaml + "\n---\n# Page\n" }
	var deepBlock strings.Builder
	for i := 0; deepBlock.Len() < maxFrontMatterBytes-256; i++ {
		deepBlock.WriteString(strings.Repeat(" ", i) + "a:\n")
	}
	var anchors strings.Builder
	anchors.WriteString("a: &a [x]\n")
	for anchors.Len() < maxFrontMatterBytes-64 {
		anchors.WriteString("- *a\n")
	}
	var aliasesMap strings.Builder
	aliasesMap.WriteString("a: &a {x: y}\nb: [")
	for aliasesMap.Len() < maxFrontMatterBytes-64 {
		aliasesMap.WriteString("*a,")
	}
	aliasesMap.WriteString("]\ntitle: T")
	var manyKeys strings.Builder
	for i := 0; manyKeys.Len() < maxFrontMatterBytes-64; i++ {
		fmt.Fprintf(&manyKeys, "k%d: v\n", i)
	}
	manyKeys.WriteString("title: T")
	var footnotes strings.Builder
	label := strings.Repeat("L", 480)
	for i := range maxFootnotes {
		fmt.Fprintf(&footnotes, "[^%s%04d]: n\n", label, i)
	}
	for range maxFootnotes {
		fmt.Fprintf(&footnotes, "r[^%s%04d]\n", label, maxFootnotes-1)
	}
	var unclosed strings.Builder
	for unclosed.Len() < 1<<20-1024 {
		unclosed.WriteString("[^" + strings.Repeat("a", 990) + " ")
	}
	tests := []struct{ name, src string }{
		{"flow nesting past yaml's depth", fm("t: " + strings.Repeat("[", maxFrontMatterBytes-16))},
		{"flow nesting within yaml's depth", fm("t: " + strings.Repeat("[", 8000) + strings.Repeat("]", 8000))},
		{"flow mappings nested", fm("t: " + strings.Repeat("{a: ", 3000) + strings.Repeat("}", 3000))},
		{"block mappings nested", fm(deepBlock.String())},
		{"one anchor, many aliases", fm(anchors.String())},
		{"aliases in a flow list", fm(aliasesMap.String())},
		{"many keys", fm(manyKeys.String())},
		{"unclosed front matter, then a 1 MiB page", "---\ntitle: T\n" + strings.Repeat("a: b\n", (1<<20)/5)},
		{"many footnotes of long labels, one referred to many times", footnotes.String()},
		{"unclosed footnote references on one line", unclosed.String()},
		{"many alerts", strings.Repeat("> [!NOTE]\n> x\n\n", (1<<20)/16)},
		{"many headings with one id", strings.Repeat("# a\n# a-1\n", (1<<20)/10)},
		{"a heading of 1 MiB", "# " + strings.Repeat("İa- ", (1<<20)/5) + "\n# " + strings.Repeat("İa- ", (1<<20)/5)[:100] + "\n"},
		{"a heading of 1 MiB of footnote references", "[^1]: n\n\n# " + strings.Repeat("[^1]", (1<<20)/4-4) + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			start := time.Now()
			_, err := RenderPage([]byte(tt.src))
			took := time.Since(start)
			t.Logf("%d bytes in %v", len(tt.src), took)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(took).To(BeNumerically("<", 5*time.Second), "linear, on a shared machine")
		})
	}
}

// TestAttackOneBadPageTakesNoOtherDown: pages that cannot be front matter,
// that hold markers in odd places or that are empty leave the other pages
// served and titled as before, and a page's title changes only its own entries.
func TestAttackOneBadPageTakesNoOtherDown(t *testing.T) {
	g := NewWithT(t)
	files := map[string]string{
		"good.md":     "# Good\n",
		"bad-1.md":    "---\ntitle: good.md\nfile: good.md\n---\n",
		"bad-2.md":    "---\n",
		"bad-3.md":    "---\n---",
		"bad-4.md":    "---\ntitle: [\n---\n",
		"bad-5.md":    "> [!NOTE]\n",
		"bad-6.md":    "> [!NOTE]\n>\n> [!NOTE]\n> > [!TIP]\n> > x\n",
		"bad-7.md":    "[^x]:\n[^x]\n> [!NOTE]\n> [^x]: y\n",
		"bad-8.md":    "---\n\"title\": a\ntitle: b\n? title\n: c\n---\n",
		"bad-9.md":    "---\r\ntitle: T\r---\r\n",
		"bad-10.md":   "---\ntitle: \"\u200b\u202e\"\n---\n",
		"bad-11.md":   "---\n<<: {title: merged}\n---\n",
		"bad-12.md":   "> [!NOTE]\n> [!NOTE]\n> x\n",
		"bad-13.md":   "> [!NOTE]  \n> x\n",
		"bad-14.md":   "> [!NOTE]\\\n> x\n",
		"bad-15.md":   "> [!note]\n> [!note]: /x\n",
		"bad-16.md":   "> [!NOTE]\n> ---\n> x\n",
		"bad-17.md":   "> [!NOTE]\n> ===\n",
		SummaryFile:   "- [Good](good.md)\n- [One](bad-1.md)\n",
		"SUMMARY2.md": "---\ntitle: SUMMARY.md\n---\n",
	}
	s, _ := newTestServer(files)
	for name := range files {
		rec := do(s, http.MethodGet, "/"+name)
		g.Expect(rec.Code).To(Equal(http.StatusOK), name)
		g.Expect(safetyProblemsOfPage(rec.Body.String())).To(BeEmpty(), name)
	}
	body := do(s, http.MethodGet, "/good.md").Body.String()
	g.Expect(body).To(ContainSubstring("<title>Good</title>"))
	g.Expect(body).To(ContainSubstring(`<a href="/good.md">Good</a>`))
	g.Expect(do(s, http.MethodGet, "/search?q=good").Code).To(Equal(http.StatusOK))
}
