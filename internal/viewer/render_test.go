package viewer

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	. "github.com/onsi/gomega"
	xhtml "golang.org/x/net/html"
)

// forbiddenTags must never open in rendered output. Render escapes '<' in text
// and attribute values, so a literal "<script" can only be a real tag.
var forbiddenTags = []string{
	"<script", "<iframe", "<svg", "<math", "<object", "<embed", "<form", "<meta", "<style",
	"<link", "<base", "<frame", "<noscript", "<template", "<textarea", "<title", "<xmp",
	"<plaintext", "<button", "<details", "<video", "<audio", "<source",
}

// allowedTags are the elements goldmark's GFM renderer emits. Anything else
// in the output means raw HTML got through.
var allowedTags = map[string]bool{
	"p": true, "a": true, "img": true, "h1": true, "h2": true, "h3": true, "h4": true, "h5": true,
	"h6": true, "ul": true, "ol": true, "li": true, "input": true, "pre": true, "code": true,
	"em": true, "strong": true, "del": true, "table": true, "thead": true, "tbody": true,
	"tr": true, "th": true, "td": true, "blockquote": true, "hr": true, "br": true,
	"span": true, // highlighted code (and a search hit's page name): <span class="…">
	"mark": true, // matches in search results
	"sup":  true, // footnote references
	"div":  true, // alerts and the footnotes, with divClass only
}

var allowedAttrs = map[string]bool{
	"href": true, "src": true, "alt": true, "title": true, "id": true, "class": true,
	"type": true, "checked": true, "disabled": true, "start": true, "align": true, "style": true,
	"role": true,
}

// divClass is the class of every <div> the renderer writes: an alert's or
// the footnotes'.
var divClass = regexp.MustCompile(`^(markdown-alert markdown-alert-(note|tip|important|warning|caution)|footnotes)$`)

// roles are the ARIA roles goldmark's footnotes carry.
var roles = map[string]bool{"doc-noteref": true, "doc-backlink": true, "doc-endnotes": true}

// rawURLAttr finds href and src values in the raw output; goldmark always
// quotes attributes with '"' and escapes '"' inside them.
var rawURLAttr = regexp.MustCompile(`(?i)\b(href|src)\s*=\s*"([^"]*)"`)

// safeClass is what class names may be: chroma's token classes, language
// names, the template's own.
var safeClass = regexp.MustCompile(`^[A-Za-z0-9 _+#.-]*$`)

// tableAlignStyle is the only inline style goldmark writes (aligned table cells).
var tableAlignStyle = regexp.MustCompile(`^text-align:(left|right|center)$`)

// isDangerousURL reports whether a browser could run u, once entities are
// decoded, as script or as an HTML document: it drops tab and newlines and
// leading controls and spaces as the URL parser does, then checks the scheme.
func isDangerousURL(u string) bool {
	u = strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, u)
	u = strings.ToLower(strings.TrimLeftFunc(u, func(r rune) bool { return r <= ' ' }))
	for _, scheme := range []string{"javascript:", "vbscript:", "livescript:", "data:text"} {
		if strings.HasPrefix(u, scheme) {
			return true
		}
	}
	if strings.HasPrefix(u, "data:") {
		for _, ok := range []string{"data:image/png;", "data:image/gif;", "data:image/jpeg;", "data:image/webp;"} {
			if strings.HasPrefix(u, ok) {
				return false
			}
		}
		return true
	}
	return false
}

