package viewer

import (
	"bytes"
	"fmt"
	"html"
	"regexp"
	"time"

	"github.com/alecthomas/chroma/v2"
	chromahtml "github.com/alecthomas/chroma/v2/formatters/html"
	"github.com/alecthomas/chroma/v2/lexers"
	"github.com/alecthomas/chroma/v2/styles"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/util"
)

// Highlighting limits. A block larger than maxHighlightBytes, or one whose
// lexing takes longer than highlightTimeout, is shown as plain text: chroma's
// lexers are backtracking regular expressions, and the input is untrusted.
// Rendering is cached per content version, so this cost is paid once.
const (
	maxHighlightBytes = 64 << 10
	highlightTimeout  = 200 * time.Millisecond
)

// languageName is what an info string's first word must look like to be
// used: as a class name and to pick a lexer.
var languageName = regexp.MustCompile(`^[A-Za-z0-9_+#.-]{1,32}$`)

// codeRenderer renders fenced code blocks, highlighted with chroma where the
// language is known. It writes class names only, never inline styles (our
// CSP allows none); the colours are in highlightCSS.
type codeRenderer struct{}

// RegisterFuncs implements renderer.NodeRenderer.
func (codeRenderer) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(ast.KindFencedCodeBlock, renderFencedCode)
}

func renderFencedCode(w util.BufWriter, src []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if !entering {
		return ast.WalkContinue, nil
	}
	n := node.(*ast.FencedCodeBlock)
	var code bytes.Buffer
	lines := n.Lines()
	for i := range lines.Len() {
		seg := lines.At(i)
		code.Write(seg.Value(src))
	}
	lang := string(n.Language(src))
	if !languageName.MatchString(lang) {
		lang = ""
	}
	if highlighted, ok := highlight(lang, code.String()); ok {
		_, _ = fmt.Fprintf(w, `<pre class="chroma"><code class="language-%s">`, lang)
		_, _ = w.Write(highlighted)
	} else {
		_, _ = w.WriteString("<pre><code")
		if lang != "" {
			_, _ = fmt.Fprintf(w, ` class="language-%s"`, lang)
		}
		_ = w.WriteByte('>')
		_, _ = w.WriteString(html.EscapeString(code.String()))
	}
	_, _ = w.WriteString("</code></pre>\n")
	return ast.WalkSkipChildren, nil
}

// highlight returns code as escaped HTML with a <span class> around each
// token, or false when lang has no lexer or code is too large or too slow.
func highlight(lang, code string) ([]byte, bool) {
	if lang == "" || code == "" || len(code) > maxHighlightBytes {
		return nil, false
	}
	lexer := lexers.Get(lang)
	if lexer == nil {
		return nil, false
	}
	it, err := chroma.Coalesce(lexer).Tokenise(nil, code)
	if err != nil {
		return nil, false
	}
	deadline := time.Now().Add(highlightTimeout)
	var out bytes.Buffer
	out.Grow(len(code) * 2)
	for tok := it(); tok != chroma.EOF; tok = it() {
		if time.Now().After(deadline) {
			return nil, false
		}
		class := tokenClass(tok.Type)
		if class != "" {
			out.WriteString(`<span class="`)
			out.WriteString(class)
			out.WriteString(`">`)
		}
		out.WriteString(html.EscapeString(tok.Value))
		if class != "" {
			out.WriteString("</span>")
		}
	}
	return out.Bytes(), true
}

// tokenClass is chroma's short class name for a token type ("kd" for a
// declaration keyword), falling back to the type's parent category, or ""
// for plain text and white space, which need no span.
func tokenClass(t chroma.TokenType) string {
	if t == chroma.TextWhitespace {
		return ""
	}
	for ; t != 0; t = t.Parent() {
		if class, ok := chroma.StandardTypes[t]; ok {
			return class
		}
	}
	return ""
}

// Chroma styles for the two colour schemes.
const (
	lightStyle = "github"
	darkStyle  = "github-dark"
)

// highlightCSS returns the token colours: the light palette, and the dark
// one for screens that prefer a dark scheme (print keeps the light one).
func highlightCSS() []byte {
	formatter := chromahtml.New(chromahtml.WithClasses(true))
	var b bytes.Buffer
	b.WriteString("/* Code highlighting: chroma's " + lightStyle + " and " + darkStyle + " styles. */\n")
	if err := formatter.WriteCSS(&b, styles.Get(lightStyle)); err != nil {
		panic(err) // writes to a bytes.Buffer do not fail
	}
	b.WriteString("@media screen and (prefers-color-scheme: dark) {\n")
	if err := formatter.WriteCSS(&b, styles.Get(darkStyle)); err != nil {
		panic(err)
	}
	b.WriteString("}\n")
	return b.Bytes()
}
