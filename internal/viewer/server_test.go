package viewer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
)

const testSummary = `# Summary

[Introduction](intro.md)

# Guide

- [Install](install.md)
  - [Config <b>bold</b>](config.md)
  - [Missing](missing.md)
- [Draft]()
---
- [<script>alert(1)</script>](xss.md)
# <img src=x onerror=alert(1)>
- [Secret](../etc/passwd)
`

func testFiles() map[string]string {
	return map[string]string{
		SummaryFile:        testSummary,
		"intro.md":         "# Welcome\n\nHello **world**.\n",
		"install.md":       "# Install\n\nRun `make deploy`.\n",
		"config.md":        "# Config\n\n| key | value |\n|-----|-------|\n| a   | 1     |\n",
		"xss.md":           "<script>alert(1)</script>\n\n[x](javascript:alert(1))\n",
		"unlisted.md":      "# Not in the summary\n",
		".hidden.md":       "# Hidden\n",
		"a/b.md":           "# Nested\n",
		"../x.md":          "# Outside\n",
		"../../etc/passwd": "root:x:0:0\n",
		"x":                "not markdown\n",
	}
}

func newTestServer(files map[string]string) (*Server, *MemorySource) {
	mem := &MemorySource{}
	if files != nil {
		mem.Set(files, nil)
	}
	return NewServer(mem, slog.New(slog.DiscardHandler)), mem
}

func do(s http.Handler, method, target string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec
}

// expectSecurityHeaders checks the headers every response must carry.
func expectSecurityHeaders(g Gomega, h http.Header) {
	csp := h.Get("Content-Security-Policy")
	g.Expect(csp).NotTo(BeEmpty(), "Content-Security-Policy")
	directives := map[string]string{}
	for _, d := range strings.Split(csp, ";") {
		fields := strings.Fields(d)
		if len(fields) > 0 {
			directives[fields[0]] = strings.Join(fields[1:], " ")
		}
	}
	g.Expect(directives).To(HaveKeyWithValue("default-src", "'none'"))
	g.Expect(directives).NotTo(HaveKey("script-src"), "no script at all: default-src 'none' covers it")
	g.Expect(directives).To(HaveKeyWithValue("base-uri", "'none'"))
	g.Expect(directives).To(HaveKeyWithValue("form-action", "'self'"), "the search box submits to the site, nowhere else")
	g.Expect(directives).To(HaveKeyWithValue("frame-ancestors", "'none'"))
	g.Expect(directives).To(HaveKeyWithValue("style-src", "'self'"))
	g.Expect(csp).NotTo(ContainSubstring("unsafe-inline"))
	g.Expect(csp).NotTo(ContainSubstring("unsafe-eval"))
	g.Expect(csp).NotTo(ContainSubstring("*"))
	g.Expect(h.Get("X-Content-Type-Options")).To(Equal("nosniff"))
	g.Expect(h.Get("Referrer-Policy")).To(Equal("no-referrer"))
}

func TestServerSecurityHeadersOnEveryResponse(t *testing.T) {
	s, _ := newTestServer(testFiles())
	empty, _ := newTestServer(nil)
	tests := []struct {
		name   string
		server http.Handler
		method string
		target string
		status int
	}{
		{"root", s, http.MethodGet, "/", http.StatusOK},
		{"page", s, http.MethodGet, "/install.md", http.StatusOK},
		{"head", s, http.MethodHead, "/intro.md", http.StatusOK},
		{"not found", s, http.MethodGet, "/nope.md", http.StatusNotFound},
		{"traversal", s, http.MethodGet, "/../etc/passwd", http.StatusNotFound},
		{"healthz", s, http.MethodGet, "/healthz", http.StatusOK},
		{"css", s, http.MethodGet, "/style.css", http.StatusOK},
		{"post", s, http.MethodPost, "/", http.StatusMethodNotAllowed},
		{"healthz unavailable", empty, http.MethodGet, "/healthz", http.StatusServiceUnavailable},
		{"page unavailable", empty, http.MethodGet, "/intro.md", http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			rec := do(tt.server, tt.method, tt.target)
			g.Expect(rec.Code).To(Equal(tt.status))
			expectSecurityHeaders(g, rec.Header())
		})
	}
}

