package viewer

import (
	"bytes"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// alertKind is one of GitHub's five alerts: the marker that starts it, its
// class and the title shown above it.
type alertKind struct {
	marker, class, title string
}

var alertKinds = []alertKind{
	{"[!NOTE]", "markdown-alert markdown-alert-note", "Note"},
	{"[!TIP]", "markdown-alert markdown-alert-tip", "Tip"},
	{"[!IMPORTANT]", "markdown-alert markdown-alert-important", "Important"},
	{"[!WARNING]", "markdown-alert markdown-alert-warning", "Warning"},
	{"[!CAUTION]", "markdown-alert markdown-alert-caution", "Caution"},
}

// kindAlert is the node kind of an alert.
var kindAlert = ast.NewNodeKind("Alert")

// alertNode is a blockquote that became an alert; its children are the
// blockquote's, without the marker.
type alertNode struct {
	ast.BaseBlock
	kind *alertKind
}

func (n *alertNode) Kind() ast.NodeKind { return kindAlert }

func (n *alertNode) Dump(src []byte, level int) {
	ast.DumpHelper(n, src, level, map[string]string{"Kind": n.kind.title}, nil)
}

// alerts is GitHub's alert syntax (docs.github.com, "Basic writing and
// formatting syntax", Alerts): a blockquote whose first line is only
// "[!NOTE]", "[!TIP]", "[!IMPORTANT]", "[!WARNING]" or "[!CAUTION]" (in any
// case, as GitHub reads it), with something after that line. As on GitHub,
// alerts are not nested in other elements: a quote inside a list or another
// quote stays a quote, and so does a marker with text after it on its line.
type alerts struct{}

func (alerts) Extend(m goldmark.Markdown) {
	// After the footnote transformer (999), which moves footnote
	// definitions out of quotes.
	m.Parser().AddOptions(parser.WithASTTransformers(util.Prioritized(alerts{}, 100)))
	m.Renderer().AddOptions(renderer.WithNodeRenderers(util.Prioritized(alerts{}, 100)))
}

// Transform turns each top-level blockquote that starts with a marker into an alert.
func (alerts) Transform(doc *ast.Document, reader text.Reader, _ parser.Context) {
	src := reader.Source()
	for n := doc.FirstChild(); n != nil; {
		next := n.NextSibling()
		if quote, ok := n.(*ast.Blockquote); ok {
			if kind := takeAlertMarker(quote, src); kind != nil {
				alert := &alertNode{kind: kind}
				for c := quote.FirstChild(); c != nil; {
					after := c.NextSibling()
					alert.AppendChild(alert, c)
					c = after
				}
				doc.ReplaceChild(doc, quote, alert)
			}
		}
		n = next
	}
}

// takeAlertMarker returns the alert a quote's first line names and removes
// that line from the quote, or returns nil and leaves the quote as it is.
func takeAlertMarker(quote *ast.Blockquote, src []byte) *alertKind {
	para, ok := quote.FirstChild().(*ast.Paragraph)
	if !ok || para.Lines().Len() == 0 {
		return nil
	}
	first := para.Lines().At(0)
	line := bytes.TrimSpace(first.Value(src))
	var kind *alertKind
	for i := range alertKinds {
		if bytes.EqualFold(line, []byte(alertKinds[i].marker)) {
			kind = &alertKinds[i]
			break
		}
	}
	if kind == nil {
		return nil
	}
	// The marker's line parses as plain text ("[", "!NOTE", "]"). Anything
	// else there (a link, should someone define the reference "!note")
	// means it is no marker.
	var marker []ast.Node
	for c := para.FirstChild(); c != nil; c = c.NextSibling() {
		t, ok := c.(*ast.Text)
		if !ok || t.Segment.Stop > first.Stop {
			return nil
		}
		marker = append(marker, c)
		if t.SoftLineBreak() || t.HardLineBreak() {
			break
		}
	}
	if para.Lines().Len() == 1 {
		if para.NextSibling() == nil {
			return nil // an alert with nothing in it is a quote, as on GitHub
		}
		quote.RemoveChild(quote, para)
		return kind
	}
	for _, c := range marker {
		para.RemoveChild(para, c)
	}
	para.Lines().SetSliced(1, para.Lines().Len())
	return kind
}

// RegisterFuncs implements renderer.NodeRenderer.
func (alerts) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(kindAlert, renderAlert)
}

// renderAlert writes GitHub's markup for an alert: a div with its classes
// and a title paragraph, both from alertKinds and never from the page.
func renderAlert(w util.BufWriter, _ []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	n := node.(*alertNode)
	if entering {
		_, _ = w.WriteString(`<div class="` + n.kind.class + `">` + "\n")
		_, _ = w.WriteString(`<p class="markdown-alert-title">` + n.kind.title + "</p>\n")
	} else {
		_, _ = w.WriteString("</div>\n")
	}
	return ast.WalkContinue, nil
}
