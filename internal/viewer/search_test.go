package viewer

import (
	"fmt"
	"html"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// indexOf renders pages (name → Markdown, in the given order) and indexes them.
func indexOf(g Gomega, pages ...[2]string) *searchIndex {
	ips := make([]indexPage, 0, len(pages))
	for _, p := range pages {
		r, err := RenderPage([]byte(p[1]))
		g.Expect(err).NotTo(HaveOccurred())
		ips = append(ips, indexPage{name: p[0], title: strings.TrimSuffix(p[0], ".md"), sections: r.Sections})
	}
	return buildIndex(ips)
}

// hitLinks returns "page#anchor" for each hit, in order.
func hitLinks(res Results) []string {
	out := make([]string, 0, len(res.Hits))
	for _, h := range res.Hits {
		out = append(out, h.Page+"#"+h.Anchor)
	}
	return out
}

// seedPage1 is page1.md of the MarkdownView sample (config/samples).
const seedPage1 = "# Page 1\n\n一ページ目のコンテンツです。\n\n- Item 1\n- Item 2\n"

func TestSearchCJK(t *testing.T) {
	g := NewWithT(t)
	ix := indexOf(g,
		[2]string{"page1.md", seedPage1},
		[2]string{"page2.md", "# Page 2\n\n| column | value |\n|---|---|\n| a | 1 |\n"},
		[2]string{"zh.md", "# 中文文档\n\n## 安装\n\n使用搜索引擎查找页面。\n\n## 配置\n\n修改配置文件。\n"},
		[2]string{"ja.md", "# 日本語\n\nペーパーとメッセージの資料。\n\n## 検索\n\n全文検索で本を探す。\n"},
		[2]string{"ko.md", "# 한국어\n\n검색 엔진 문서입니다.\n"},
	)
	tests := []struct {
		query string
		want  []string // hits in order
	}{
		{"ページ", []string{"page1.md#page-1"}},             // the sample page, by its Japanese text; ja.md has the bigrams, not the word
		{"ペー", []string{"ja.md#日本語", "page1.md#page-1"}}, // two characters, one bigram: in both; the shorter section first
		{"ページ目", []string{"page1.md#page-1"}},            // "ジ目" is only on page 1
		{"ﾍﾟｰｼﾞ", []string{"page1.md#page-1"}},           // half-width katakana, as some keyboards type them
		{"搜索", []string{"zh.md#安装"}},                     // Chinese word in a section
		{"配置", []string{"zh.md#配置"}},                     // in the heading and the text
		{"搜索 配置", nil},                                   // all terms must be in one section
		{"検索", []string{"ja.md#検索"}},                     // Japanese kanji
		{"本", []string{"ja.md#日本語", "ja.md#検索"}},         // one character: found inside words too; in a heading beats in text
		{"검색", []string{"ko.md#한국어"}},                    // Korean
		{"コンテンツ ITEM", []string{"page1.md#page-1"}},      // mixed scripts, any case
		{"column", []string{"page2.md#page-2"}},          // table cells
		{"存在しない", nil},                                   // nowhere
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			NewWithT(t).Expect(hitLinks(ix.Search(tt.query))).To(HaveExactElements(tt.want))
		})
	}
}

func TestSearchRanking(t *testing.T) {
	g := NewWithT(t)
	ix := indexOf(g,
		[2]string{"a.md", "# Alpha\n\nThe reconcile loop is mentioned once here, among many other words about nothing in particular.\n"},
		[2]string{"b.md", "# Bravo\n\n## Reconcile\n\nHow it works.\n"},
		[2]string{"c.md", "# Charlie\n\nReconcile, reconcile, reconcile: three times.\n"},
		[2]string{"d.md", "# Delta\n\nReconciler and reconciling are longer words.\n"},
		[2]string{"e.md", "# Echo\n\nwatch the cache and then install the CRDs\n"},
		[2]string{"f.md", "# Foxtrot\n\ninstall the CRDs and watch the cache\n"},
	)
	// A heading match beats text; more occurrences beat fewer; whole words
	// beat words found by prefix (last).
	g.Expect(hitLinks(ix.Search("reconcile"))).To(Equal([]string{"b.md#reconcile", "c.md#charlie", "a.md#alpha", "d.md#delta"}))
	// Both sections hold every word; the one with the exact phrase is first,
	// whichever way round the query puts it.
	g.Expect(hitLinks(ix.Search("install the CRDs"))).To(Equal([]string{"f.md#foxtrot", "e.md#echo"}))
	g.Expect(hitLinks(ix.Search("watch the cache and"))).To(Equal([]string{"e.md#echo", "f.md#foxtrot"}))
	// Short words are not prefixes: "re" finds no "reconcile".
	g.Expect(ix.Search("re").Hits).To(BeEmpty())
	// The page title counts as the first section's heading.
	g.Expect(hitLinks(ix.Search("delta"))).To(Equal([]string{"d.md#delta"}))
}