func TestServerOverHTTP(t *testing.T) {
	s, _ := newTestServer(testFiles())
	srv := httptest.NewServer(s)
	defer srv.Close()
	for _, path := range []string{"/", "/intro.md", "/nope.md", "/healthz", "/style.css"} {
		t.Run(path, func(t *testing.T) {
			g := NewWithT(t)
			req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+path, nil)
			g.Expect(err).NotTo(HaveOccurred())
			resp, err := srv.Client().Do(req)
			g.Expect(err).NotTo(HaveOccurred())
			defer func() { _ = resp.Body.Close() }()
			_, err = io.Copy(io.Discard, resp.Body)
			g.Expect(err).NotTo(HaveOccurred())
			expectSecurityHeaders(g, resp.Header)
		})
	}
}

func TestServerRootServesTheFirstChapter(t *testing.T) {
	g := NewWithT(t)
	s, _ := newTestServer(testFiles())
	rec := do(s, http.MethodGet, "/")
	g.Expect(rec.Code).To(Equal(http.StatusOK))
	g.Expect(rec.Header().Get("Content-Type")).To(Equal("text/html; charset=utf-8"))
	body := rec.Body.String()
	g.Expect(body).To(HavePrefix("<!DOCTYPE html>"))
	g.Expect(body).To(ContainSubstring(`<h1 id="welcome">Welcome</h1>`))
	g.Expect(body).To(ContainSubstring("<strong>world</strong>"))
	g.Expect(body).To(ContainSubstring("<title>Introduction</title>"))
	g.Expect(body).To(ContainSubstring(`<li class="depth-0 active"><a href="/intro.md">Introduction</a></li>`))
}

func TestServerPage(t *testing.T) {
	g := NewWithT(t)
	s, _ := newTestServer(testFiles())
	rec := do(s, http.MethodGet, "/install.md")
	g.Expect(rec.Code).To(Equal(http.StatusOK))
	g.Expect(rec.Header().Get("Content-Type")).To(Equal("text/html; charset=utf-8"))
	g.Expect(rec.Header().Get("Cache-Control")).To(Equal("no-cache"))
	body := rec.Body.String()

	g.Expect(body).To(ContainSubstring("<title>Install</title>"))
	g.Expect(body).To(ContainSubstring(`<link rel="stylesheet" href="/style.css">`))
	g.Expect(body).To(ContainSubstring(`<main class="content">`))
	g.Expect(body).To(ContainSubstring(`<h1 id="install">Install</h1>`))
	g.Expect(body).To(ContainSubstring("<code>make deploy</code>"))

	nav := navOf(g, body)
	g.Expect(nav).To(Equal([]string{
		`<li class="depth-0"><a href="/intro.md">Introduction</a></li>`,
		`<li class="part">Guide</li>`,
		`<li class="depth-0 active"><a href="/install.md">Install</a></li>`,
		`<li class="depth-1"><a href="/config.md">Config &lt;b&gt;bold&lt;/b&gt;</a></li>`,
		`<li class="depth-1 draft">Missing</li>`,
		`<li class="depth-0 draft">Draft</li>`,
		`<li class="rule" role="separator"></li>`,
		`<li class="depth-0"><a href="/xss.md">&lt;script&gt;alert(1)&lt;/script&gt;</a></li>`,
		`<li class="part">&lt;img src=x onerror=alert(1)&gt;</li>`,
		`<li class="depth-0 draft">Secret</li>`,
	}))
	g.Expect(strings.Count(body, "active")).To(Equal(1))
}

var navItem = regexp.MustCompile(`<li[^>]*>.*?</li>`)

// navOf returns the <li> lines of the page's navigation.
func navOf(g Gomega, body string) []string {
	start := strings.Index(body, `<nav class="sidebar"`)
	end := strings.Index(body, "</nav>")
	g.Expect(start).To(BeNumerically(">=", 0), "no nav in %s", body)
	g.Expect(end).To(BeNumerically(">", start))
	return navItem.FindAllString(body[start:end], -1)
}

