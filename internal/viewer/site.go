package viewer

import (
	"bytes"
	"hash/fnv"
	"html/template"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// site is everything served for one content version. It is built when a
// request first sees the version, and shared by all requests until the
// version changes: pages are rendered once each (on first view) and the
// search index is built once (on first search).
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

	indexOnce sync.Once
	index     *searchIndex

	searchNavOnce sync.Once
	searchNavHTML template.HTML
	searchNavErr  error
}

// sitePage is one page, rendered on first use.
type sitePage struct {
	name, title string
	text        string // the Markdown without front matter, until rendered

	once     sync.Once
	rendered *Rendered // its HTML is dropped once in html; headings and sections stay
	html     []byte    // the whole document
	etag     string
	err      error
}

// siteAsset is an image served as it is.
type siteAsset struct {
	contentType string
	data        []byte
	etag        string
}

func newSite(snap *Snapshot) *site {
	st := &site{version: snap.Version, revision: snap.Revision, pages: map[string]*sitePage{}, assets: map[string]*siteAsset{}}
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
	// A title names its page's first entry only: every page keeps the whole
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

// render renders p, once.
func (st *site) render(p *sitePage) error {
	p.once.Do(func() {
		p.rendered, p.err = renderMarkdown([]byte(p.text)) // front matter is off already
		p.text = ""                                        // not needed again
		if p.err != nil {
			return
		}
		var nav template.HTML
		if nav, p.err = st.navHTML(p.name); p.err != nil {
			return
		}
		var buf bytes.Buffer
		buf.Grow(len(p.rendered.HTML) + len(nav) + 4<<10)
		// Safe: renderMarkdown escapes raw HTML and neutralises dangerous URLs.
		body := template.HTML(p.rendered.HTML)
		p.err = pageTemplate.Execute(&buf, pageData{
			Title: p.title, NavHTML: nav, TOC: tableOfContents(p.rendered.Headings), Body: body,
			Revision: st.revision,
		})
		p.html = bytes.Clone(buf.Bytes()) // exactly sized: it is kept as long as the version
		p.etag = etagOf(p.html)
		p.rendered.HTML = nil // in p.html now; the sections stay, for the index
	})
	return p.err
}

// navHTML is the navigation with current marked active.
func (st *site) navHTML(current string) (template.HTML, error) {
	var buf bytes.Buffer
	if err := navTemplate.Execute(&buf, navData{Nav: st.nav, Current: current}); err != nil {
		return "", err
	}
	// Safe: written by html/template.
	return template.HTML(buf.String()), nil
}

// searchNav is the navigation of the search page (nothing active), made
// once per site.
func (st *site) searchNav() (template.HTML, error) {
	st.searchNavOnce.Do(func() { st.searchNavHTML, st.searchNavErr = st.navHTML("") })
	return st.searchNavHTML, st.searchNavErr
}

// searchIndex returns the site's index, building it on first use from every
// page but SUMMARY.md, which is navigation (rendering those not viewed yet).
func (st *site) searchIndex() *searchIndex {
	st.indexOnce.Do(func() {
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
	return st.index
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
