package viewer

import (
	"bytes"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// maxFootnotes bounds a page's footnote definitions, and its footnote
// references, each. goldmark finds a reference's footnote by scanning the
// definitions, so a page of many of both would cost their product. Beyond
// the bound "[^x]: …" and "[^x]" are what they are without footnotes.
const maxFootnotes = 1000

// footnotes is goldmark's extension.Footnote, with its parsers bounded by
// maxFootnotes; the priorities are the ones extension.Footnote uses.
type footnotes struct{}

func (footnotes) Extend(m goldmark.Markdown) {
	m.Parser().AddOptions(
		parser.WithBlockParsers(util.Prioritized(boundedFootnoteBlocks{extension.NewFootnoteBlockParser()}, 999)),
		parser.WithInlineParsers(util.Prioritized(boundedFootnoteLinks{extension.NewFootnoteParser()}, 101)),
		parser.WithASTTransformers(util.Prioritized(extension.NewFootnoteASTTransformer(), 999)),
	)
	m.Renderer().AddOptions(renderer.WithNodeRenderers(util.Prioritized(extension.NewFootnoteHTMLRenderer(), 500)))
}

var (
	footnoteDefinitionsKey = parser.NewContextKey()
	footnoteReferencesKey  = parser.NewContextKey()
)

// counted is the page's count of what key counts.
func counted(pc parser.Context, key parser.ContextKey) *int {
	n, _ := pc.Get(key).(*int)
	if n == nil {
		n = new(int)
		pc.Set(key, n)
	}
	return n
}

type boundedFootnoteBlocks struct{ parser.BlockParser }

func (p boundedFootnoteBlocks) Open(parent ast.Node, reader text.Reader, pc parser.Context) (ast.Node, parser.State) {
	n := counted(pc, footnoteDefinitionsKey)
	if *n >= maxFootnotes {
		return nil, parser.NoChildren
	}
	node, state := p.BlockParser.Open(parent, reader, pc)
	if node != nil {
		*n++
	}
	return node, state
}

type boundedFootnoteLinks struct{ parser.InlineParser }

// Parse counts every "[^" and "![^" it is given, found or not: the parser
// reads the block's text for each (also a cost in the block's length).
func (p boundedFootnoteLinks) Parse(parent ast.Node, block text.Reader, pc parser.Context) ast.Node {
	line, _ := block.PeekLine()
	if !bytes.HasPrefix(line, []byte("[^")) && !bytes.HasPrefix(line, []byte("![^")) {
		return nil // no footnote reference; the link and image parsers come next
	}
	n := counted(pc, footnoteReferencesKey)
	if *n >= maxFootnotes {
		return nil
	}
	*n++
	return p.InlineParser.Parse(parent, block, pc)
}