func TestServerEscapesHTMLInSummaryTitles(t *testing.T) {
	g := NewWithT(t)
	s, _ := newTestServer(testFiles())
	for _, target := range []string{"/", "/intro.md", "/config.md", "/xss.md"} {
		body := do(s, http.MethodGet, target).Body.String()
		g.Expect(safetyProblemsOfPage(body)).To(BeEmpty(), "page %s", target)
		g.Expect(body).To(ContainSubstring("&lt;script&gt;alert(1)&lt;/script&gt;"))
		g.Expect(body).To(ContainSubstring("&lt;img src=x onerror=alert(1)&gt;"))
		g.Expect(body).NotTo(ContainSubstring("<b>bold</b>"))
	}
	// The page title of a chapter whose title holds HTML is escaped too.
	body := do(s, http.MethodGet, "/config.md").Body.String()
	g.Expect(body).To(ContainSubstring("<title>Config &lt;b&gt;bold&lt;/b&gt;</title>"))
	body = do(s, http.MethodGet, "/xss.md").Body.String()
	g.Expect(body).To(ContainSubstring("<title>&lt;script&gt;alert(1)&lt;/script&gt;</title>"))
	g.Expect(body).To(ContainSubstring(`<a href="">x</a>`))
}

// templateTags are the page template's own tags; everything else in a page
// comes from the files (or the query) and must be as safe as rendered Markdown.
var templateTags = []string{
	"<body>", "</body>", `<nav class="sidebar" aria-label="Table of contents">`, "</nav>",
	`<form class="search" action="/search" method="get" role="search">`, "</form>",
	`<button type="submit">Search</button>`, `<main class="content">`, "</main>",
	`<nav class="toc" aria-label="On this page">`, "<article>", `<article class="search-results">`, "</article>",
}

// searchInput is the template's search box; its value is the query.
var searchInput = regexp.MustCompile(`<input type="search" name="q" value="[^"<>]*" placeholder="Search" aria-label="Search the site" maxlength="256">`)

// safetyProblemsOfPage checks a whole page: everything but the template's own
// head and tags must be as safe as rendered Markdown.
func safetyProblemsOfPage(body string) []string {
	start := strings.Index(body, "<body>")
	if start < 0 {
		return []string{"no <body>"}
	}
	inner := strings.TrimSuffix(strings.TrimSpace(body[start:]), "</html>")
	if strings.Count(inner, "<form") != 1 || !searchInput.MatchString(inner) {
		return []string{"not exactly the template's one search form"}
	}
	inner = searchInput.ReplaceAllString(inner, "")
	for _, tag := range templateTags {
		inner = strings.ReplaceAll(inner, tag, "")
	}
	for _, li := range regexp.MustCompile(`<li class="[a-z0-9 -]+"( role="separator")?>`).FindAllString(inner, -1) {
		inner = strings.Replace(inner, li, "<li>", 1)
	}
	return safetyProblems([]byte(inner))
}

func TestServerNotFound(t *testing.T) {
	s, _ := newTestServer(testFiles())
	targets := []string{
		"/nope.md",
		"/missing.md", // in SUMMARY.md, but not a file
		"/intro",
		"/intro.md/",
		"/INTRO.MD",
		"/intro.md.bak",
		"/x", // a file, but not Markdown
		"/../etc/passwd",
		"/..%2f..%2fetc%2fpasswd",
		"/%2e%2e/x.md",
		"/%2E%2E%2Fx.md",
		"/../x.md",
		"/SUMMARY.md/../x",
		"/SUMMARY.md/../intro.md",
		"/./intro.md",
		"//intro.md",
		"/.hidden.md",
		"/%2ehidden.md",
		"/a/b.md",
		"/a%2fb.md",
		"/a%5cb.md",
		"/intro.md%00",
		"/favicon.ico",
		"/healthz/",
		"/style.css/",
	}
	for _, target := range targets {
		t.Run(target, func(t *testing.T) {
			g := NewWithT(t)
			rec := do(s, http.MethodGet, target)
			g.Expect(rec.Code).To(Equal(http.StatusNotFound), "body: %s", rec.Body)
			g.Expect(rec.Body.String()).NotTo(ContainSubstring("root:x"))
			g.Expect(rec.Body.String()).NotTo(ContainSubstring("Hidden"))
			g.Expect(rec.Body.String()).NotTo(ContainSubstring("Nested"))
			g.Expect(rec.Body.String()).NotTo(ContainSubstring("Outside"))
			expectSecurityHeaders(g, rec.Header())
		})
	}
}