// safetyProblems lists what makes out unsafe to embed in a page; none for
// safe output. Escaped text such as "&lt;script&gt;" is fine.
func safetyProblems(out []byte) []string {
	var problems []string
	lower := bytes.ToLower(out)
	for _, tag := range forbiddenTags {
		if bytes.Contains(lower, []byte(tag)) {
			problems = append(problems, "raw tag "+tag)
		}
	}
	for _, m := range rawURLAttr.FindAllSubmatch(out, -1) {
		if v := html.UnescapeString(string(m[2])); isDangerousURL(v) {
			problems = append(problems, fmt.Sprintf("dangerous %s=%q", m[1], v))
		}
	}

	// Parse the output the way a browser's tokenizer would and check every
	// tag and attribute.
	z := xhtml.NewTokenizer(bytes.NewReader(out))
	for {
		tt := z.Next()
		switch tt {
		case xhtml.ErrorToken:
			if err := z.Err(); err != io.EOF {
				problems = append(problems, "tokenizer: "+err.Error())
			}
			return problems
		case xhtml.StartTagToken, xhtml.SelfClosingTagToken, xhtml.EndTagToken:
			tok := z.Token()
			if !allowedTags[tok.Data] {
				problems = append(problems, "unexpected element <"+tok.Data+">")
			}
			if tok.Data == "div" && tt != xhtml.EndTagToken && !slices.ContainsFunc(tok.Attr, func(a xhtml.Attribute) bool {
				return a.Key == "class" && divClass.MatchString(a.Val)
			}) {
				problems = append(problems, "a <div> that is no alert and not the footnotes")
			}
			for _, a := range tok.Attr {
				key := strings.ToLower(a.Key)
				switch {
				case strings.HasPrefix(key, "on"):
					problems = append(problems, fmt.Sprintf("event handler %s=%q on <%s>", key, a.Val, tok.Data))
				case !allowedAttrs[key]:
					problems = append(problems, fmt.Sprintf("unexpected attribute %s=%q on <%s>", key, a.Val, tok.Data))
				case (key == "href" || key == "src") && isDangerousURL(a.Val):
					problems = append(problems, fmt.Sprintf("dangerous %s=%q on <%s>", key, a.Val, tok.Data))
				case key == "class" && !safeClass.MatchString(a.Val):
					problems = append(problems, fmt.Sprintf("unexpected class=%q on <%s>", a.Val, tok.Data))
				case key == "role" && !roles[a.Val]:
					problems = append(problems, fmt.Sprintf("unexpected role=%q on <%s>", a.Val, tok.Data))
				case key == "style" && !tableAlignStyle.MatchString(a.Val):
					problems = append(problems, fmt.Sprintf("unexpected style=%q on <%s>", a.Val, tok.Data))
				}
			}
		}
	}
}

// TestSafetyCheck shows that the checker used by the XSS and fuzz tests does
// catch unsafe output and does not flag escaped text.
func TestSafetyCheck(t *testing.T) {
	unsafe := []string{
		`<script>alert(1)</script>`,
		`<SCRIPT SRC=//evil></SCRIPT>`,
		`<p><img src="x" onerror="alert(1)"></p>`,
		`<p><a href="x" OnMouseOver="alert(1)">x</a></p>`,
		`<a href="javascript:alert(1)">x</a>`,
		`<a href="JavaScript:alert(1)">x</a>`,
		`<a href=" &#x09;java&#x0A;script:alert(1)">x</a>`,
		`<a href="&#106;avascript:alert(1)">x</a>`,
		`<a href="vbscript:msgbox(1)">x</a>`,
		`<a href="data:text/html;base64,PHNjcmlwdD4=">x</a>`,
		`<img src="data:image/svg+xml;base64,PHN2Zz4=">`,
		`<iframe src="https://evil.example"></iframe>`,
		`<svg onload=alert(1)>`,
		`<object data="x"></object>`,
		`<embed src="x">`,
		`<form action="x"></form>`,
		`<meta http-equiv="refresh" content="0;url=x">`,
		`<style>*{}</style>`,
		`<p style="background:url(x)">x</p>`,
		`<div>x</div>`,
		`<div class="markdown-alert markdown-alert-danger">x</div>`,
		`<div class="footnotes x">x</div>`,
		`<a href="#x" role="button">x</a>`,
	}
	for _, s := range unsafe {
		NewWithT(t).Expect(safetyProblems([]byte(s))).NotTo(BeEmpty(), "should flag %q", s)
	}
	safe := []string{
		"",
		"<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>\n",
		`<p><a href="https://example.com" title="a&quot; onmouseover=&quot;alert(1)">x</a></p>`,
		`<p><a href="">x</a> javascript:alert(1) onerror=alert(1)</p>`,
		`<p><img src="data:image/png;base64,AAAA" alt="x"></p>`,
		"<!-- raw HTML omitted -->\n",
		`<table><thead><tr><th style="text-align:right">a</th></tr></thead></table>`,
		`<ul><li><input checked="" disabled="" type="checkbox"> done</li></ul>`,
		`<pre><code class="language-go">&lt;iframe&gt;</code></pre>`,
		"<div class=\"markdown-alert markdown-alert-note\">\n<p class=\"markdown-alert-title\">Note</p>\n<p>x</p>\n</div>\n",
		`<p>x<sup id="fnref:1"><a href="#fn:1" class="footnote-ref" role="doc-noteref">1</a></sup></p>` +
			`<div class="footnotes" role="doc-endnotes"><hr><ol><li id="fn:1"><p>y&#160;<a href="#fnref:1" class="footnote-backref" role="doc-backlink">&#x21a9;&#xfe0e;</a></p></li></ol></div>`,
	}
	for _, s := range safe {
		NewWithT(t).Expect(safetyProblems([]byte(s))).To(BeEmpty(), "should accept %q", s)
	}
}

