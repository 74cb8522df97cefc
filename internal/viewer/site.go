package viewer

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"html/template"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// site is everything served for one content version. It is built when a
// request first sees the version, and shared by all requests until the
// version changes: pages are rendered once each (on first view, or by the
// warm-up) and the search index is built once (by the warm-up, or on
// first search).
//
// What it keeps grows with the site, not faster: each page keeps its own
// HTML (with its contents) and its sections' text for the index; the
// navigation, which lists every page, is kept once and written into each
// page as it is served.
type site struct {
	version  string
	revision string // shown in each page's footer, when set
	// folders maps a folder ("guide") to its page ("guide/README.md"), in
	// a site with folders.
	folders map[string]string
	nav     []NavItem
	root    string   // the page "/" shows
	order   []string // page names: navigation order, then the rest by name
	pages   map[string]*sitePage
	assets  map[string]*siteAsset
	// rejected lists assets whose content is not what their name says.
	rejected []string

	navigationOnce sync.Once
	navigationHTML *siteNav
	navigationErr  error

	// rendered counts the pages rendered, for the search page's progress.
	rendered   atomic.Int32
	indexOnce  sync.Once
	index      *searchIndex
	indexReady chan struct{} // closed once index is set
}

// sitePage is one page, rendered on first use.
type sitePage struct {
	name, title string
	text        string // the Markdown without front matter, until rendered

	once     sync.Once
	rendered *Rendered // its HTML is dropped once in html; headings and sections stay
	// html is the document without the navigation, which goes at navAt.
	html  []byte
	navAt int
	etag  string
	err   error
}

// siteAsset is an image served as it is.
type siteAsset struct {
	contentType string
	data        []byte
	etag        string
}

func newSite(snap *Snapshot) *site {
	st := &site{version: snap.Version, revision: snap.Revision, pages: map[string]*sitePage{}, assets: map[string]*siteAsset{},
		indexReady: make(chan struct{})}
	isPage, assetType := IsMarkdownName, AssetType
	if snap.Tree {
		isPage, assetType = IsPagePath, assetTypeOf
	}
	// Front matter is read first: its title names the page in the navigation.
	titles, bodies := map[string]string{}, map[string]string{}
	for name, text := range snap.Pages {
		if isPage(name) {
			titles[name], bodies[name] = frontMatterOf(text)
		}
	}
	exists := func(name string) bool { _, ok := bodies[name]; return ok }
	switch _, summary := bodies[SummaryFile]; {
	case summary:
		st.nav = ParseSummary(bodies[SummaryFile], exists)
	case snap.Tree:
		st.nav = TreeNav(sortedNames(bodies))
	default:
		st.nav = AlphabeticalNav(sortedNames(snap.Pages))
	}
	if snap.Tree {
		st.folders = folderPages(sortedNames(bodies))
	}
	// A title names its page's first entry only: every page shows the whole
	// navigation, and a SUMMARY.md of many short links to one page would
	// repeat a long title in it thousands of times.
	titled := map[string]bool{}
	for i, item := range st.nav {
		if title := titles[item.File]; title != "" && !titled[item.File] {
			titled[item.File] = true
			st.nav[i].Title = title
		}
	}
	st.root = firstPage(st.nav, snap.Pages)

	listed := map[string]bool{}
	for _, item := range st.nav {
		if item.File != "" && !listed[item.File] {
			listed[item.File] = true
			st.order = append(st.order, item.File)
		}
	}
	for _, name := range sortedNames(snap.Pages) {
		if isPage(name) && !listed[name] {
			st.order = append(st.order, name)
		}
	}
	for _, name := range st.order {
		title := titles[name]
		if title == "" {
			title = pageTitle(st.nav, name)
		}
		st.pages[name] = &sitePage{name: name, title: title, text: bodies[name]}
	}
	for _, name := range sortedNames(snap.Assets) {
		contentType := assetType(name)
		if contentType == "" {
			continue
		}
		data := snap.Assets[name]
		if !rasterSignature(contentType, data) {
			st.rejected = append(st.rejected, name)
			continue
		}
		st.assets[name] = &siteAsset{contentType: contentType, data: data, etag: etagOf(data)}
	}
	return st
}

