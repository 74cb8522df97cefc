package viewer

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestSplitFrontMatter(t *testing.T) {
	// laughs is a YAML alias bomb: a billion "lol"s if aliases were expanded.
	laughs := "a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n"
	for c := 'b'; c <= 'i'; c++ {
		prev := string(c - 1)
		laughs += string(c) + ": &" + string(c) + " [*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + "]\n"
	}
	tests := []struct {
		name      string
		src       string
		wantTitle string
		wantBody  string
		asWritten bool // no front matter: the body is the whole page
	}{
		{name: "no front matter", src: "# Page\n", asWritten: true},
		{name: "a title", src: "---\ntitle: Getting started\n---\n# Page\n", wantTitle: "Getting started", wantBody: "# Page\n"},
		{name: "other keys around it", src: "---\nlayout: doc\ntitle: 'Quoted: yes'\ntags: [a, b]\n---\nText\n", wantTitle: "Quoted: yes", wantBody: "Text\n"},
		{name: "CRLF lines", src: "---\r\ntitle: Windows\r\n---\r\nText\r\n", wantTitle: "Windows", wantBody: "Text\r\n"},
		{name: "spaces after the fences", src: "--- \ntitle: T\n---\t\nText\n", wantTitle: "T", wantBody: "Text\n"},
		{name: "a folded title is one line", src: "---\ntitle: >\n  Two\n  lines\n---\n", wantTitle: "Two lines"},
		{name: "markup in the title is text", src: "---\ntitle: \"</title><script>alert(1)</script>\"\n---\nx\n", wantTitle: "</title><script>alert(1)</script>", wantBody: "x\n"},
		{name: "a title that is no string", src: "---\ntitle: 42\n---\nText\n", wantBody: "Text\n"},
		{name: "a title that is a list", src: "---\ntitle: [a, b]\n---\nText\n", wantBody: "Text\n"},
		{name: "a title that is an alias", src: "---\nname: &n Aliased\ntitle: *n\n---\nText\n", wantBody: "Text\n"},
		{name: "no title", src: "---\nlayout: doc\n---\nText\n", wantBody: "Text\n"},
		{name: "empty", src: "---\n---\nText\n", wantBody: "Text\n"},
		{name: "only a comment", src: "---\n# a comment\n---\nText\n", wantBody: "Text\n"},
		{name: "the page ends at the fence", src: "---\ntitle: T\n---", wantTitle: "T", wantBody: ""},
		{name: "an alias bomb is read without expanding it", src: "---\n" + laughs + "title: Laughs\n---\nText\n", wantTitle: "Laughs", wantBody: "Text\n"},
		// Not front matter: the page is rendered as written.
		{name: "malformed YAML", src: "---\ntitle: [oops\n---\nText\n", asWritten: true},
		{name: "a list", src: "---\n- a\n- b\n---\nText\n", asWritten: true},
		{name: "text between two rules", src: "---\nJust a paragraph\n---\nText\n", asWritten: true},
		{name: "not closed", src: "---\ntitle: T\n\nText\n", asWritten: true},
		{name: "not at the start", src: "\n---\ntitle: T\n---\nText\n", asWritten: true},
		{name: "four dashes", src: "----\ntitle: T\n----\nText\n", asWritten: true},
		{name: "text after the fence", src: "--- x\ntitle: T\n---\nText\n", asWritten: true},
		{name: "closed past the bound", src: "---\ntitle: T\nx: '" + strings.Repeat("y", maxFrontMatterBytes) + "'\n---\nText\n", asWritten: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			start := time.Now()
			title, body := splitFrontMatter([]byte(tt.src))
			g.Expect(time.Since(start)).To(BeNumerically("<", time.Second))
			g.Expect(title).To(Equal(tt.wantTitle))
			if tt.asWritten {
				g.Expect(string(body)).To(Equal(tt.src))
			} else {
				g.Expect(string(body)).To(Equal(tt.wantBody))
			}
		})
	}
}

