package viewer

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

//go:embed style.css
var baseCSS []byte

// styleCSS is served as /style.css: the layout and both colour schemes,
// then the code-highlighting palettes.
var styleCSS = append(append([]byte{}, baseCSS...), highlightCSS()...)

// contentSecurityPolicy allows no script at all, styles only from our own
// stylesheet, images from anywhere over HTTPS (Markdown often embeds them)
// and from the site itself, and forms (the search box) only to the site.
const contentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self' https: data:; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// assetPolicy is the Content-Security-Policy of an image response. An image
// shown in a page runs no script anyway; an SVG opened on its own is a
// document, which this keeps inert: no script, no requests (its own inline
// styles and data: images aside), and a sandbox with a unique origin.
const assetPolicy = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; sandbox; frame-ancestors 'none'"

// pageTemplate is a whole page; its parts "head" and "tail" go either side
// of the navigation, which a site writes once for all its pages (siteNav).
var pageTemplate = template.Must(template.New("page").Parse(`{{define "head"}}<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>{{.Title}}</title>
<link rel="stylesheet" href="/style.css">
</head>
<body>
<nav class="sidebar" aria-label="Table of contents">
<form class="search" action="/search" method="get" role="search">
<input type="search" name="q" value="{{.Query}}" placeholder="Search" aria-label="Search the site" maxlength="256">
<button type="submit">Search</button>
</form>
{{end}}{{define "tail"}}
</nav>
<main class="content">
{{- if .TOC}}
<nav class="toc" aria-label="On this page">
<p>On this page</p>
<ol>
{{- range .TOC}}
<li class="toc-{{.Depth}}"><a href="#{{.ID}}">{{.Text}}</a></li>
{{- end}}
</ol>
</nav>
{{- end}}
{{- with .Search}}
<article class="search-results">
<h1>Search</h1>
{{- if .Building}}
<p class="summary">The site has just changed and its search index is being built: {{.Read}} of {{.Pages}} pages read. Try again in a few seconds.</p>
{{- else if .Query}}
<p class="summary">{{.Total}} {{if eq .Total 1}}section matches{{else}}sections match{{end}} “{{.Query}}”{{if gt .Total (len .Hits)}}; the best {{len .Hits}} are shown{{end}}.</p>
{{- else}}
<p class="summary">Type words to find; Chinese, Japanese and Korean text is found too.</p>
{{- end}}
{{- if .Skipped}}
<p class="summary">{{.Skipped}} {{if eq .Skipped 1}}page was{{else}}pages were{{end}} left out of the index: the site is larger than the viewer indexes.</p>
{{- end}}
<ol class="hits">
{{- range .Hits}}
<li><a href="/{{.Page}}{{if .Anchor}}#{{.Anchor}}{{end}}">{{.Heading}}</a>{{if .ShowPage}} <span class="in-page">{{.PageTitle}}</span>{{end}}
<p>{{.Snippet}}</p></li>
{{- end}}
</ol>
</article>
{{- else}}
<article>
{{.Body}}
</article>
{{- end}}
{{- with .Revision}}
<footer class="revision">Revision {{.}}</footer>
{{- end}}
</main>
</body>
</html>
{{end}}{{template "head" .}}{{.NavHTML}}{{template "tail" .}}`))

type pageData struct {
	Title   string
	NavHTML template.HTML // for "page" only: the parts leave it out
	Query   string
	TOC     []tocEntry
	Body    template.HTML
	Search  *Results
	// Revision is the artifact revision served, for the footer.
	Revision string
}

// Server serves the site of a Source.
type Server struct {
	source Source
	log    *slog.Logger

	current atomic.Pointer[site]
	loading sync.Mutex // one load at a time; the others wait and share it
}

// NewServer returns a handler for the site.
func NewServer(source Source, log *slog.Logger) *Server {
	return &Server{source: source, log: log}
}

// site returns the site of the source's current version, building it when
// the version changed. A request for an unchanged site costs one Version call.
func (s *Server) site(ctx context.Context) (*site, error) {
	version, err := s.source.Version(ctx)
	if err != nil {
		return nil, err
	}
	if st := s.current.Load(); st != nil && st.version == version {
		return st, nil
	}
	s.loading.Lock()
	defer s.loading.Unlock()
	if st := s.current.Load(); st != nil && st.version == version {
		return st, nil // loaded by the request we waited for
	}
	snap, err := s.source.Load(ctx)
	if err != nil {
		return nil, err
	}
	st := newSite(snap)
	for _, name := range st.rejected {
		s.log.Warn("not serving an asset: its content is not of the type its name says", "file", name, "version", st.version)
	}
	s.current.Store(st)
	go s.warm(st)
	return st, nil
}

