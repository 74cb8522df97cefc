package viewer

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	. "github.com/onsi/gomega"
)

// countingSource counts the loads of a MemorySource.
type countingSource struct {
	MemorySource
	loads atomic.Int32
}

func (c *countingSource) Load(ctx context.Context) (*Snapshot, error) {
	c.loads.Add(1)
	return c.MemorySource.Load(ctx)
}

func TestServerLoadsEachVersionOnce(t *testing.T) {
	g := NewWithT(t)
	src := &countingSource{}
	src.Set(testFiles(), nil)
	s := NewServer(src, slog.New(slog.DiscardHandler))

	first := do(s, http.MethodGet, "/install.md").Body.String()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, target := range []string{"/", "/install.md", "/config.md", "/search?q=install", "/healthz"} {
				do(s, http.MethodGet, target)
			}
		}()
	}
	wg.Wait()
	g.Expect(src.loads.Load()).To(Equal(int32(1)), "one load for the version, whatever the number of requests")
	g.Expect(do(s, http.MethodGet, "/install.md").Body.String()).To(Equal(first))

	// The rendered page is the same object while the version is unchanged:
	// a page view does not render again.
	st, err := s.site(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	html := st.pages["install.md"].html
	do(s, http.MethodGet, "/install.md")
	g.Expect(&st.pages["install.md"].html[0]).To(BeIdenticalTo(&html[0]))

	src.Set(map[string]string{"install.md": "# Install, again\n"}, nil)
	g.Expect(do(s, http.MethodGet, "/install.md").Body.String()).To(ContainSubstring("Install, again"))
	g.Expect(src.loads.Load()).To(Equal(int32(2)))
}

func TestServerPageETag(t *testing.T) {
	g := NewWithT(t)
	s, mem := newTestServer(testFiles())
	rec := do(s, http.MethodGet, "/install.md")
	etag := rec.Header().Get("ETag")
	g.Expect(etag).To(MatchRegexp(`^"[0-9a-z]+"$`))

	get := func(ifNoneMatch string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/install.md", nil)
		req.Header.Set("If-None-Match", ifNoneMatch)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec
	}
	g.Expect(get(etag).Code).To(Equal(http.StatusNotModified))
	g.Expect(get(`"other", ` + etag).Code).To(Equal(http.StatusNotModified))
	g.Expect(get("W/" + etag).Code).To(Equal(http.StatusNotModified))
	g.Expect(get(`"other"`).Code).To(Equal(http.StatusOK))
	expectSecurityHeaders(g, get(etag).Header())

	mem.Set(map[string]string{"install.md": "# Changed\n"}, nil)
	rec = get(etag)
	g.Expect(rec.Code).To(Equal(http.StatusOK), "new content, new tag")
	g.Expect(rec.Header().Get("ETag")).NotTo(Equal(etag))
}

