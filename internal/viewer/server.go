package viewer

import (
	"bytes"
	_ "embed"
	"html/template"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
)

//go:embed style.css
var baseCSS []byte

// styleCSS is served as /style.css: the layout, then the code-highlighting
// palettes.
var styleCSS = append(append([]byte{}, baseCSS...), highlightCSS()...)

// contentSecurityPolicy allows no script at all, styles only from our own
// stylesheet, and images from anywhere over HTTPS (Markdown often embeds them).
const contentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self' https: data:; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

var pageTemplate = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<link rel="stylesheet" href="/style.css">
</head>
<body>
<nav class="sidebar" aria-label="Table of contents">
<ol>
{{- range .Nav}}
{{- if .Rule}}<li class="rule" role="separator"></li>
{{- else if .Part}}<li class="part">{{.Title}}</li>
{{- else if .File}}<li class="depth-{{.Depth}}{{if eq .File $.Current}} active{{end}}"><a href="/{{.File}}">{{.Title}}</a></li>
{{- else}}<li class="depth-{{.Depth}} draft">{{.Title}}</li>
{{- end}}
{{- end}}
</ol>
</nav>
<main class="content">
{{.Body}}
</main>
</body>
</html>
`))

type page struct {
	Title   string
	Nav     []NavItem
	Current string
	Body    template.HTML
}

// Server serves the site of a Source.
type Server struct {
	source Source
	log    *slog.Logger

	mu    sync.Mutex
	cache map[string]rendered // by file name; reused while the text is the same
}

type rendered struct {
	text string
	html template.HTML
}

// NewServer returns a handler for the site.
func NewServer(source Source, log *slog.Logger) *Server {
	return &Server{source: source, log: log, cache: map[string]rendered{}}
}

// ServeHTTP serves /healthz, /style.css, / (the first page) and /<file>.md.
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
	switch r.URL.Path {
	case "/healthz":
		if _, err := s.source.Files(r.Context()); err != nil {
			http.Error(w, "files unavailable", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
		return
	case "/style.css":
		h.Set("Content-Type", "text/css; charset=utf-8")
		h.Set("Cache-Control", "public, max-age=3600")
		_, _ = w.Write(styleCSS)
		return
	}

	files, err := s.source.Files(r.Context())
	if err != nil {
		s.log.Error("reading files", "err", err)
		http.Error(w, "files unavailable", http.StatusServiceUnavailable)
		return
	}
	nav := s.navigation(files)
	name := strings.TrimPrefix(r.URL.Path, "/")
	if name == "" {
		name = firstPage(nav, files)
	}
	// The name is looked up in the set of files, never joined to a path, so
	// "../" and friends simply do not exist.
	text, ok := files[name]
	if !ok || !IsMarkdownName(name) {
		http.NotFound(w, r)
		return
	}
	body, err := s.render(name, text)
	if err != nil {
		s.log.Error("rendering", "file", name, "err", err)
		http.Error(w, "cannot render this page", http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, page{Title: pageTitle(nav, name), Nav: nav, Current: name, Body: body}); err != nil {
		s.log.Error("executing template", "err", err)
		http.Error(w, "cannot render this page", http.StatusInternalServerError)
		return
	}
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	_, _ = w.Write(buf.Bytes())
}

func (s *Server) navigation(files map[string]string) []NavItem {
	if summary, ok := files[SummaryFile]; ok {
		return ParseSummary(summary, func(name string) bool { _, ok := files[name]; return ok && IsMarkdownName(name) })
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	return AlphabeticalNav(names)
}

// render returns the page's HTML, rendering only when the text changed.
func (s *Server) render(name, text string) (template.HTML, error) {
	s.mu.Lock()
	c, ok := s.cache[name]
	s.mu.Unlock()
	if ok && c.text == text {
		return c.html, nil
	}
	out, err := Render([]byte(text))
	if err != nil {
		return "", err
	}
	// Safe: Render escapes raw HTML and neutralises dangerous URLs.
	html := template.HTML(out) //nolint:gosec
	s.mu.Lock()
	s.cache[name] = rendered{text: text, html: html}
	s.mu.Unlock()
	return html, nil
}

// firstPage is what "/" shows: the first linked chapter, else README.md or
// index.md, else the first file by name.
func firstPage(nav []NavItem, files map[string]string) string {
	for _, item := range nav {
		if item.File != "" {
			return item.File
		}
	}
	for _, name := range []string{"README.md", "index.md"} {
		if _, ok := files[name]; ok {
			return name
		}
	}
	names := make([]string, 0, len(files))
	for name := range files {
		if name != SummaryFile && IsMarkdownName(name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	if len(names) > 0 {
		return names[0]
	}
	if _, ok := files[SummaryFile]; ok {
		return SummaryFile // nothing else to show
	}
	return ""
}

func pageTitle(nav []NavItem, name string) string {
	for _, item := range nav {
		if item.File == name {
			return item.Title
		}
	}
	return strings.TrimSuffix(name, ".md")
}
