package viewer

import (
	"html"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	. "github.com/onsi/gomega"
)

// tags matches any tag in rendered output.
var tags = regexp.MustCompile(`<[^>]*>`)

// codeText returns the text of the one code block in out, as a reader sees it.
func codeText(g Gomega, out []byte) string {
	s := string(out)
	start := strings.Index(s, "<code")
	end := strings.LastIndex(s, "</code></pre>")
	g.Expect(start).To(BeNumerically(">=", 0), "no code block in %s", s)
	g.Expect(end).To(BeNumerically(">", start))
	inner := s[start:end]
	inner = inner[strings.Index(inner, ">")+1:]
	return html.UnescapeString(tags.ReplaceAllString(inner, ""))
}

func fence(info, code string) string { return "```" + info + "\n" + code + "```\n" }

func TestHighlightHostileCodeBlocks(t *testing.T) {
	huge := strings.Repeat("func f() { return \"<script>\" }\n", maxHighlightBytes/30+1)
	tests := []struct {
		name        string
		info        string
		code        string
		highlighted bool   // expect chroma's spans
		class       string // expected language class, "" for none
	}{
		{name: "known language", info: "go", code: "package main\n", highlighted: true, class: "go"},
		{name: "language in another case", info: "YAML", code: "a: 1\n", highlighted: true, class: "YAML"},
		{name: "alias", info: "sh", code: "echo hi\n", highlighted: true, class: "sh"},
		{name: "unknown language", info: "klingon", code: "Qapla'\n", class: "klingon"},
		{name: "no language", info: "", code: "plain\n"},
		{name: "HTML in HTML code", info: "html", code: "<script>alert(1)</script><img src=x onerror=alert(1)>\n", highlighted: true, class: "html"},
		{name: "HTML in Go code", info: "go", code: "s := \"</code></pre><script>alert(1)</script>\"\n", highlighted: true, class: "go"},
		{name: "HTML in plain code", info: "", code: "</code></pre><script>alert(1)</script>\n"},
		{name: "quotes in the info string", info: `"><script>alert(1)</script>`, code: "x\n"},
		{name: "attributes after the language", info: "go onerror=alert(1)", code: "x := 1\n", highlighted: true, class: "go"},
		{name: "class breakout in the language", info: `go"onmouseover="alert(1)`, code: "x\n"},
		{name: "language that looks like a path", info: "../../etc/passwd", code: "root\n"},
		{name: "language that is a file name", info: "main.go", code: "package main\n", highlighted: true, class: "main.go"},
		{name: "very long language name", info: strings.Repeat("a", 100), code: "x\n"},
		{name: "entity in the language", info: "&#103;o", code: "x\n"},
		{name: "tilde fence", info: "", code: "~~~\n"},
		{name: "block larger than the highlighting limit", info: "go", code: huge, class: "go"},
		{name: "invalid UTF-8", info: "go", code: "s := \"\xff\xfe\"\n", highlighted: true, class: "go"},
		{name: "NUL bytes", info: "c", code: "char *s = \"\x00\";\n", highlighted: true, class: "c"},
		{name: "unterminated string", info: "python", code: "s = '''\n" + strings.Repeat("x", 1000) + "\n", highlighted: true, class: "python"},
		{name: "empty block", info: "go", code: "", class: "go"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			out, err := Render([]byte(fence(tt.info, tt.code)))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(safetyProblems(out)).To(BeEmpty(), "output: %s", out)
			g.Expect(string(out)).NotTo(ContainSubstring("style="))
			if tt.highlighted {
				g.Expect(string(out)).To(HavePrefix(`<pre class="chroma"><code class="language-` + tt.class + `">`))
				g.Expect(string(out)).To(ContainSubstring(`<span class="`))
			} else {
				g.Expect(string(out)).NotTo(ContainSubstring("<span"))
				if tt.class != "" {
					g.Expect(string(out)).To(HavePrefix(`<pre><code class="language-` + tt.class + `">`))
				} else {
					g.Expect(string(out)).To(HavePrefix(`<pre><code>`))
				}
			}
			// Highlighting neither loses nor adds text (invalid bytes aside,
			// which become U+FFFD).
			want := strings.ToValidUTF8(tt.code, "")
			got := strings.ReplaceAll(codeText(g, out), "\uFFFD", "")
			g.Expect(got).To(Equal(want))
		})
	}
}

