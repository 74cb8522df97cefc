package viewer

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"testing"

	"github.com/trellis-dev/trellis/test/bench/benchsite"
)

// benchSites are the two shapes of a MarkdownView at the 1 MiB limit: many
// pages of a usual size, and everything in one page.
var benchSites = []struct {
	name             string
	pages, pageBytes int
}{
	{"128x8KiB", 128, 8 << 10},
	{"1x1MiB", 1, 1<<20 - 8<<10},
}

func benchSource(pages, pageBytes int) *MemorySource {
	mem := &MemorySource{}
	mem.Set(benchsite.Site(pages, pageBytes), nil)
	return mem
}

func siteBytes(files map[string]string) int {
	n := 0
	for name, text := range files {
		n += len(name) + len(text)
	}
	return n
}

func BenchmarkRenderPage8KiB(b *testing.B) {
	src := []byte(benchsite.Page(1, "Title", 8<<10))
	b.ReportAllocs()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, err := RenderPage(src); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkServePage serves a page of an unchanged site: what every page
// view costs once the site is cached.
func BenchmarkServePage(b *testing.B) {
	for _, bs := range benchSites {
		b.Run(bs.name, func(b *testing.B) {
			s := NewServer(benchSource(bs.pages, bs.pageBytes), slog.New(slog.DiscardHandler))
			warmed(b, s)
			req := httptest.NewRequest(http.MethodGet, "/page-000.md", nil)
			if rec := httptest.NewRecorder(); func() int { s.ServeHTTP(rec, req); return rec.Code }() != http.StatusOK {
				b.Fatal("page not served")
			}
			b.ReportAllocs()
			for b.Loop() {
				s.ServeHTTP(httptest.NewRecorder(), req)
			}
		})
	}
}

// warmed waits until s has rendered its site and built the index (which the
// background warm-up started by the first request is doing), so timing
// starts on a ready site.
func warmed(b *testing.B, s *Server) {
	st, err := s.site(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range st.pages {
		if err := st.render(p); err != nil {
			b.Fatal(err)
		}
	}
	st.indexSearch()
}

// BenchmarkSearch runs each query of benchsite.Queries on a built index and
// renders the results page.
func BenchmarkSearch(b *testing.B) {
	for _, bs := range benchSites {
		s := NewServer(benchSource(bs.pages, bs.pageBytes), slog.New(slog.DiscardHandler))
		warmed(b, s)
		for _, q := range benchsite.Queries {
			b.Run(bs.name+"/"+q, func(b *testing.B) {
				req := httptest.NewRequest(http.MethodGet, "/search?q="+url.QueryEscape(q), nil)
				b.ReportAllocs()
				for b.Loop() {
					s.ServeHTTP(httptest.NewRecorder(), req)
				}
			})
		}
	}
}

// BenchmarkBuildSite is the cost of a new content version: render every page
// and build the search index. It reports the heap the cached site holds
// (site-MiB) and, of that, the search index's own structures (index-MiB).
func BenchmarkBuildSite(b *testing.B) {
	for _, bs := range benchSites {
		b.Run(bs.name, func(b *testing.B) {
			mem := benchSource(bs.pages, bs.pageBytes)
			snap, _ := mem.Load(context.Background())
			build := func() *site {
				st := newSite(snap)
				for _, p := range st.pages {
					if err := st.render(p); err != nil {
						b.Fatal(err)
					}
				}
				st.indexSearch()
				return st
			}
			b.ReportAllocs()
			b.SetBytes(int64(siteBytes(snap.Pages)))
			for b.Loop() {
				build()
			}
			b.StopTimer()
			siteHeap := heapGrowth(func() any { return build() })
			st := build()
			var pages []indexPage
			for _, name := range st.order {
				if name != SummaryFile {
					pages = append(pages, indexPage{name: name, title: st.pages[name].title, sections: st.pages[name].rendered.Sections})
				}
			}
			indexHeap := heapGrowth(func() any { return buildIndex(pages) })
			b.ReportMetric(siteHeap/(1<<20), "site-MiB")
			b.ReportMetric(indexHeap/(1<<20), "index-MiB")
		})
	}
}

// heapGrowth returns how much live heap what f returns keeps.
func heapGrowth(f func() any) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	kept := f()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(kept)
	return float64(after.HeapAlloc) - float64(before.HeapAlloc)
}

// TestBenchSitesAreAtTheLimit keeps the benchmark sites what their names
// say: 128 pages of 8 KiB (give or take a section), and one page filling the
// MarkdownView's 1 MiB limit.
func TestBenchSitesAreAtTheLimit(t *testing.T) {
	for _, bs := range benchSites {
		files := benchsite.Site(bs.pages, bs.pageBytes)
		total := siteBytes(files)
		if len(files) != bs.pages+1 {
			t.Errorf("%s: %d files", bs.name, len(files))
		}
		if total < 1<<20-16<<10 || total > 1<<20+128<<10 {
			t.Errorf("%s: %d bytes, want about 1 MiB", bs.name, total)
		}
		t.Logf("%s: %d bytes", bs.name, total)
	}
}
