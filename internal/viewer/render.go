package viewer

import (
	"bytes"
	"strconv"
	"strings"
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
// Heading ids are set by RenderPage, not by the parser.
var markdown = goldmark.New(
	goldmark.WithExtensions(
		extension.Linkify,
		extension.NewTable(extension.WithTableCellAlignMethod(extension.TableCellAlignAttribute)),
		extension.Strikethrough,
		extension.TaskList,
	),
	goldmark.WithRendererOptions(renderer.WithNodeRenderers(util.Prioritized(codeRenderer{}, 100))),
)

// Rendered is one Markdown page, rendered.
type Rendered struct {
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
	ID    string
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

// RenderPage renders Markdown and extracts its headings and text.
func RenderPage(src []byte) (*Rendered, error) {
	doc := markdown.Parser().Parse(text.NewReader(src))
	out := &Rendered{}
	collectText(doc, src, out)

	var buf bytes.Buffer
	buf.Grow(len(src) + len(src)/2)
	if err := markdown.Renderer().Render(&buf, src, doc); err != nil {
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
			id := ids.next(headingText)
			n.SetAttributeString("id", []byte(id))
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

// maxIDBytes bounds a heading id, so a long heading gives a usable anchor.
const maxIDBytes = 80

// headingIDs gives the headings of one page ids the way GitHub does: the
// heading's text in lower case, letters, digits, marks, '-' and '_' kept,
// spaces turned into '-', anything else dropped; "-1", "-2", … appended to
// repeats. An id depends only on the headings before it, so it is the same on
// every render and survives edits elsewhere in the page.
type headingIDs map[string]bool

func (ids headingIDs) next(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) || r == '-' || r == '_':
		case r == ' ':
			r = '-'
		default:
			continue
		}
		if b.Len()+utf8.RuneLen(r) > maxIDBytes {
			break
		}
		b.WriteRune(r)
	}
	base := b.String()
	if base == "" {
		base = "section"
	}
	id := base
	for i := 1; ids[id]; i++ {
		id = base + "-" + strconv.Itoa(i)
	}
	ids[id] = true
	return id
}