func TestServerMethods(t *testing.T) {
	s, _ := newTestServer(testFiles())
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions, "PROPFIND"} {
		for _, target := range []string{"/", "/intro.md", "/healthz", "/style.css", "/nope.md"} {
			t.Run(method+" "+target, func(t *testing.T) {
				g := NewWithT(t)
				rec := do(s, method, target)
				g.Expect(rec.Code).To(Equal(http.StatusMethodNotAllowed))
				g.Expect(rec.Body.String()).NotTo(ContainSubstring("Welcome"))
				expectSecurityHeaders(g, rec.Header())
			})
		}
	}
	t.Run("HEAD is allowed", func(t *testing.T) {
		g := NewWithT(t)
		rec := do(s, http.MethodHead, "/intro.md")
		g.Expect(rec.Code).To(Equal(http.StatusOK))
		g.Expect(rec.Header().Get("Content-Type")).To(Equal("text/html; charset=utf-8"))
	})
}

func TestServerHealthz(t *testing.T) {
	t.Run("ok with files", func(t *testing.T) {
		g := NewWithT(t)
		s, _ := newTestServer(testFiles())
		rec := do(s, http.MethodGet, "/healthz")
		g.Expect(rec.Code).To(Equal(http.StatusOK))
		g.Expect(rec.Body.String()).To(Equal("ok\n"))
	})
	t.Run("unavailable before the first Set", func(t *testing.T) {
		g := NewWithT(t)
		s, mem := newTestServer(nil)
		g.Expect(do(s, http.MethodGet, "/healthz").Code).To(Equal(http.StatusServiceUnavailable))
		g.Expect(do(s, http.MethodGet, "/").Code).To(Equal(http.StatusServiceUnavailable))
		mem.Set(map[string]string{"a.md": "# A\n"}, nil)
		g.Expect(do(s, http.MethodGet, "/healthz").Code).To(Equal(http.StatusOK))
		g.Expect(do(s, http.MethodGet, "/").Code).To(Equal(http.StatusOK))
	})
	t.Run("unavailable when the directory is gone", func(t *testing.T) {
		g := NewWithT(t)
		s := NewServer(DirSource{Dir: t.TempDir() + "/missing"}, slog.New(slog.DiscardHandler))
		g.Expect(do(s, http.MethodGet, "/healthz").Code).To(Equal(http.StatusServiceUnavailable))
		g.Expect(do(s, http.MethodGet, "/").Code).To(Equal(http.StatusServiceUnavailable))
	})
}

func TestServerStyleCSS(t *testing.T) {
	g := NewWithT(t)
	s, _ := newTestServer(testFiles())
	rec := do(s, http.MethodGet, "/style.css")
	g.Expect(rec.Code).To(Equal(http.StatusOK))
	g.Expect(rec.Header().Get("Content-Type")).To(Equal("text/css; charset=utf-8"))
	g.Expect(rec.Body.String()).To(ContainSubstring(".sidebar"))
	g.Expect(rec.Body.String()).To(ContainSubstring(".active"))
	g.Expect(rec.Body.String()).NotTo(ContainSubstring("@import"), "style-src 'self' only")
	g.Expect(rec.Body.String()).NotTo(ContainSubstring("url("), "no external resources")
	// The stylesheet is served even before files are available.
	empty, _ := newTestServer(nil)
	g.Expect(do(empty, http.MethodGet, "/style.css").Code).To(Equal(http.StatusOK))
}

// TestStyleCSSSchemesAndPrint checks the stylesheet's media blocks: dark
// colours only on screens that ask for them, and a print block that drops
// navigation, contents and the search box. (The browser tests show dark mode
// applied and print a PDF of a page into .dev/artifacts/viewer.)
func TestStyleCSSSchemesAndPrint(t *testing.T) {
	g := NewWithT(t)
	css := string(styleCSS)
	g.Expect(css).To(ContainSubstring("@media screen and (prefers-color-scheme: dark) {\n  :root { --fg:"))
	g.Expect(css).NotTo(MatchRegexp(`@media \(prefers-color-scheme: dark\)`), "dark colours must not reach paper")
	_, printBlock, ok := strings.Cut(css, "@media print {")
	g.Expect(ok).To(BeTrue())
	printBlock = printBlock[:strings.Index(printBlock, "\n}\n")]
	g.Expect(printBlock).To(ContainSubstring(".sidebar, .toc, .search { display: none; }"))
	g.Expect(printBlock).To(ContainSubstring("pre { white-space: pre-wrap;"))
	g.Expect(printBlock).To(ContainSubstring(`a[href^="http"]::after { content: " (" attr(href) ")";`))
}