func TestTableOfContents(t *testing.T) {
	tests := []struct {
		name     string
		headings []Heading
		want     []tocEntry
	}{
		{name: "no headings", headings: nil, want: nil},
		{name: "title only", headings: []Heading{{1, "t", "T"}}, want: nil},
		{name: "title and one section is no contents", headings: []Heading{{1, "t", "T"}, {2, "a", "A"}}, want: nil},
		{
			name:     "title left out, levels 2 and 3 indented, 4 dropped",
			headings: []Heading{{1, "t", "T"}, {2, "a", "A"}, {3, "a1", "A1"}, {4, "deep", "Deep"}, {2, "b", "B"}},
			want:     []tocEntry{{0, "a", "A"}, {1, "a1", "A1"}, {0, "b", "B"}},
		},
		{
			name:     "several top-level headings are all listed",
			headings: []Heading{{1, "one", "One"}, {2, "x", "X"}, {1, "two", "Two"}},
			want:     []tocEntry{{0, "one", "One"}, {1, "x", "X"}, {0, "two", "Two"}},
		},
		{
			name:     "no h1: indented from the highest level present",
			headings: []Heading{{3, "a", "A"}, {3, "b", "B"}},
			want:     []tocEntry{{0, "a", "A"}, {0, "b", "B"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(tableOfContents(tt.headings)).To(Equal(tt.want))
		})
	}
}

func TestServerTableOfContents(t *testing.T) {
	g := NewWithT(t)
	s, _ := newTestServer(map[string]string{
		"long.md":  "# Guide\n\n## Install\n\n### From source\n\n## Configure <b>now</b>\n\n## Configure <b>now</b>\n",
		"short.md": "# Short\n\ntext\n\n## Only one\n",
	})
	body := do(s, http.MethodGet, "/long.md").Body.String()
	start := strings.Index(body, `<nav class="toc" aria-label="On this page">`)
	g.Expect(start).To(BeNumerically(">", 0))
	toc := body[start : start+strings.Index(body[start:], "</nav>")]
	g.Expect(navItem.FindAllString(toc, -1)).To(Equal([]string{
		`<li class="toc-0"><a href="#install">Install</a></li>`,
		`<li class="toc-1"><a href="#from-source">From source</a></li>`,
		`<li class="toc-0"><a href="#configure-now">Configure now</a></li>`,
		`<li class="toc-0"><a href="#configure-now-1">Configure now</a></li>`,
	}))
	for _, id := range []string{"install", "from-source", "configure-now", "configure-now-1"} {
		g.Expect(body).To(ContainSubstring(` id="` + id + `"`))
	}
	g.Expect(safetyProblemsOfPage(body)).To(BeEmpty())

	g.Expect(do(s, http.MethodGet, "/short.md").Body.String()).NotTo(ContainSubstring(`class="toc"`))
}

func TestServerTableOfContentsLinksUnicodeIDs(t *testing.T) {
	g := NewWithT(t)
	s, _ := newTestServer(map[string]string{"ja.md": "# 日本語\n\n## はじめに\n\n## 使い方\n"})
	body := do(s, http.MethodGet, "/ja.md").Body.String()
	// html/template writes the fragment percent-encoded (lower-case hex);
	// browsers decode it to find the id.
	g.Expect(body).To(ContainSubstring(`<a href="#` + strings.ToLower(url.PathEscape("はじめに")) + `">はじめに</a>`))
	g.Expect(body).To(ContainSubstring(`<h2 id="はじめに">はじめに</h2>`))
}

func TestServerSearch(t *testing.T) {
	files := testFiles()
	files["page1.md"] = seedPage1
	files["zh.md"] = "# 中文\n\n## 安装\n\n使用搜索引擎查找页面。\n"
	s, _ := newTestServer(files)

	t.Run("Japanese", func(t *testing.T) {
		g := NewWithT(t)
		rec := do(s, http.MethodGet, "/search?q="+url.QueryEscape("ページ"))
		g.Expect(rec.Code).To(Equal(http.StatusOK))
		g.Expect(rec.Header().Get("Content-Type")).To(Equal("text/html; charset=utf-8"))
		expectSecurityHeaders(g, rec.Header())
		body := rec.Body.String()
		g.Expect(body).To(ContainSubstring(`<a href="/page1.md#page-1">Page 1</a> <span class="in-page">page1</span>`))
		g.Expect(body).To(ContainSubstring("一<mark>ページ</mark>目のコンテンツです。"))
		g.Expect(body).To(ContainSubstring("1 section matches “ページ”"))
		g.Expect(body).To(ContainSubstring(`value="ページ"`), "the box keeps the query")
		g.Expect(body).To(ContainSubstring("<title>Search: ページ</title>"))
		g.Expect(safetyProblemsOfPage(body)).To(BeEmpty())
	})
	t.Run("Chinese", func(t *testing.T) {
		g := NewWithT(t)
		body := do(s, http.MethodGet, "/search?q="+url.QueryEscape("搜索")).Body.String()
		g.Expect(body).To(ContainSubstring(`<a href="/zh.md#` + strings.ToLower(url.PathEscape("安装")) + `">安装</a>`))
		g.Expect(body).To(ContainSubstring("使用<mark>搜索</mark>引擎"))
	})
	t.Run("a heading that is the page title names the page once", func(t *testing.T) {
		g := NewWithT(t)
		body := do(s, http.MethodGet, "/search?q=deploy").Body.String()
		g.Expect(body).To(ContainSubstring(`<a href="/install.md#install">Install</a>` + "\n"))
	})
	t.Run("the query is escaped everywhere", func(t *testing.T) {
		g := NewWithT(t)
		q := `"><script>alert(1)</script><img src=x onerror=alert(1)>`
		body := do(s, http.MethodGet, "/search?q="+url.QueryEscape(q)).Body.String()
		g.Expect(body).NotTo(ContainSubstring("<script"))
		g.Expect(body).NotTo(ContainSubstring("<img"))
		g.Expect(safetyProblemsOfPage(body)).To(BeEmpty())
	})
	t.Run("matched text from the files is escaped", func(t *testing.T) {
		g := NewWithT(t)
		body := do(s, http.MethodGet, "/search?q=alert").Body.String()
		g.Expect(body).To(ContainSubstring("xss.md"))
		g.Expect(body).NotTo(ContainSubstring("<script"))
		g.Expect(safetyProblemsOfPage(body)).To(BeEmpty())
	})
	t.Run("no query", func(t *testing.T) {
		g := NewWithT(t)
		for _, target := range []string{"/search", "/search?q=", "/search?q=+++"} {
			rec := do(s, http.MethodGet, target)
			g.Expect(rec.Code).To(Equal(http.StatusOK))
			g.Expect(rec.Body.String()).To(ContainSubstring("Type words to find"))
			g.Expect(rec.Body.String()).To(ContainSubstring("<title>Search</title>"))
		}
	})
	t.Run("nothing found", func(t *testing.T) {
		g := NewWithT(t)
		body := do(s, http.MethodGet, "/search?q=zzzzzz").Body.String()
		g.Expect(body).To(ContainSubstring("0 sections match “zzzzzz”"))
		g.Expect(body).NotTo(ContainSubstring("<mark>"))
	})
	t.Run("a 10k-character query", func(t *testing.T) {
		g := NewWithT(t)
		rec := do(s, http.MethodGet, "/search?q="+strings.Repeat("install+", 1250))
		g.Expect(rec.Code).To(Equal(http.StatusOK))
		g.Expect(rec.Body.String()).To(ContainSubstring(`href="/install.md#install"`))
	})
	t.Run("a page's title from SUMMARY.md finds the page, not SUMMARY.md", func(t *testing.T) {
		g := NewWithT(t)
		body := do(s, http.MethodGet, "/search?q=Introduction").Body.String()
		g.Expect(body).To(ContainSubstring(`<a href="/intro.md#welcome">Welcome</a> <span class="in-page">Introduction</span>`))
		g.Expect(body).To(ContainSubstring("1 section matches"))
		g.Expect(body).NotTo(ContainSubstring(`href="/SUMMARY.md`))
	})
	t.Run("pages not in the site are not searched", func(t *testing.T) {
		g := NewWithT(t)
		for _, q := range []string{"Hidden", "Nested", "Outside"} {
			g.Expect(do(s, http.MethodGet, "/search?q="+q).Body.String()).To(ContainSubstring("0 sections match"))
		}
	})
	t.Run("unavailable before the first Set", func(t *testing.T) {
		g := NewWithT(t)
		empty, _ := newTestServer(nil)
		g.Expect(do(empty, http.MethodGet, "/search?q=x").Code).To(Equal(http.StatusServiceUnavailable))
	})
}

func TestServerSearchBoxOnEveryPage(t *testing.T) {
	g := NewWithT(t)
	s, _ := newTestServer(testFiles())
	for _, target := range []string{"/", "/install.md", "/search?q=x"} {
		body := do(s, http.MethodGet, target).Body.String()
		g.Expect(body).To(ContainSubstring(`<form class="search" action="/search" method="get" role="search">`))
		g.Expect(body).To(ContainSubstring(`name="q"`))
	}
}

// TestServerWarmsANewVersion: the first request after an edit starts the
// rendering of every page and the search index in the background.
func TestServerWarmsANewVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewWithT(t)
		s, mem := newTestServer(testFiles())
		g.Expect(do(s, http.MethodGet, "/healthz").Code).To(Equal(http.StatusOK))
		synctest.Wait() // the warm-up has finished
		st := s.current.Load()
		for name, p := range st.pages {
			g.Expect(p.html).NotTo(BeEmpty(), "page %s", name)
		}
		g.Expect(st.index).NotTo(BeNil())

		// So is the next version's.
		mem.Set(map[string]string{"a.md": "# A\n", "b.md": "# B\n"}, nil)
		g.Expect(do(s, http.MethodGet, "/healthz").Code).To(Equal(http.StatusOK))
		synctest.Wait()
		g.Expect(s.current.Load()).NotTo(BeIdenticalTo(st))
		g.Expect(s.current.Load().index).NotTo(BeNil())
	})
}