func TestRenderGFM(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		want    []string
		notWant []string
	}{
		{
			name: "table",
			src:  "| Name | Value |\n|------|-------|\n| a    | `1`   |\n| b    | 2     |\n",
			want: []string{"<table>", "<thead>", "<th>Name</th>", "<tbody>", "<td>a</td>", "<td><code>1</code></td>", "</table>"},
		},
		{
			name: "aligned table",
			src:  "| L | C | R |\n|:--|:-:|--:|\n| 1 | 2 | 3 |\n",
			want: []string{"<table>", ">L</th>", ">3</td>"},
		},
		{
			name: "task list",
			src:  "- [ ] todo\n- [x] done\n",
			want: []string{
				`<li><input disabled="" type="checkbox"> todo</li>`,
				`<li><input checked="" disabled="" type="checkbox"> done</li>`,
			},
		},
		{
			name: "fenced code with a known language is highlighted",
			src:  "```go\nfunc main() { fmt.Println(\"<b>\") }\n```\n",
			want: []string{
				`<pre class="chroma"><code class="language-go"><span class="kd">func</span> <span class="nf">main</span>`,
				`<span class="s">&#34;&lt;b&gt;&#34;</span>`,
			},
			notWant: []string{"<b>", "style="},
		},
		{
			name: "fenced code with an unknown language is plain",
			src:  "```no-such-language\n<b>x</b>\n```\n",
			want: []string{`<pre><code class="language-no-such-language">&lt;b&gt;x&lt;/b&gt;`},
		},
		{
			name: "fenced code without a language",
			src:  "```\nplain\n```\n",
			want: []string{"<pre><code>plain\n</code></pre>"},
		},
		{
			name: "strikethrough",
			src:  "This is ~~wrong~~ right.\n",
			want: []string{"<del>wrong</del>"},
		},
		{
			name: "linkify",
			src:  "See https://example.com/docs and www.example.org.\n",
			want: []string{`<a href="https://example.com/docs">https://example.com/docs</a>`, `<a href="http://www.example.org">www.example.org</a>`},
		},
		{
			name: "headings get ids",
			src:  "# Getting Started\n\n## Install & Run\n",
			want: []string{`<h1 id="getting-started">Getting Started</h1>`, `<h2 id="install--run">Install &amp; Run</h2>`},
		},
		{
			name: "emphasis, links and images",
			src:  "*a* **b** [link](https://example.com/x?a=1&b=2 \"T\") ![alt](https://example.com/i.png)\n",
			want: []string{
				"<em>a</em>", "<strong>b</strong>",
				`<a href="https://example.com/x?a=1&amp;b=2" title="T">link</a>`,
				`<img src="https://example.com/i.png" alt="alt">`,
			},
		},
		{
			name: "relative links to other pages stay as written",
			src:  "[next](other.md) [sec](#install)\n",
			want: []string{`<a href="other.md">next</a>`, `<a href="#install">sec</a>`},
		},
		{
			name: "ordered list with start",
			src:  "3. three\n4. four\n",
			want: []string{`<ol start="3">`, "<li>three</li>"},
		},
		{
			name: "blockquote and rule",
			src:  "> quoted\n\n---\n",
			want: []string{"<blockquote>\n<p>quoted</p>\n</blockquote>", "<hr>"},
		},
		{
			name:    "HTML entities in text stay escaped",
			src:     "&lt;script&gt; and 1 < 2 & 3 > 2\n",
			want:    []string{"&lt;script&gt; and 1 &lt; 2 &amp; 3 &gt; 2"},
			notWant: []string{"<script"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			out, err := Render([]byte(tt.src))
			g.Expect(err).NotTo(HaveOccurred())
			for _, w := range tt.want {
				g.Expect(string(out)).To(ContainSubstring(w))
			}
			for _, w := range tt.notWant {
				g.Expect(string(out)).NotTo(ContainSubstring(w))
			}
			g.Expect(safetyProblems(out)).To(BeEmpty())
		})
	}
}