// render renders p, once: the page's own HTML, the navigation left out.
func (st *site) render(p *sitePage) error {
	p.once.Do(func() {
		defer st.rendered.Add(1)
		// A panic is this page's error: sync.Once would otherwise count the
		// page done with no HTML and no error, and serve it empty.
		defer func() {
			if r := recover(); r != nil {
				p.html, p.err = nil, fmt.Errorf("rendering the page failed: %v", r)
			}
		}()
		p.rendered, p.err = renderMarkdown([]byte(p.text)) // front matter is off already
		p.text = ""                                        // not needed again
		if p.err != nil {
			return
		}
		nav, err := st.navigation()
		if err != nil {
			p.err = err
			return
		}
		// Safe: renderMarkdown escapes raw HTML and neutralises dangerous URLs.
		data := pageData{Title: p.title, TOC: tableOfContents(p.rendered.Headings), Body: template.HTML(p.rendered.HTML),
			Revision: st.revision}
		var buf bytes.Buffer
		buf.Grow(len(p.rendered.HTML) + 4<<10)
		if p.err = pageTemplate.ExecuteTemplate(&buf, "head", data); p.err != nil {
			return
		}
		p.navAt = buf.Len()
		if p.err = pageTemplate.ExecuteTemplate(&buf, "tail", data); p.err != nil {
			return
		}
		p.html = bytes.Clone(buf.Bytes()) // exactly sized: it is kept as long as the version
		p.rendered.HTML = nil             // in p.html now; the sections stay, for the index
		// The tag covers what is written: the page, the navigation and which
		// entries are active in it.
		h := fnv.New64a()
		_, _ = h.Write(p.html)
		_, _ = h.Write(nav.sum[:])
		_, _ = h.Write([]byte(p.name))
		p.etag = `"` + strconv.FormatUint(h.Sum64(), 36) + `"`
	})
	return p.err
}

// writePage writes rendered p whole: its HTML with the navigation in it,
// p's entries marked active.
func (st *site) writePage(w io.Writer, p *sitePage) {
	_, _ = w.Write(p.html[:p.navAt])
	st.navigationHTML.write(w, p.name)
	_, _ = w.Write(p.html[p.navAt:])
}

// pageLen is the length of what writePage writes.
func (st *site) pageLen(p *sitePage) int {
	return len(p.html) + st.navigationHTML.len(p.name)
}

// siteNav is a site's navigation as HTML, nothing active, and where to mark
// each page's entries active: one copy for all pages, where a copy in each
// page's HTML would grow with the square of the page count (2,000 entries
// are 162 KB).
type siteNav struct {
	html []byte
	// active maps a page to the offsets in html where its entries' class
	// ends, so that activeClass inserted there marks them.
	active map[string][]int
	sum    [8]byte // FNV-1a of html, for the pages' entity tags
}

const activeClass = " active"

// navItemTemplate is one navigation entry, never active: siteNav marks it.
var navItemTemplate = template.Must(template.New("navItem").Parse(
	`{{if .Rule}}<li class="rule" role="separator"></li>` +
		`{{else if .Part}}<li class="part">{{.Title}}</li>` +
		`{{else if .File}}<li class="depth-{{.Depth}}"><a href="/{{.File}}">{{.Title}}</a></li>` +
		`{{else}}<li class="depth-{{.Depth}} draft">{{.Title}}</li>{{end}}`))

// navigation returns the site's navigation, made once.
func (st *site) navigation() (*siteNav, error) {
	st.navigationOnce.Do(func() { st.navigationHTML, st.navigationErr = buildNav(st.nav) })
	return st.navigationHTML, st.navigationErr
}

