package viewer

import (
	"bytes"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
)

// markdown is GitHub-flavoured Markdown with goldmark's safe defaults: raw
// HTML is dropped and javascript:, vbscript:, file: and non-image data: URLs
// are emptied. Never enable html.WithUnsafe here: the input is untrusted.
//
// GFM is spelled out so table alignment is written as an align attribute:
// goldmark's default inline style would be blocked by our CSP (no 'unsafe-inline').
var markdown = goldmark.New(
	goldmark.WithExtensions(
		extension.Linkify,
		extension.NewTable(extension.WithTableCellAlignMethod(extension.TableCellAlignAttribute)),
		extension.Strikethrough,
		extension.TaskList,
	),
	goldmark.WithParserOptions(parser.WithAutoHeadingID()),
)

// Render turns Markdown into an HTML fragment that is safe to embed in a page.
func Render(src []byte) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(src) + len(src)/2)
	if err := markdown.Convert(src, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