func TestRenderEmpty(t *testing.T) {
	g := NewWithT(t)
	for _, src := range [][]byte{nil, {}, []byte("\n\n  \n")} {
		out, err := Render(src)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(strings.TrimSpace(string(out))).To(BeEmpty())
	}
}

func TestRenderDoesNotKeepTheInput(t *testing.T) {
	g := NewWithT(t)
	src := []byte("# Title\n\ntext\n")
	out, err := Render(src)
	g.Expect(err).NotTo(HaveOccurred())
	before := string(out)
	copy(src, "# XXXXX\n\nYYYY\n")
	g.Expect(string(out)).To(Equal(before))
}

// xssCorpus is Markdown that tries to get script into the page. Each entry
// may name text that must still be in the output, to show the input was
// rendered (neutralised) rather than dropped wholesale.
var xssCorpus = []struct {
	name string
	src  string
	want []string
}{
	{name: "script tag", src: "<script>alert(1)</script>"},
	{name: "script tag inline", src: "Hello <script>alert(1)</script> world", want: []string{"Hello", "world"}},
	{name: "mixed-case script", src: "<ScRiPt>alert(1)</sCrIpT>"},
	{name: "img onerror", src: "<img src=x onerror=alert(1)>"},
	{name: "img onerror inline", src: "text <img src=x onerror=alert(1)> text", want: []string{"text"}},
	{name: "iframe", src: `<iframe src="https://evil.example"></iframe>`},
	{name: "iframe srcdoc", src: `<iframe srcdoc="<script>alert(1)</script>"></iframe>`},
	{name: "javascript link", src: "[x](javascript:alert(1))", want: []string{`<a href="">x</a>`}},
	{name: "upper-case javascript link", src: "[x](JAVASCRIPT:alert(1))", want: []string{`<a href="">x</a>`}},
	{name: "mixed-case javascript link", src: "[x](JaVaScRiPt:alert(1))", want: []string{`<a href="">x</a>`}},
	{name: "javascript link after spaces", src: "[x](  javascript:alert(1))", want: []string{`<a href="">x</a>`}},
	{name: "javascript link in angle brackets", src: "[x](<javascript:alert(1)>)", want: []string{`<a href="">x</a>`}},
	{name: "javascript link with a tab inside", src: "[x](<java\tscript:alert(1)>)", want: []string{">x</a>"}},
	{name: "javascript link with an encoded tab inside", src: "[x](<java&#9;script:alert(1)>)", want: []string{">x</a>"}},
	{name: "javascript link with a leading encoded space", src: "[x](<&#32;javascript:alert(1)>)", want: []string{">x</a>"}},
	{name: "vbscript link", src: "[x](vbscript:msgbox(1))", want: []string{`<a href="">x</a>`}},
	{name: "data text/html link", src: "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)", want: []string{`<a href="">x</a>`}},
	{name: "data text/html link, upper case", src: "[x](DATA:text/html,<script>alert(1)</script>)"},
	{name: "javascript image", src: "![x](javascript:alert(1))", want: []string{`<img src="" alt="x">`}},
	{name: "svg data image", src: "![x](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)", want: []string{`<img src="" alt="x">`}},
	{name: "javascript autolink", src: "<javascript:alert(1)>", want: []string{`<a href="">`}},
	{name: "vbscript autolink", src: "<VBSCRIPT:msgbox(1)>"},
	{name: "data autolink", src: "<data:text/html,alert(1)>"},
	{name: "javascript reference link", src: "[x][1]\n\n[1]: javascript:alert(1)\n", want: []string{`<a href="">x</a>`}},
	{name: "javascript reference link with title", src: "[x]\n\n[x]: <javascript:alert(1)> \"t\"\n", want: []string{`title="t"`}},
	{name: "raw anchor", src: `<a href="javascript:alert(1)">x</a>`},
	{name: "raw anchor onclick", src: `<a href="https://example.com" onclick="alert(1)">x</a>`},
	{name: "svg onload", src: "<svg onload=alert(1)>"},
	{name: "svg onload inline", src: "a <svg/onload=alert(1)> b", want: []string{"a", "b"}},
	{name: "style", src: "<style>body{background:url(javascript:alert(1))}</style>"},
	{name: "decimal entity javascript", src: "[x](&#106;avascript:alert(1))", want: []string{`<a href="">x</a>`}},
	{name: "hex entity javascript", src: "[x](&#x6A;avascript:alert(1))", want: []string{`<a href="">x</a>`}},
	{name: "padded entity javascript", src: "[x](&#0000106&#0000097&#0000118&#0000097script:alert(1))"},
	{name: "named entity colon", src: "[x](javascript&colon;alert(1))", want: []string{">x</a>"}},
	{name: "entity javascript image", src: "![x](&#106;avascript:alert(1))"},
	{name: "backslash-escaped colon", src: `[x](javascript\:alert(1))`, want: []string{`<a href="">x</a>`}},
	{
		name: "title with quotes and onmouseover",
		src:  `[x](https://example.com "a\" onmouseover=\"alert(1)")`,
		want: []string{`title="a&quot; onmouseover=&quot;alert(1)"`},
	},
	{
		name: "single-quoted title with onmouseover",
		src:  `[x](https://example.com 'a" onmouseover="alert(1)')`,
		want: []string{`title="a&quot; onmouseover=&quot;alert(1)"`},
	},
	{
		name: "parenthesised title with onmouseover",
		src:  `[x](https://example.com (a" autofocus onfocus="alert\(1\)"))`,
		want: []string{`title="a&quot; autofocus onfocus=&quot;alert(1)&quot;"`},
	},
	{name: "image title with onerror", src: `![x](https://example.com/i.png "a\" onerror=\"alert(1)")`, want: []string{"&quot; onerror=&quot;"}},
	{name: "link text with HTML", src: "[<img src=x onerror=alert(1)>](https://example.com)", want: []string{`href="https://example.com"`}},
	{name: "object", src: `<object data="javascript:alert(1)"></object>`},
	{name: "embed", src: `<embed src="javascript:alert(1)">`},
	{name: "form", src: `<form action="javascript:alert(1)"><button>x</button></form>`},
	{name: "form with formaction", src: `<form><button formaction="javascript:alert(1)">x</button></form>`},
	{name: "meta refresh", src: `<meta http-equiv="refresh" content="0;url=javascript:alert(1)">`},
	{name: "base", src: `<base href="javascript:/">`},
	{name: "link stylesheet", src: `<link rel="stylesheet" href="https://evil.example/x.css">`},
	{name: "details ontoggle", src: "<details open ontoggle=alert(1)>"},
	{name: "math mutation", src: "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>"},
	{name: "noscript mutation", src: `<noscript><p title="</noscript><img src=x onerror=alert(1)>">`},
	{name: "comment breakout", src: "<!--><script>alert(1)</script>-->"},
	{name: "cdata", src: "<![CDATA[<script>alert(1)</script>]]>"},
	{name: "processing instruction", src: "<?xml version=\"1.0\"?><script>alert(1)</script>"},
	{name: "html in a table cell", src: "| a |\n|---|\n| <script>alert(1)</script> |\n", want: []string{"<table>"}},
	{name: "html in a list item", src: "- <iframe src=x></iframe>\n- ok\n", want: []string{"<li>ok</li>"}},
	{name: "html in a blockquote", src: "> <svg onload=alert(1)>\n", want: []string{"<blockquote>"}},
	{name: "html in a heading", src: "# Title <img src=x onerror=alert(1)>\n", want: []string{"<h1", "Title"}},
	{name: "heading attribute syntax is not enabled", src: "# Title {onclick=alert(1)}\n", want: []string{"{onclick=alert(1)}"}},
	{name: "script in a code span is escaped text", src: "`<script>alert(1)</script>`", want: []string{"<code>&lt;script&gt;alert(1)&lt;/script&gt;</code>"}},
	{name: "script in a fenced block is escaped text", src: "```html\n<script>alert(1)</script>\n```\n", want: []string{`<span class="p">&lt;</span><span class="nt">script</span>`}},
	{name: "script in an info string", src: "```\"><script>alert(1)</script>\nx\n```\n"},
	{name: "onerror in an info string", src: "```go onerror=alert(1)\nx\n```\n", want: []string{`class="language-go"`}},
	{name: "bare javascript: text is not linked", src: "javascript:alert(1)\n", want: []string{"<p>javascript:alert(1)</p>"}},
	{name: "linkify with a script after it", src: "www.example.com/<script>alert(1)</script>\n"},
	{name: "linkify with quotes", src: "https://example.com/\"onmouseover=\"alert(1)\n"},
	{name: "null bytes", src: "<scr\x00ipt>alert(1)</scr\x00ipt>[x](java\x00script:alert(1))"},
	{name: "html block with markdown after a blank line", src: "<div onclick=alert(1)>\n\n*md*\n\n</div>\n", want: []string{"<em>md</em>"}},
	// Syntax highlighting, heading ids and the contents built from them, and
	// images that name the site's assets.
	{name: "code that closes its block, highlighted", src: "```js\n</code></pre><script>alert(1)</script>\n```\n", want: []string{`<pre class="chroma"><code class="language-js">`}},
	{name: "class breakout in an info string", src: "```go\"onmouseover=\"alert(1)\nx\n```\n", want: []string{"<pre><code>x"}},
	{name: "info string naming a file path", src: "```../../../etc/passwd\nroot\n```\n", want: []string{"<pre><code>root"}},
	{name: "style in a highlighted block", src: "```css\nbody { background: url(javascript:alert(1)) }\n```\n", want: []string{`<span class="nt">body</span>`}},
	{name: "heading that tries to leave its id", src: "# \"><script>alert(1)</script>\n", want: []string{`<h1 id="alert1">`}},
	{name: "heading with a handler in its text", src: "## x\" onmouseover=\"alert(1)\n", want: []string{`id="x-onmouseoveralert1"`}},
	{name: "image naming an asset through javascript", src: "![x](javascript:logo.png)", want: []string{`<img src="" alt="x">`}},
	{name: "image naming an SVG asset", src: "![x](diagram.svg)", want: []string{`<img src="diagram.svg" alt="x">`}},
	// Alerts, footnotes and front matter.
	{name: "HTML in an alert", src: "> [!NOTE]\n> <script>alert(1)</script>\n> <img src=x onerror=alert(1)>\n", want: []string{`<div class="markdown-alert markdown-alert-note">`}},
	{name: "javascript link in an alert", src: "> [!WARNING]\n> [x](javascript:alert(1))\n", want: []string{`<p class="markdown-alert-title">Warning</p>`, `<a href="">x</a>`}},
	{name: "HTML in an alert's marker", src: "> [!NOTE<script>alert(1)</script>]\n> x\n", want: []string{"<blockquote>"}},
	{name: "class breakout in an alert's marker", src: "> [!NOTE\" onmouseover=\"alert(1)]\n> x\n", want: []string{"<blockquote>"}},
	{name: "alert marker then raw HTML block", src: "> [!CAUTION]\n> <div onclick=alert(1)>\n> *md*\n", want: []string{"markdown-alert-caution"}},
	{name: "footnote label with quotes", src: "x[^\"onmouseover=\"alert(1)]\n\n[^\"onmouseover=\"alert(1)]: y\n", want: []string{`<a href="#fn:1" class="footnote-ref" role="doc-noteref">1</a>`}},
	{name: "footnote label with angle brackets", src: "x[^<script>alert(1)</script>]\n\n[^<script>alert(1)</script>]: y\n", want: []string{`<li id="fn:1">`}},
	{name: "footnote with HTML and a javascript link", src: "x[^1]\n\n[^1]: see <iframe src=x></iframe> [y](javascript:alert(1))\n", want: []string{`<a href="">y</a>`}},
	{name: "footnote reference in an image's alt", src: "![x[^1]](javascript:alert(1))\n\n[^1]: y\n", want: []string{`src=""`}},
	{name: "front matter title with script", src: "---\ntitle: \"</title><script>alert(1)</script>\"\n---\n# Page\n", want: []string{`<h1 id="page">Page</h1>`}},
	{name: "malformed front matter with script", src: "---\ntitle: <script>alert(1)</script>\n: [\n---\nText\n", want: []string{"<hr>", "Text"}},
	{name: "front matter then raw HTML", src: "---\ntitle: x\n---\n<script>alert(1)</script>\n<img src=x onerror=alert(1)>\n"},
}

