package viewer

import (
	"bytes"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	extast "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// markdown is GitHub-flavoured Markdown with goldmark's safe defaults: raw
// HTML is dropped and javascript:, vbscript:, file: and non-image data: URLs
// are emptied. Never enable html.WithUnsafe here: the input is untrusted.
//
// GFM is spelled out so table alignment is written as an align attribute:
// goldmark's default inline style would be blocked by our CSP (no 'unsafe-inline').
// Fenced code goes through codeRenderer (syntax highlighting with classes).
// Heading ids are set by RenderPage, not by the parser. Footnotes are
// numbered in the order they are first referred to, and their ids ("fn:1",
// "fnref:1", "fnref1:1" for a second reference) hold a ':', which no heading
// id has (headingIDs drops it), so the two never collide; a label is never
// written out. Alerts are GitHub's (alerts.go).
//
// It holds a goldmark.Markdown, in an atomic.Value so that a test may give
// it another while the warm-ups of earlier tests' sites still render.
var markdown atomic.Value

func init() {
	markdown.Store(goldmark.New(
		goldmark.WithExtensions(
			extension.Linkify,
			extension.NewTable(extension.WithTableCellAlignMethod(extension.TableCellAlignAttribute)),
			extension.Strikethrough,
			extension.TaskList,
			footnotes{},
			alerts{},
		),
		goldmark.WithRendererOptions(renderer.WithNodeRenderers(util.Prioritized(codeRenderer{}, 100))),
	))
}

// Rendered is one Markdown page, rendered.
type Rendered struct {
	// Title is the page's front matter title; empty when it has none.
	Title string
	// HTML is a fragment that is safe to embed in a page.
	HTML []byte
	// Headings lists every heading in document order, with its id.
	Headings []Heading
	// Sections is the page's plain text split at its headings: the text
	// before the first heading (if any), then one section per heading.
	Sections []Section
}

// Heading is a heading of a page and the id of its element.
type Heading struct {
	Level int
	ID    string // empty for the first heading without a letter or digit, as on GitHub: the element has no id
	Text  string
}

// Section is a heading and the plain text under it, up to the next heading.
// The section before the first heading has a zero Heading.
type Section struct {
	Heading Heading
	Text    string
}

// Render turns Markdown into an HTML fragment that is safe to embed in a page.
func Render(src []byte) ([]byte, error) {
	r, err := RenderPage(src)
	if err != nil {
		return nil, err
	}
	return r.HTML, nil
}

// RenderPage renders Markdown and extracts its front matter title, headings
// and text. Front matter is not rendered.
func RenderPage(src []byte) (*Rendered, error) {
	title, body := splitFrontMatter(src)
	r, err := renderMarkdown(body)
	if err != nil {
		return nil, err
	}
	r.Title = title
	return r, nil
}

// renderMarkdown renders src as it is: front matter already split off. It
// lets a panic through, for the fuzz targets to find; the viewer's pages
// turn one into that page's error (site.render).
func renderMarkdown(src []byte) (*Rendered, error) {
	md := markdown.Load().(goldmark.Markdown)
	doc := md.Parser().Parse(text.NewReader(src))
	out := &Rendered{}
	collectText(doc, src, out)

	var buf bytes.Buffer
	buf.Grow(len(src) + len(src)/2)
	if err := md.Renderer().Render(&buf, src, doc); err != nil {
		return nil, err
	}
	out.HTML = buf.Bytes()
	return out, nil
}

// collectText walks the document: it gives every heading its id and fills
// out's Headings and Sections. Raw HTML is left out, as the renderer omits it.
func collectText(doc ast.Node, src []byte, out *Rendered) {
	ids := headingIDs{}
	var body, heading strings.Builder
	var current Heading
	inHeading := false
	flush := func() {
		if sectionText := strings.TrimSpace(body.String()); sectionText != "" || current.ID != "" {
			out.Sections = append(out.Sections, Section{Heading: current, Text: sectionText})
		}
		body.Reset()
	}
	// separate keeps the words of adjacent blocks and table cells apart.
	separate := func() {
		if s := body.String(); s != "" && !strings.HasSuffix(s, "\n") {
			body.WriteByte('\n')
		}
	}
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		w := &body
		if inHeading {
			w = &heading
		}
		switch n := n.(type) {
		case *ast.Heading:
			if entering {
				flush()
				inHeading = true
				heading.Reset()
				return ast.WalkContinue, nil
			}
			inHeading = false
			headingText := strings.Join(strings.Fields(heading.String()), " ")
			id := ids.next(slugSource(n, src))
			if id != "" {
				n.SetAttributeString("id", []byte(id))
			}
			current = Heading{Level: n.Level, ID: id, Text: headingText}
			out.Headings = append(out.Headings, current)
		case *ast.Text:
			if entering {
				w.Write(inlineText(n.Value(src), n.IsRaw()))
				if n.SoftLineBreak() || n.HardLineBreak() {
					w.WriteByte(' ')
				}
			}
		case *ast.String:
			if entering {
				w.Write(inlineText(n.Value, n.IsRaw()))
			}
		case *ast.AutoLink:
			if entering {
				w.Write(n.Label(src))
			}
		case *ast.RawHTML, *ast.HTMLBlock:
			return ast.WalkSkipChildren, nil
		case *ast.FencedCodeBlock, *ast.CodeBlock:
			if entering {
				separate()
				lines := n.Lines()
				for i := range lines.Len() {
					seg := lines.At(i)
					w.Write(seg.Value(src))
				}
			}
		case *extast.TableCell:
			if entering {
				w.WriteByte(' ')
			}
		default:
			if entering && n.Type() == ast.TypeBlock {
				separate()
			}
		}
		return ast.WalkContinue, nil
	})
	flush()
}

