package viewer

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	. "github.com/onsi/gomega"

	"github.com/trellis-dev/trellis/test/bench/benchsite"
)

// bigSite is the size of the bench's site from Git: 2,000 pages of about
// 5 KiB, and a SUMMARY.md listing them all (a 162 KB navigation).
func bigSite() map[string]string { return benchsite.Site(2000, 5<<10) }

// TestSiteMemoryIsLinear: a site of 2,000 pages, every page rendered and
// the index built, keeps a small multiple of its Markdown. Each page kept
// with the whole navigation in it took 2,000 × 171 KB (342 MB for 12 MB of
// Markdown): memory grew with the square of the page count.
func TestSiteMemoryIsLinear(t *testing.T) {
	g := NewWithT(t)
	files := bigSite()
	size := siteBytes(files)
	var st *site
	heap := heapGrowth(func() any {
		st = newSite(&Snapshot{Version: "v", Pages: files})
		for _, name := range st.order {
			g.Expect(st.render(st.pages[name])).To(Succeed())
		}
		st.indexSearch()
		return st
	})
	cached := 0
	for _, p := range st.pages {
		cached += len(p.html)
	}
	t.Logf("%d bytes of Markdown: pages' HTML kept %d bytes; the site with its index %.1f MiB of heap", size, cached, heap/(1<<20))
	// Measured: 2.1× and 3.8× (the bench's pages are dense with links and code).
	g.Expect(cached).To(BeNumerically("<", 3*size), "the pages' cached HTML, navigation left out")
	g.Expect(heap).To(BeNumerically("<", 5*size), "the whole site: pages, sections, index")
}

// TestFirstSearchOfABigSiteIsBounded: the first search of a new 2,000-page
// site answers within searchWait (and a little), found or not ready yet,
// where it used to wait for every page to be rendered (30 s).
func TestFirstSearchOfABigSiteIsBounded(t *testing.T) {
	g := NewWithT(t)
	s, _ := newTestServer(bigSite())
	start := time.Now()
	rec := do(s, http.MethodGet, "/search?q=reconcile")
	took := time.Since(start)
	t.Logf("first search: %s after %s", http.StatusText(rec.Code), took)
	g.Expect(took).To(BeNumerically("<", searchWait+5*time.Second))
	g.Expect(rec.Code).To(BeElementOf(http.StatusOK, http.StatusServiceUnavailable))

	st, err := s.site(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	<-st.indexReady // the warm-up builds it
	rec = do(s, http.MethodGet, "/search?q=reconcile")
	g.Expect(rec.Code).To(Equal(http.StatusOK))
	g.Expect(rec.Body.String()).To(ContainSubstring(`<ol class="hits">` + "\n<li>"))
}

// TestSearchWaitsForTheIndexBriefly: a search of a site whose index is not
// built does not build it: it waits searchWait and says the index is not
// ready, with a 503 and Retry-After.
func TestSearchWaitsForTheIndexBriefly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewWithT(t)
		st := newSite(&Snapshot{Version: "v", Pages: testFiles()})
		s := NewServer(&MemorySource{}, slog.New(slog.DiscardHandler))
		rec := httptest.NewRecorder()
		start := time.Now()
		s.serveSearch(rec, httptest.NewRequest(http.MethodGet, "/search?q=install", nil), st)
		g.Expect(time.Since(start)).To(Equal(searchWait))
		g.Expect(rec.Code).To(Equal(http.StatusServiceUnavailable))
		g.Expect(rec.Header().Get("Retry-After")).To(Equal("2"))
		g.Expect(rec.Body.String()).To(ContainSubstring(fmt.Sprintf("its search index is being built: 0 of %d pages read", len(st.order))))
		g.Expect(st.index).To(BeNil(), "the search built no index")
		g.Expect(safetyProblemsOfPage(rec.Body.String())).To(BeEmpty())

		st.indexSearch()
		rec = httptest.NewRecorder()
		s.serveSearch(rec, httptest.NewRequest(http.MethodGet, "/search?q=install", nil), st)
		g.Expect(rec.Code).To(Equal(http.StatusOK))
		g.Expect(rec.Body.String()).To(ContainSubstring(`<li><a href="/install.md`))
	})
}