func TestRenderXSSCorpus(t *testing.T) {
	for _, tt := range xssCorpus {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			out, err := Render([]byte(tt.src))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(safetyProblems(out)).To(BeEmpty(), "output: %s", out)
			g.Expect(utf8.Valid(out) || !utf8.ValidString(tt.src)).To(BeTrue(), "valid UTF-8 in, valid UTF-8 out")
			for _, w := range tt.want {
				g.Expect(string(out)).To(ContainSubstring(w))
			}
		})
	}
}

// realisticMarkdown returns a document of at least size bytes: headings,
// prose with inline markup, lists, task lists, tables, code blocks, quotes.
func realisticMarkdown(size int) []byte {
	var b bytes.Buffer
	b.WriteString("# Operator Handbook\n\nThis handbook describes how to run the **trellis** operator.\n\n")
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "## Section %d: Reconciling resources\n\n", i)
		fmt.Fprintf(&b, "The controller watches `MarkdownView` objects and keeps a *ConfigMap* in sync. "+
			"See [the API reference](api-%d.md#spec) and https://example.com/docs/%d for details. "+
			"Values such as `spec.markdowns` are ~~optional~~ required; a < b && c > d.\n\n", i, i)
		b.WriteString("### Steps\n\n1. Install the CRDs.\n2. Deploy the manager:\n   - with `make deploy`\n   - or with Helm\n3. Create a view.\n\n")
		b.WriteString("- [x] validation\n- [ ] status conditions\n- [ ] metrics\n\n")
		b.WriteString("| Field | Type | Default | Description |\n|:------|:----:|--------:|-------------|\n")
		for r := 0; r < 6; r++ {
			fmt.Fprintf(&b, "| `field%d` | string | `\"x\"` | The %d-th setting, see [docs](#section-%d). |\n", r, r, i)
		}
		b.WriteString("\n```go\nfunc (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {\n" +
			"\tvar mv viewv1.MarkdownView\n\tif err := r.Get(ctx, req.NamespacedName, &mv); err != nil {\n" +
			"\t\treturn ctrl.Result{}, client.IgnoreNotFound(err)\n\t}\n\treturn ctrl.Result{}, nil\n}\n```\n\n")
		b.WriteString("> **Note:** the viewer re-reads files on every request, so edits show up at once.\n\n")
		b.WriteString("```yaml\napiVersion: view.trellis.dev/v1\nkind: MarkdownView\nmetadata:\n  name: docs\n```\n\n---\n\n")
	}
	return b.Bytes()
}

func TestRealisticMarkdownRendersSafely(t *testing.T) {
	g := NewWithT(t)
	doc := realisticMarkdown(100 << 10)
	g.Expect(len(doc)).To(BeNumerically(">=", 100<<10))
	out, err := Render(doc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(safetyProblems(out)).To(BeEmpty())
	g.Expect(bytes.Count(out, []byte("<table>"))).To(Equal(bytes.Count(doc, []byte("| Field |"))))
	g.Expect(bytes.Count(out, []byte(`<code class="language-go">`))).To(Equal(bytes.Count(doc, []byte("```go"))))
}

func BenchmarkRender100KiB(b *testing.B) {
	doc := realisticMarkdown(100 << 10)
	b.ReportAllocs()
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if _, err := Render(doc); err != nil {
			b.Fatal(err)
		}
	}
}