func TestSearchEmptyAndOddQueries(t *testing.T) {
	g := NewWithT(t)
	ix := indexOf(g, [2]string{"a.md", "# A\n\nsome text with words\n"})
	for _, q := range []string{"", "   ", "!!!", "<>&\"'", "\x00\xff"} {
		res := ix.Search(q)
		g.Expect(res.Hits).To(BeEmpty(), "query %q", q)
		g.Expect(res.Total).To(BeZero())
	}
	g.Expect(buildIndex(nil).Search("anything").Hits).To(BeEmpty())
}

func TestSearchLongQueries(t *testing.T) {
	g := NewWithT(t)
	ix := indexOf(g, [2]string{"a.md", "# A\n\nalpha bravo charlie\n"}, [2]string{"b.md", "# B\n\nページの検索\n"})
	for _, q := range []string{
		strings.Repeat("alpha ", 2000),                        // 12k characters, one term
		"alpha " + strings.Repeat("x", 10000),                 // a 10k-character word
		strings.Repeat("ページ", 4000),                           // 12k CJK characters
		strings.Repeat("w", 5000) + strings.Repeat("あ", 5000), // mixed
		strings.Repeat("alpha bravo charlie ", 600),           // many repeated terms
	} {
		start := time.Now()
		res := ix.Search(q)
		g.Expect(time.Since(start)).To(BeNumerically("<", time.Second))
		g.Expect(len(res.Hits)).To(BeNumerically("<=", 1))
		q := parseQuery(q)
		g.Expect(len(q.terms)).To(BeNumerically("<=", maxQueryTerms))
		g.Expect(len(q.text)).To(BeNumerically("<=", maxQueryBytes))
	}
	// Cut at the limit, the query still finds what its first words name.
	g.Expect(hitLinks(ix.Search(strings.Repeat("alpha ", 2000)))).To(Equal([]string{"a.md#a"}))
	// Distinct terms past maxQueryTerms are ignored, not required.
	many := make([]string, 0, maxQueryTerms+5)
	for i := range maxQueryTerms + 5 {
		many = append(many, fmt.Sprintf("w%d", i))
	}
	ix = indexOf(g, [2]string{"w.md", "# W\n\n" + strings.Join(many[:maxQueryTerms], " ") + "\n"})
	g.Expect(ix.Search(strings.Join(many, " ")).Hits).To(HaveLen(1))
}

func TestSearchSnippets(t *testing.T) {
	g := NewWithT(t)
	long := strings.Repeat("filler words that say nothing. ", 30)
	ix := indexOf(g,
		[2]string{"a.md", "# Guide\n\n" + long + "Here the `<b>operator</b>` & its reconcile loop run. " + long + "\n"},
		[2]string{"j.md", "# 日本語\n\n" + strings.Repeat("あいうえお。", 40) + "一ページ目のコンテンツです。" + strings.Repeat("かきくけこ。", 40) + "\n"},
	)
	res := ix.Search("operator reconcile")
	g.Expect(res.Hits).To(HaveLen(1))
	s := string(res.Hits[0].Snippet)
	g.Expect(s).To(HavePrefix("…"))
	g.Expect(s).To(HaveSuffix("…"))
	g.Expect(s).To(ContainSubstring("&lt;b&gt;<mark>operator</mark>&lt;/b&gt; &amp; its <mark>reconcile</mark> loop"))
	g.Expect(len(html.UnescapeString(s))).To(BeNumerically("<=", snippetBytes+len("……")+60), "a window, not the whole section")
	g.Expect(string(res.Hits[0].Heading)).To(Equal("Guide"))

	res = ix.Search("ページ")
	g.Expect(res.Hits).To(HaveLen(1))
	g.Expect(string(res.Hits[0].Snippet)).To(ContainSubstring("一<mark>ページ</mark>目"))

	// A match in the heading is marked there.
	res = ix.Search("guide")
	g.Expect(string(res.Hits[0].Heading)).To(Equal("<mark>Guide</mark>"))
}