// referenceNav is the navigation as one template made it when each page kept
// its own copy: what siteNav must still write.
var referenceNav = template.Must(template.New("nav").Parse(`<ol>
{{- range .Nav}}
{{- if .Rule}}<li class="rule" role="separator"></li>
{{- else if .Part}}<li class="part">{{.Title}}</li>
{{- else if .File}}<li class="depth-{{.Depth}}{{if eq .File $.Current}} active{{end}}"><a href="/{{.File}}">{{.Title}}</a></li>
{{- else}}<li class="depth-{{.Depth}} draft">{{.Title}}</li>
{{- end}}
{{- end}}
</ol>`))

// TestServedPageIsTheWholeTemplate: a page written as head, shared
// navigation and tail is byte for byte the page the whole template makes
// with that page's entries active, and its Content-Length is right, for
// hostile titles, front matter and file names too: nothing an editor writes
// moves where " active" goes.
func TestServedPageIsTheWholeTemplate(t *testing.T) {
	long := strings.Repeat("\"><li class=\"depth-0\">&amp;é", 2000)
	var many strings.Builder
	many.WriteString("# Summary\n\n")
	for range 300 {
		many.WriteString("- [\"](x.md)\n  - [](x.md)\n")
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		tree  bool
	}{{
		name: "ordinary",
		files: map[string]string{
			"SUMMARY.md": "# Summary\n\n[Intro](intro.md)\n\n# Part <one> & \"two\"\n\n" +
				"- [Install](install.md)\n  - [Again](install.md)\n  - [Draft]()\n---\n- [Odd <b>name</b>](a%20b.md)\n- [Intro again](intro.md)\n",
			"intro.md":   "---\ntitle: The <intro>\n---\n# Intro\n\n## One\n\n## Two\n",
			"install.md": "# Install\n\ntext\n",
			"a b.md":     "# A b\n",
			"lone.md":    "# Not in the summary\n",
		},
	}, {
		name: "hostile titles and names",
		files: map[string]string{
			"SUMMARY.md": "# Summary\n\n# \" active\"><script>alert(1)</script>\n" +
				"- [\"><script>alert(1)</script>](q\".md)\n" +
				"  - [' onmouseover='alert(1)](q\".md)\n" +
				"    - [](<x>&.md)\n" +
				"- [&quot; class=&quot;x](depth-0\".md)\n" +
				"- [" + long + "](<x>&.md)\n" +
				"- [\u202e\u0000é😀](q\".md#\"><b>)\n" +
				"- [missing](nowhere.md)\n",
			"q\".md":       "---\ntitle: '\" active\"><script>alert(1)</script>'\n---\n# Q\n",
			"<x>&.md":      "---\ntitle: \"" + strings.Repeat("&", 3000) + "\"\n---\n# X\n",
			"depth-0\".md": "---\ntitle: ''\n---\nno heading\n",
			"absent.md":    "---\ntitle: <li class=\"depth-0\">\n---\n# Absent from the navigation\n",
		},
	}, {
		name:  "one page listed many times, empty and quote titles",
		files: map[string]string{"SUMMARY.md": many.String(), "x.md": "---\ntitle: '\"'\n---\n# X\n", "y.md": "# Y\n"},
	}, {
		name: "no summary: names in order",
		files: map[string]string{
			"\"><img src=x>.md": "# A\n", "active.md": "# B\n", "z\u202e.md": "---\ntitle: \"\\\" active\"\n---\n",
		},
	}, {
		name: "a tree: folders with and without a page",
		tree: true,
		files: map[string]string{
			"README.md": "# Home\n", "g\"uide/README.md": "---\ntitle: '\"><b>'\n---\n# Guide\n",
			"g\"uide/a&b.md": "# A\n", "g\"uide/deep/x.md": "# Deep\n", "<b>/c.md": "# C\n",
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := NewServer(&snapshotSource{&Snapshot{Version: "v", Pages: tc.files, Tree: tc.tree}}, slog.New(slog.DiscardHandler))
			st, err := s.site(context.Background())
			g.Expect(err).NotTo(HaveOccurred())
			for _, name := range st.order {
				p := st.pages[name]
				g.Expect(st.render(p)).To(Succeed())
				var nav, want bytes.Buffer
				g.Expect(referenceNav.Execute(&nav, struct {
					Nav     []NavItem
					Current string
				}{st.nav, name})).To(Succeed())
				g.Expect(pageTemplate.Execute(&want, pageData{
					Title: p.title, NavHTML: template.HTML(nav.String()), TOC: tableOfContents(p.rendered.Headings),
					Body: template.HTML(renderedBody(g, tc.files[name])), Revision: st.revision,
				})).To(Succeed())
				rec := do(s, http.MethodGet, (&url.URL{Path: "/" + name}).EscapedPath())
				g.Expect(rec.Code).To(Equal(http.StatusOK), name)
				g.Expect(rec.Body.String()).To(Equal(want.String()), name)
				g.Expect(rec.Header().Get("Content-Length")).To(Equal(strconv.Itoa(want.Len())), name)
				g.Expect(safetyProblemsOfPage(rec.Body.String())).To(BeEmpty(), name)
				entries := 0
				for _, item := range st.nav {
					if item.File == name {
						entries++
					}
				}
				g.Expect(strings.Count(rec.Body.String(), ` active"`)).To(Equal(entries), name)
			}
		})
	}
}