func buildNav(items []NavItem) (*siteNav, error) {
	n := &siteNav{active: map[string][]int{}}
	var buf bytes.Buffer
	buf.WriteString("<ol>")
	for _, item := range items {
		start := buf.Len()
		if err := navItemTemplate.Execute(&buf, item); err != nil {
			return nil, err
		}
		if item.Rule || item.Part || item.File == "" {
			continue
		}
		// The entry begins `<li class="depth-N"`: active goes before the quote.
		class := `<li class="depth-` + strconv.Itoa(item.Depth)
		if !bytes.HasPrefix(buf.Bytes()[start:], []byte(class+`"`)) {
			return nil, fmt.Errorf("navigation entry %q: unexpected HTML", item.File)
		}
		n.active[item.File] = append(n.active[item.File], start+len(class))
	}
	buf.WriteString("\n</ol>")
	n.html = bytes.Clone(buf.Bytes())
	h := fnv.New64a()
	_, _ = h.Write(n.html)
	h.Sum(n.sum[:0])
	return n, nil
}

// write writes the navigation with current's entries active ("" for none).
func (n *siteNav) write(w io.Writer, current string) {
	pos := 0
	for _, at := range n.active[current] {
		_, _ = w.Write(n.html[pos:at])
		_, _ = io.WriteString(w, activeClass)
		pos = at
	}
	_, _ = w.Write(n.html[pos:])
}

// len is the length of what write writes for current.
func (n *siteNav) len(current string) int {
	return len(n.html) + len(n.active[current])*len(activeClass)
}

// indexSearch builds the site's search index, once, from every page but
// SUMMARY.md, which is navigation (rendering those not viewed yet). The
// warm-up calls it; a search waits for it with indexWithin.
func (st *site) indexSearch() {
	st.indexOnce.Do(func() {
		defer close(st.indexReady)
		// A panic leaves the site without search, not the viewer down,
		// and searches answered at once instead of waiting for an index.
		defer func() {
			if r := recover(); r != nil {
				st.index = buildIndex(nil)
			}
		}()
		pages := make([]indexPage, 0, len(st.order))
		for _, name := range st.order {
			if name == SummaryFile {
				continue
			}
			p := st.pages[name]
			if err := st.render(p); err != nil {
				continue // served as an error page; nothing to index
			}
			pages = append(pages, indexPage{name: name, title: p.title, sections: p.rendered.Sections})
		}
		st.index = buildIndex(pages)
	})
}

// indexWithin returns the site's index if it is built within wait, else
// nil. It does not build the index itself: the warm-up does.
func (st *site) indexWithin(ctx context.Context, wait time.Duration) *searchIndex {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-st.indexReady:
		return st.index
	case <-t.C:
	case <-ctx.Done():
	}
	return nil
}

// tocEntry is one line of a page's contents.
type tocEntry struct {
	Depth int
	ID    string
	Text  string
}

// maxTOCLevel is the deepest heading listed in a page's contents.
const maxTOCLevel = 3

// tableOfContents lists a page's headings down to maxTOCLevel, indented
// relative to the highest one. A single top-level heading is the page's
// title and is left out. Fewer than two entries make no contents.
func tableOfContents(headings []Heading) []tocEntry {
	tops := 0
	for _, h := range headings {
		if h.Level == 1 {
			tops++
		}
	}
	picked := make([]Heading, 0, len(headings))
	minLevel := maxTOCLevel
	for _, h := range headings {
		if h.Level > maxTOCLevel || h.Level == 1 && tops == 1 {
			continue
		}
		picked = append(picked, h)
		minLevel = min(minLevel, h.Level)
	}
	if len(picked) < 2 {
		return nil
	}
	toc := make([]tocEntry, len(picked))
	for i, h := range picked {
		toc[i] = tocEntry{Depth: h.Level - minLevel, ID: h.ID, Text: h.Text}
	}
	return toc
}

// etagOf is a strong entity tag for data.
func etagOf(data []byte) string {
	h := fnv.New64a()
	_, _ = h.Write(data)
	return `"` + strconv.FormatUint(h.Sum64(), 36) + `"`
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