func TestRenderFrontMatter(t *testing.T) {
	g := NewWithT(t)
	r, err := RenderPage([]byte("---\ntitle: Handbook\nowner: team-a\n---\n# Welcome\n\nText.\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Title).To(Equal("Handbook"))
	g.Expect(string(r.HTML)).To(Equal("<h1 id=\"welcome\">Welcome</h1>\n<p>Text.</p>\n"))
	for _, s := range r.Sections {
		g.Expect(s.Text).NotTo(ContainSubstring("team-a"), "front matter is not searchable")
	}

	// Malformed front matter: the page is rendered as it is written.
	r, err = RenderPage([]byte("---\ntitle: [oops\n---\nText.\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Title).To(BeEmpty())
	g.Expect(string(r.HTML)).To(Equal("<hr>\n<h2 id=\"title-oops\">title: [oops</h2>\n<p>Text.</p>\n"))
}

// frontMatterFiles is a site without SUMMARY.md whose pages have titles in
// their front matter, one of them hostile, one malformed.
func frontMatterFiles() map[string]string {
	return map[string]string{
		"a-intro.md":  "---\ntitle: Introduction to Trellis\n---\n# Welcome\n\nReconcile things.\n",
		"b-plain.md":  "# Plain\n\nNo front matter.\n",
		"c-evil.md":   "---\ntitle: \"</title><script>alert(1)</script>\"\n---\nEvil page.\n",
		"d-broken.md": "---\ntitle: [oops\n---\nBroken page.\n",
	}
}

// TestServerFrontMatterTitles: a page's front matter title names it in the
// navigation, the window title and search results; a page without one keeps
// the name it had; markup in a title is text; malformed front matter is
// shown as written, never as an error.
func TestServerFrontMatterTitles(t *testing.T) {
	g := NewWithT(t)
	s, _ := newTestServer(frontMatterFiles())

	body := do(s, http.MethodGet, "/a-intro.md").Body.String()
	g.Expect(body).To(ContainSubstring("<title>Introduction to Trellis</title>"))
	g.Expect(navOf(g, body)).To(Equal([]string{
		`<li class="depth-0 active"><a href="/a-intro.md">Introduction to Trellis</a></li>`,
		`<li class="depth-0"><a href="/b-plain.md">b-plain</a></li>`,
		`<li class="depth-0"><a href="/c-evil.md">&lt;/title&gt;&lt;script&gt;alert(1)&lt;/script&gt;</a></li>`,
		`<li class="depth-0"><a href="/d-broken.md">d-broken</a></li>`,
	}))
	g.Expect(body).NotTo(ContainSubstring("title:"))

	g.Expect(do(s, http.MethodGet, "/b-plain.md").Body.String()).To(ContainSubstring("<title>b-plain</title>"))

	rec := do(s, http.MethodGet, "/c-evil.md")
	g.Expect(rec.Code).To(Equal(http.StatusOK))
	body = rec.Body.String()
	g.Expect(body).To(ContainSubstring("<title>&lt;/title&gt;&lt;script&gt;alert(1)&lt;/script&gt;</title>"))
	g.Expect(strings.ToLower(body)).NotTo(ContainSubstring("<script"))
	g.Expect(safetyProblemsOfPage(body)).To(BeEmpty())

	rec = do(s, http.MethodGet, "/d-broken.md")
	g.Expect(rec.Code).To(Equal(http.StatusOK))
	g.Expect(rec.Body.String()).To(ContainSubstring("<title>d-broken</title>"))
	g.Expect(rec.Body.String()).To(ContainSubstring("title: [oops</h2>"))

	search := do(s, http.MethodGet, "/search?q=reconcile").Body.String()
	g.Expect(search).To(ContainSubstring(`<a href="/a-intro.md#welcome">Welcome</a> <span class="in-page">Introduction to Trellis</span>`))
}

// TestServerFrontMatterTitleOverSummary: a title in front matter names the
// page in a SUMMARY.md navigation too, and SUMMARY.md's own front matter is
// not navigation.
func TestServerFrontMatterTitleOverSummary(t *testing.T) {
	g := NewWithT(t)
	s, _ := newTestServer(map[string]string{
		SummaryFile: "---\ntitle: Contents\n---\n# Summary\n\n- [Intro](intro.md)\n- [Setup](setup.md)\n",
		"intro.md":  "---\ntitle: Introduction\n---\n# Hello\n",
		"setup.md":  "# Setup\n",
	})
	body := do(s, http.MethodGet, "/intro.md").Body.String()
	g.Expect(body).To(ContainSubstring("<title>Introduction</title>"))
	g.Expect(navOf(g, body)).To(Equal([]string{
		`<li class="depth-0 active"><a href="/intro.md">Introduction</a></li>`,
		`<li class="depth-0"><a href="/setup.md">Setup</a></li>`,
	}))
}

func FuzzFrontMatter(f *testing.F) {
	f.Add([]byte("---\ntitle: T\n---\n# x\n"))
	f.Add([]byte("---\r\ntitle: \"</title><script>alert(1)</script>\"\r\n---\r\n"))
	f.Add([]byte("---\ntitle: >\n  a\n  b\nx: &a [1]\ny: *a\n---\n---\ntitle: again\n---\n"))
	f.Add([]byte("---\ntitle: [\n---\n"))
	f.Add([]byte("---\n- a\n---\ntext\n---\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		g := NewWithT(t)
		title, body := splitFrontMatter(src)
		g.Expect(bytes.HasSuffix(src, body)).To(BeTrue(), "the body is the page's end")
		if len(body) < len(src) {
			g.Expect(src).To(HavePrefix("---"))
		} else {
			g.Expect(title).To(BeEmpty())
		}
		g.Expect(title).To(Equal(strings.Join(strings.Fields(title), " ")), "one line, trimmed")

		// The title reaches a page only through html/template.
		st := newSite(&Snapshot{Version: "v", Pages: map[string]string{"p.md": string(src)}})
		p := st.pages["p.md"]
		g.Expect(st.render(p)).To(Succeed())
		page := string(p.html)
		head, _, _ := strings.Cut(page, "</title>")
		g.Expect(strings.Count(head, "<")).To(Equal(strings.Count(pageHead, "<")), "the title adds no tag: %q", head)
		g.Expect(safetyProblemsOfPage(page)).To(BeEmpty())
	})
}

// pageHead is the page template's text up to its title's end, without the title.
var pageHead = func() string {
	var buf bytes.Buffer
	_ = pageTemplate.Execute(&buf, pageData{})
	head, _, _ := strings.Cut(buf.String(), "</title>")
	return head
}()