func renderedBody(g Gomega, text string) []byte {
	_, body := frontMatterOf(text)
	r, err := renderMarkdown([]byte(body))
	g.Expect(err).NotTo(HaveOccurred())
	return r.HTML
}

// TestALongSummaryIsKeptOnce: a SUMMARY.md of 40,000 links among 128 pages
// (under a 1 MiB view's worth) is kept once, in the site's navigation, not
// in each page: its 2.1 MB of HTML was in every page's (270 MB in all).
func TestALongSummaryIsKeptOnce(t *testing.T) {
	g := NewWithT(t)
	files := map[string]string{}
	var summary strings.Builder
	summary.WriteString("# Summary\n\n")
	for i := range 128 {
		files[fmt.Sprintf("p%03d.md", i)] = fmt.Sprintf("# Page %d\n\nText.\n", i)
	}
	for i := range 40_000 {
		fmt.Fprintf(&summary, "- [%d](p%03d.md)\n", i, i%128)
	}
	files["SUMMARY.md"] = summary.String()
	s, _ := newTestServer(files)
	st, err := s.site(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	cached := 0
	for _, name := range st.order {
		p := st.pages[name]
		g.Expect(st.render(p)).To(Succeed())
		if name != SummaryFile { // a page too, of its own size
			cached += len(p.html)
		}
	}
	nav, err := st.navigation()
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("SUMMARY.md %d bytes; navigation %d bytes, kept once; pages' HTML %d bytes", summary.Len(), len(nav.html), cached)
	g.Expect(cached).To(BeNumerically("<", 128*2<<10), "about 1 KiB of template and the page's own HTML each")

	body := do(s, http.MethodGet, "/p005.md").Body.String()
	g.Expect(strings.Count(body, `<li class="depth-0 active"><a href="/p005.md">`)).To(Equal(40_000/128 + 1))
}

// TestASiteSwapKeepsServing: while new versions replace the site, pages and
// searches are served (run it with -race): each page whole, its navigation
// of its own version, a search found or not ready yet, never an error.
func TestASiteSwapKeepsServing(t *testing.T) {
	g := NewWithT(t)
	version := func(v int) map[string]string {
		files := map[string]string{}
		var summary strings.Builder
		summary.WriteString("# Summary\n\n")
		for i := range 100 {
			name := fmt.Sprintf("p%02d.md", i)
			fmt.Fprintf(&summary, "- [v%d-%d](%s)\n", v, i, name)
			files[name] = fmt.Sprintf("# Page %d\n\nversion%d reconcile text.\n", i, v)
		}
		files[SummaryFile] = summary.String()
		return files
	}
	s, mem := newTestServer(version(0))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var problems []string
	report := func(p string) { mu.Lock(); problems = append(problems, p); mu.Unlock() }
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if w == 0 {
					rec := do(s, http.MethodGet, "/search?q=reconcile")
					if rec.Code != http.StatusOK && rec.Code != http.StatusServiceUnavailable {
						report(fmt.Sprintf("search: %d", rec.Code))
					}
					if rec.Header().Get("Content-Length") != strconv.Itoa(rec.Body.Len()) {
						report("wrong Content-Length of a search")
					}
					continue
				}
				rec := do(s, http.MethodGet, fmt.Sprintf("/p%02d.md", (i*7+w)%100))
				body := rec.Body.String()
				v := strings.TrimPrefix(body[strings.Index(body, "<p>version"):], "<p>version")
				v = v[:strings.IndexByte(v, ' ')]
				switch {
				case rec.Code != http.StatusOK:
					report(fmt.Sprintf("page: %d", rec.Code))
				case strings.Count(body, `.md">v`+v+"-") != 100 || strings.Count(body, " active") != 1:
					report("a page with the navigation of another version: " + v)
				case rec.Header().Get("Content-Length") != strconv.Itoa(len(body)):
					report("wrong Content-Length")
				}
			}
		})
	}
	for v := 1; v <= 20; v++ {
		mem.Set(version(v), nil)
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	g.Expect(problems).To(BeEmpty())
}

