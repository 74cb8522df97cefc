package viewer

import (
	"bytes"
	"fmt"
	"html"
	"regexp"
	"slices"
	"time"

	"github.com/alecthomas/chroma/v2"
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
	var b bytes.Buffer
	b.WriteString("/* Code highlighting: chroma's " + lightStyle + " and " + darkStyle + " styles. */\n")
	writePalette(&b, styles.Get(lightStyle))
	b.WriteString("@media screen and (prefers-color-scheme: dark) {\n")
	writePalette(&b, styles.Get(darkStyle))
	b.WriteString("}\n")
	return b.Bytes()
}

// writePalette writes a complete rule for every token class: colour, weight,
// slant and underline, inherited values spelled out. Chroma's own CSS leaves
// out what a style inherits, so the dark palette would not override light
// rules it has no entry for (dark-on-dark punctuation).
func writePalette(b *bytes.Buffer, style *chroma.Style) {
	bg := style.Get(chroma.Background)
	fmt.Fprintf(b, ".chroma { color: %s; background-color: %s; }\n", colour(bg.Colour, "inherit"), colour(bg.Background, "var(--code)"))
	types := make([]chroma.TokenType, 0, len(chroma.StandardTypes))
	for t, class := range chroma.StandardTypes {
		if t > 0 && class != "" && t != chroma.TextWhitespace { // negative types are wrappers, not tokens
			types = append(types, t)
		}
	}
	slices.Sort(types)
	for _, t := range types {
		e := style.Get(t)
		fmt.Fprintf(b, ".chroma .%s { color: %s;", chroma.StandardTypes[t], colour(e.Colour, "inherit"))
		if e.Background.IsSet() && e.Background != bg.Background {
			fmt.Fprintf(b, " background-color: %s;", e.Background)
		}
		fmt.Fprintf(b, " font-weight: %s; font-style: %s; text-decoration: %s; }\n",
			pick(e.Bold == chroma.Yes, "bold", "normal"), pick(e.Italic == chroma.Yes, "italic", "normal"),
			pick(e.Underline == chroma.Yes, "underline", "none"))
	}
}

// colour is c in CSS, or unset when the style does not set it.
func colour(c chroma.Colour, unset string) string {
	if !c.IsSet() {
		return unset
	}
	return c.String()
}

func pick(cond bool, yes, no string) string {
	if cond {
		return yes
	}
	return no
}