// inlineText is the text a reader sees for a Text or String value: with
// backslash escapes and character references resolved, unless raw.
func inlineText(value []byte, raw bool) []byte {
	if raw {
		return value
	}
	return util.ResolveEntityNames(util.ResolveNumericReferences(util.UnescapePunctuations(value)))
}

// slugSource is a heading's text as GitHub makes its id from it: the text
// of the rendered heading, where a line break is a newline (which the id
// drops), an image is nothing (its alt text is an attribute) and a footnote
// reference is its number.
func slugSource(h *ast.Heading, src []byte) string {
	var b strings.Builder
	_ = ast.Walk(h, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Text:
			b.Write(inlineText(n.Value(src), n.IsRaw()))
			if n.SoftLineBreak() || n.HardLineBreak() {
				b.WriteByte('\n')
			}
		case *ast.String:
			b.Write(inlineText(n.Value, n.IsRaw()))
		case *ast.AutoLink:
			b.Write(n.Label(src))
		case *ast.Image:
			return ast.WalkSkipChildren, nil
		case *extast.FootnoteLink:
			b.WriteString(strconv.Itoa(n.Index))
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

// headingIDs gives the headings of one page the ids GitHub gives them. The
// rules are GitHub's ("Section links" in docs.github.com's "Basic writing
// and formatting syntax"), in the detail github-slugger
// (github.com/Flet/github-slugger) takes from headings rendered on
// github.com: the text in lower case; letters, marks, decimal and letter
// numbers (Ⅱ), connector punctuation ('_', '‿'), letters drawn as symbols
// (Ⓐ) and '-' kept; each space a '-'; any other punctuation, symbol or
// whitespace dropped. A repeat gets "-1", "-2", …, skipping ids in use. A
// heading with nothing kept gets "" (no id) the first time, then "-1"….
// An id depends only on the headings before it, so it is the same on every
// render and survives edits further down. No id holds a ':', so none is a
// footnote's.
//
// The map holds every id given, and for a base id the last number tried,
// so n repeats cost O(n), not O(n²).
type headingIDs map[string]int

func (ids headingIDs) next(heading string) string {
	var b strings.Builder
	b.Grow(len(heading))
	for _, r := range heading {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r < utf8.RuneSelf:
			if 'a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '-' || r == '_' {
				b.WriteRune(r)
			} else if 'A' <= r && r <= 'Z' {
				b.WriteRune(r + 'a' - 'A')
			}
		case r == 'İ':
			b.WriteString("i\u0307") // lower case in full, as GitHub (Ruby's downcase) does
		case unicode.In(r, unicode.L, unicode.M, unicode.Nd, unicode.Nl, unicode.Pc, unicode.Other_Alphabetic):
			b.WriteRune(unicode.ToLower(r))
		}
	}
	base := b.String()
	id := base
	for _, taken := ids[id]; taken; _, taken = ids[id] {
		ids[base]++
		id = base + "-" + strconv.Itoa(ids[base])
	}
	ids[id] = 0
	return id
}