// discardWriter is a ResponseWriter that keeps nothing of the body.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(int)             {}

// TestASearchDoesNotCopyTheNavigation: a search page, found or not ready
// yet, is written around the site's one navigation, as a page is. Each
// search copied it into a buffer of its own (2.1 MB for a 40,000-link
// SUMMARY.md), held until a slow reader took it: searches waiting out the
// warm-up together, or read slowly, took the pod past its memory limit.
func TestASearchDoesNotCopyTheNavigation(t *testing.T) {
	g := NewWithT(t)
	files := map[string]string{"p.md": "# Page\n\nreconcile\n"}
	var summary strings.Builder
	summary.WriteString("# Summary\n\n")
	for i := range 40_000 {
		fmt.Fprintf(&summary, "- [%d](p.md)\n", i)
	}
	files[SummaryFile] = summary.String()
	st := newSite(&Snapshot{Version: "v", Pages: files})
	nav, err := st.navigation()
	g.Expect(err).NotTo(HaveOccurred())
	s := NewServer(&MemorySource{}, slog.New(slog.DiscardHandler))
	for _, ready := range []bool{false, true} {
		if ready {
			st.indexSearch()
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // no wait for the index: not ready yet, at once
		r := httptest.NewRequest(http.MethodGet, "/search?q=reconcile", nil).WithContext(ctx)
		const runs = 20
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range runs {
			s.serveSearch(&discardWriter{h: http.Header{}}, r, st)
		}
		runtime.ReadMemStats(&after)
		perSearch := (after.TotalAlloc - before.TotalAlloc) / runs
		t.Logf("index ready %v: %d bytes allocated per search; the navigation is %d bytes", ready, perSearch, len(nav.html))
		g.Expect(perSearch).To(BeNumerically("<", len(nav.html)/10), "index ready: %v", ready)
	}
}