func TestHighlightOnlyClassesFromChroma(t *testing.T) {
	g := NewWithT(t)
	out, err := Render([]byte(fence("go", "package main\n\n// comment\nfunc main() { fmt.Println(\"x\", 42) }\n")))
	g.Expect(err).NotTo(HaveOccurred())
	classes := regexp.MustCompile(`<span class="([^"]*)">`).FindAllStringSubmatch(string(out), -1)
	g.Expect(classes).NotTo(BeEmpty())
	css := string(highlightCSS())
	for _, m := range classes {
		g.Expect(m[1]).To(MatchRegexp(`^[a-z0-9]+$`))
		g.Expect(css).To(ContainSubstring(".chroma ."+m[1]+" "), "class %q has no colour in the stylesheet", m[1])
	}
}

// cssRule matches one rule of the palette CSS: selector and declarations.
var cssRule = regexp.MustCompile(`(\.chroma[^{]*)\{([^}]*)\}`)

func TestHighlightCSSDarkOverridesEveryLightRule(t *testing.T) {
	g := NewWithT(t)
	css := string(highlightCSS())
	light, dark, ok := strings.Cut(css, "@media screen and (prefers-color-scheme: dark)")
	g.Expect(ok).To(BeTrue())
	rules := func(css string) map[string]string {
		out := map[string]string{}
		for _, m := range cssRule.FindAllStringSubmatch(css, -1) {
			out[strings.TrimSpace(m[1])] = strings.TrimSpace(m[2])
		}
		return out
	}
	lightRules, darkRules := rules(light), rules(dark)
	g.Expect(lightRules).To(HaveKey(".chroma .kd"))
	g.Expect(lightRules).To(HaveLen(len(darkRules)))
	for selector, decl := range lightRules {
		g.Expect(darkRules).To(HaveKey(selector), "the dark palette must override %s", selector)
		for _, property := range []string{"color:", "font-weight:", "font-style:"} {
			if strings.Contains(decl, property) {
				g.Expect(darkRules[selector]).To(ContainSubstring(property), "%s %s", selector, property)
			}
		}
	}
	g.Expect(darkRules[".chroma .p"]).NotTo(Equal(lightRules[".chroma .p"]), "punctuation is light on dark")
	for _, m := range regexp.MustCompile(`(?:^|[ ;{])((?:background-)?color): ([^;]*);`).FindAllStringSubmatch(css, -1) {
		g.Expect(m[2]).To(MatchRegexp(`^(#[0-9a-f]{6}|inherit|var\(--code\))$`), "%s", m[0])
	}
	g.Expect(css).NotTo(ContainSubstring("url("))
	g.Expect(css).NotTo(ContainSubstring("@import"))
}

// fuzzLanguages are the lexers FuzzHighlight feeds. Lexers are compiled on
// first use (tens of milliseconds each), so letting the fuzzer invent
// language names would spend its time compiling most of chroma's ~250
// lexers; hostile info strings are covered by TestHighlightHostileCodeBlocks.
var fuzzLanguages = []string{"", "go", "html", "javascript", "python", "yaml", "bash", "c", "json", "markdown", "no-such-language"}

func FuzzHighlight(f *testing.F) {
	f.Add(uint8(1), "package main\nfunc main() {}\n")
	f.Add(uint8(2), "<script>alert(1)</script>\n")
	f.Add(uint8(3), "document.write('<img src=x onerror=alert(1)>')\n")
	f.Add(uint8(4), "s = '''\n")
	f.Add(uint8(0), "</code></pre><script>\n")
	f.Add(uint8(5), "a: &anchor\n  b: *anchor\n")
	f.Add(uint8(6), "echo $((1+2)) `id`\n")
	f.Add(uint8(9), "[x](javascript:alert(1)) <script>\n")
	f.Fuzz(func(t *testing.T, langIndex uint8, code string) {
		g := NewWithT(t)
		if strings.Contains(code, "```") {
			return // would end the fence, not test the highlighter
		}
		lang := fuzzLanguages[int(langIndex)%len(fuzzLanguages)]
		out, err := Render([]byte(fence(lang, code)))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(safetyProblems(out)).To(BeEmpty(), "lang %q code %q\noutput: %s", lang, code, out)
		g.Expect(string(out)).NotTo(ContainSubstring("style="))
		g.Expect(utf8.Valid(out) || !utf8.ValidString(code)).To(BeTrue())
	})
}