func TestServerServesNewContentAfterSet(t *testing.T) {
	g := NewWithT(t)
	s, mem := newTestServer(map[string]string{"a.md": "# Version one\n", "b.md": "# B\n"})

	g.Expect(do(s, http.MethodGet, "/a.md").Body.String()).To(ContainSubstring("Version one"))
	// Served twice from the cache, still the same.
	g.Expect(do(s, http.MethodGet, "/a.md").Body.String()).To(ContainSubstring("Version one"))

	mem.Set(map[string]string{"a.md": "# Version two\n", "b.md": "# B\n"}, nil)
	body := do(s, http.MethodGet, "/a.md").Body.String()
	g.Expect(body).To(ContainSubstring("Version two"))
	g.Expect(body).NotTo(ContainSubstring("Version one"))

	// Back to the first text: the cache must not hand out version two.
	mem.Set(map[string]string{"a.md": "# Version one\n", "b.md": "# B\n"}, nil)
	body = do(s, http.MethodGet, "/a.md").Body.String()
	g.Expect(body).To(ContainSubstring("Version one"))
	g.Expect(body).NotTo(ContainSubstring("Version two"))

	// A removed file is gone, even though its rendering is cached.
	mem.Set(map[string]string{"b.md": "# B\n"}, nil)
	g.Expect(do(s, http.MethodGet, "/a.md").Code).To(Equal(http.StatusNotFound))

	// The navigation follows a new SUMMARY.md at once.
	mem.Set(map[string]string{"b.md": "# B\n", "c.md": "# C\n", SummaryFile: "- [See C](c.md)\n- [Then B](b.md)\n"}, nil)
	rec := do(s, http.MethodGet, "/")
	g.Expect(rec.Body.String()).To(ContainSubstring(`<h1 id="c">C</h1>`))
	g.Expect(navOf(g, rec.Body.String())).To(Equal([]string{
		`<li class="depth-0 active"><a href="/c.md">See C</a></li>`,
		`<li class="depth-0"><a href="/b.md">Then B</a></li>`,
	}))
}

func TestServerConcurrentRequestsAndUpdates(t *testing.T) {
	s, mem := newTestServer(map[string]string{"a.md": "# v0\n"})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				rec := do(s, http.MethodGet, "/a.md")
				if rec.Code != http.StatusOK || !regexp.MustCompile(`<h1 id="v\d+">v\d+</h1>`).MatchString(rec.Body.String()) {
					errs <- fmt.Errorf("unexpected response %d: %s", rec.Code, rec.Body)
					return
				}
			}
		}()
	}
	for i := 1; i <= 50; i++ {
		mem.Set(map[string]string{"a.md": fmt.Sprintf("# v%d\n", i)}, nil)
	}
	wg.Wait()
	close(errs)
	g := NewWithT(t)
	for err := range errs {
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(do(s, http.MethodGet, "/a.md").Body.String()).To(ContainSubstring(`<h1 id="v50">v50</h1>`))
}

func TestServerAlphabeticalNavWithoutSummary(t *testing.T) {
	g := NewWithT(t)
	s, _ := newTestServer(map[string]string{
		"zeta.md":  "# Zeta\n",
		"alpha.md": "# Alpha\n",
		"Mid.md":   "# Mid\n",
	})
	rec := do(s, http.MethodGet, "/")
	g.Expect(rec.Code).To(Equal(http.StatusOK))
	body := rec.Body.String()
	g.Expect(body).To(ContainSubstring(`<h1 id="mid">Mid</h1>`), "/ is the first file by name")
	g.Expect(body).To(ContainSubstring("<title>Mid</title>"))
	g.Expect(navOf(g, body)).To(Equal([]string{
		`<li class="depth-0 active"><a href="/Mid.md">Mid</a></li>`,
		`<li class="depth-0"><a href="/alpha.md">alpha</a></li>`,
		`<li class="depth-0"><a href="/zeta.md">zeta</a></li>`,
	}))

	body = do(s, http.MethodGet, "/zeta.md").Body.String()
	g.Expect(body).To(ContainSubstring(`<li class="depth-0 active"><a href="/zeta.md">zeta</a></li>`))
	g.Expect(strings.Count(body, "active")).To(Equal(1))
}