// warm renders every page of a new site and builds its search index in the
// background, so the readers who come after an edit find them ready. It
// stops as soon as a newer version replaces the site.
func (s *Server) warm(st *site) {
	// A page's rendering turns a panic into its error, and indexing into
	// an empty index; this is the last guard of a goroutine no request
	// waits on.
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("warming the site up failed", "version", st.version, "panic", r)
		}
	}()
	for _, name := range st.order {
		if s.current.Load() != st {
			return
		}
		_ = st.render(st.pages[name]) // an error is logged when the page is asked for
	}
	if s.current.Load() == st {
		st.indexSearch()
	}
}

// StatusReporter is a Source that can say what it serves, such as an
// ArtifactSource: the server answers /status with it, as JSON.
type StatusReporter interface {
	Status() ArtifactStatus
}

// ServeHTTP serves /healthz, /status (for an ArtifactSource), /style.css,
// /search, / (the first page), /<file>.md and /<image>; in a site with
// folders also /<folder>/ (its README.md or index.md) and
// /<folder>/<file>, so that relative links resolve as on GitHub.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == "/style.css" {
		h.Set("Content-Type", "text/css; charset=utf-8")
		h.Set("Cache-Control", "public, max-age=3600")
		_, _ = w.Write(styleCSS)
		return
	}

	if r.URL.Path == "/status" {
		if rep, ok := s.source.(StatusReporter); ok {
			h.Set("Content-Type", "application/json")
			h.Set("Cache-Control", "no-store")
			_ = json.NewEncoder(w).Encode(rep.Status())
			return
		}
	}

	st, err := s.site(r.Context())
	if err != nil {
		s.log.Error("reading files", "err", err)
		http.Error(w, "files unavailable", http.StatusServiceUnavailable)
		return
	}
	switch r.URL.Path {
	case "/healthz":
		_, _ = w.Write([]byte("ok\n"))
		return
	case "/search":
		s.serveSearch(w, r, st)
		return
	}
	// The name is looked up in the site's files, never joined to a path, so
	// "../" and friends simply do not exist.
	name := strings.TrimPrefix(r.URL.Path, "/")
	if name == "" {
		name = st.root
	}
	if folder, ok := strings.CutSuffix(name, "/"); ok {
		if page, ok := st.folders[folder]; ok {
			name = page
		}
	} else if _, ok := st.folders[name]; ok {
		// On to the folder's own URL, where its page's relative links
		// resolve inside it.
		http.Redirect(w, r, (&url.URL{Path: "/" + name + "/"}).EscapedPath(), http.StatusFound)
		return
	}
	if p, ok := st.pages[name]; ok {
		s.servePage(w, r, st, p)
		return
	}
	if a, ok := st.assets[name]; ok {
		h.Set("Content-Security-Policy", assetPolicy)
		h.Set("Content-Type", a.contentType)
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.data))
		return
	}
	http.NotFound(w, r)
}

func (s *Server) servePage(w http.ResponseWriter, r *http.Request, st *site, p *sitePage) {
	if err := st.render(p); err != nil {
		s.log.Error("rendering", "file", p.name, "err", err)
		http.Error(w, "cannot render this page", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", p.etag)
	if etagMatches(r.Header.Get("If-None-Match"), p.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(st.pageLen(p)))
	st.writePage(w, p)
}

// searchWait is how long a search waits for the index of a site that has
// just changed. The warm-up builds it in the background (every page
// rendered: seconds for thousands of pages); a search does not wait for all
// of that, nor past the server's write timeout, but answers "not ready yet"
// with a 503 and Retry-After, as for any service still starting.
const searchWait = 3 * time.Second

func (s *Server) serveSearch(w http.ResponseWriter, r *http.Request, st *site) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	res := Results{Query: q}
	status := http.StatusOK
	if q != "" {
		if ix := st.indexWithin(r.Context(), searchWait); ix != nil {
			res = ix.Search(q)
		} else {
			res.Building, res.Read, res.Pages = true, int(st.rendered.Load()), len(st.order)
			status = http.StatusServiceUnavailable
			w.Header().Set("Retry-After", "2")
		}
	}
	title := "Search"
	if q != "" {
		title = "Search: " + q
	}
	// The navigation is written from the site's one copy, as in a page: a
	// copy per search, held until a slow reader took it, was as large as
	// a long SUMMARY.md's navigation (megabytes) for each.
	nav, err := st.navigation()
	var head, tail bytes.Buffer
	if err == nil {
		data := pageData{Title: title, Query: q, Search: &res}
		if err = pageTemplate.ExecuteTemplate(&head, "head", data); err == nil {
			err = pageTemplate.ExecuteTemplate(&tail, "tail", data)
		}
	}
	if err != nil {
		s.log.Error("executing template", "err", err)
		http.Error(w, "cannot show the results", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Content-Length", strconv.Itoa(head.Len()+nav.len("")+tail.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(head.Bytes())
	nav.write(w, "")
	_, _ = w.Write(tail.Bytes())
}

// etagMatches reports whether an If-None-Match header names etag.
func etagMatches(ifNoneMatch, etag string) bool {
	for _, tag := range strings.Split(ifNoneMatch, ",") {
		tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
		if tag == etag || tag == "*" {
			return true
		}
	}
	return false
}