// snippetMarkup is all the markup a snippet or a hit's heading may hold.
var snippetMarkup = regexp.MustCompile(`</?mark>`)

func FuzzSearch(f *testing.F) {
	f.Add("ページ")
	f.Add("reconcile loop")
	f.Add("<script>alert(1)</script>")
	f.Add("本 搜索 ｆｕｌｌ")
	f.Add(strings.Repeat("a ", 300))
	f.Add("\xff\xfe\x00")
	ix := indexOf(NewWithT(f),
		[2]string{"page1.md", seedPage1},
		[2]string{"zh.md", "# 中文文档\n\n使用搜索引擎查找页面。<script>alert(1)</script>\n"},
		[2]string{"en.md", "# Guide\n\nThe <b>reconcile</b> loop & the cache.\n\n## Install\n\n```sh\nmake deploy\n```\n" + string(realisticMarkdown(8<<10))},
	)
	f.Fuzz(func(t *testing.T, q string) {
		g := NewWithT(t)
		res := ix.Search(q)
		g.Expect(len(res.Hits)).To(BeNumerically("<=", maxResults))
		g.Expect(res.Total).To(BeNumerically(">=", len(res.Hits)))
		parsed := parseQuery(q)
		for i, h := range res.Hits {
			// Every term of the query is in the section (or its heading, or
			// for a page's first section the page title), whole or as a prefix.
			d := ix.docs[h.doc]
			has := map[string]bool{}
			for _, text := range []string{d.text, d.heading.Text, d.pageTitle} {
				tokenize(text, true, func(term []byte, _, _ int) { has[string(term)] = true })
			}
			for _, t := range parsed.terms {
				found := has[t.term]
				for term := range has {
					found = found || isPrefixable(t.term) && strings.HasPrefix(term, t.term)
				}
				g.Expect(found).To(BeTrue(), "hit %s#%s lacks %q", h.Page, h.Anchor, t.term)
			}
			if i > 0 {
				g.Expect(h.score).To(BeNumerically("<=", res.Hits[i-1].score), "best first")
			}
			for _, part := range []string{string(h.Snippet), string(h.Heading)} {
				text := snippetMarkup.ReplaceAllString(part, "")
				g.Expect(text).NotTo(ContainSubstring("<"), "only <mark> is markup: %q", part)
				g.Expect(strings.Count(part, "<mark>")).To(Equal(strings.Count(part, "</mark>")))
			}
		}
	})
}

func TestSearchIndexIsBounded(t *testing.T) {
	g := NewWithT(t)
	small := indexPage{name: "small.md", title: "small", sections: []Section{{Text: "needle in a small page"}}}
	huge := indexPage{name: "huge.md", title: "huge", sections: []Section{{Text: strings.Repeat("needle ", maxIndexedBytes/7+1)}}}
	ix := buildIndex([]indexPage{small, huge, small})
	g.Expect(ix.skipped).To(Equal(1))
	g.Expect(ix.bytes).To(BeNumerically("<=", maxIndexedBytes))
	res := ix.Search("needle")
	g.Expect(hitLinks(res)).To(Equal([]string{"small.md#", "small.md#"}))
	g.Expect(res.Skipped).To(Equal(1))

	var page strings.Builder
	g.Expect(pageTemplate.Execute(&page, pageData{Title: "Search", Query: "needle", Search: &res})).To(Succeed())
	g.Expect(page.String()).To(ContainSubstring("1 page was left out of the index"))
}