func TestServerRootFallbacks(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string // the h1 of the page / serves
	}{
		{
			name:  "first linked chapter, skipping drafts, parts and missing files",
			files: map[string]string{SummaryFile: "# S\n# Part\n- [Draft]()\n- [Gone](gone.md)\n---\n- [B](b.md)\n- [A](a.md)\n", "a.md": "# A\n", "b.md": "# B\n"},
			want:  "B",
		},
		{
			name:  "README.md when SUMMARY.md links nothing",
			files: map[string]string{SummaryFile: "# S\n- [Draft]()\n", "a.md": "# A\n", "README.md": "# Readme\n", "index.md": "# Index\n"},
			want:  "Readme",
		},
		{
			name:  "index.md when SUMMARY.md links nothing and there is no README.md",
			files: map[string]string{SummaryFile: "# S\n", "a.md": "# A\n", "index.md": "# Index\n"},
			want:  "Index",
		},
		{
			name:  "first file by name when SUMMARY.md links nothing",
			files: map[string]string{SummaryFile: "# S\n", "B.md": "# B\n", "A.md": "# A\n"},
			want:  "A",
		},
		{
			name:  "first file by name is never SUMMARY.md itself",
			files: map[string]string{SummaryFile: "# S\n", "b.md": "# B\n", "a.md": "# A\n"},
			want:  "A",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s, _ := newTestServer(tt.files)
			rec := do(s, http.MethodGet, "/")
			g.Expect(rec.Code).To(Equal(http.StatusOK))
			g.Expect(rec.Body.String()).To(MatchRegexp(`<h1 id="[a-z]+">` + tt.want + `</h1>`))
		})
	}
	t.Run("no files at all", func(t *testing.T) {
		g := NewWithT(t)
		s, _ := newTestServer(map[string]string{})
		g.Expect(do(s, http.MethodGet, "/").Code).To(Equal(http.StatusNotFound))
	})
	t.Run("only SUMMARY.md", func(t *testing.T) {
		g := NewWithT(t)
		s, _ := newTestServer(map[string]string{SummaryFile: "# S\n"})
		rec := do(s, http.MethodGet, "/")
		g.Expect(rec.Code).To(Equal(http.StatusOK))
		g.Expect(rec.Body.String()).To(ContainSubstring(`<main class="content">`))
	})
}

func TestServerRootSkipsNamesThatCannotBeServed(t *testing.T) {
	g := NewWithT(t)
	s, _ := newTestServer(map[string]string{".draft.md": "# Draft\n", "guide.md": "# Guide\n"})
	rec := do(s, http.MethodGet, "/")
	g.Expect(rec.Code).To(Equal(http.StatusOK))
	g.Expect(rec.Body.String()).To(ContainSubstring(`<h1 id="guide">Guide</h1>`))
	g.Expect(rec.Body.String()).NotTo(ContainSubstring(`href="/.draft.md"`))
}

func TestServerPagesNeedNoInlineStyles(t *testing.T) {
	g := NewWithT(t)
	s, _ := newTestServer(map[string]string{"t.md": "| L | R |\n|:--|--:|\n| 1 | 2 |\n"})
	body := do(s, http.MethodGet, "/t.md").Body.String()
	g.Expect(body).To(ContainSubstring("<table>"))
	g.Expect(body).NotTo(ContainSubstring("style="))
}

func TestServerMethodNotAllowedSaysWhatIsAllowed(t *testing.T) {
	g := NewWithT(t)
	s, _ := newTestServer(testFiles())
	rec := do(s, http.MethodPost, "/")
	g.Expect(rec.Code).To(Equal(http.StatusMethodNotAllowed))
	g.Expect(rec.Header().Get("Allow")).To(Equal("GET, HEAD"))
}
