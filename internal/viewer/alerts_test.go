package viewer

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// TestRenderAlerts: GitHub's alerts (docs.github.com, "Basic writing and
// formatting syntax", Alerts) become GitHub's markup; every other quote
// stays a quote.
func TestRenderAlerts(t *testing.T) {
	quote := func(body string) string { return "<blockquote>\n" + body + "</blockquote>\n" }
	alert := func(kind, title, body string) string {
		return `<div class="markdown-alert markdown-alert-` + kind + `">` + "\n" +
			`<p class="markdown-alert-title">` + title + "</p>\n" + body + "</div>\n"
	}
	tests := []struct {
		name string
		src  string
		want string
	}{
		{name: "note", src: "> [!NOTE]\n> Useful information.\n", want: alert("note", "Note", "<p>Useful information.</p>\n")},
		{name: "tip", src: "> [!TIP]\n> Helpful advice.\n", want: alert("tip", "Tip", "<p>Helpful advice.</p>\n")},
		{name: "important", src: "> [!IMPORTANT]\n> Key information.\n", want: alert("important", "Important", "<p>Key information.</p>\n")},
		{name: "warning", src: "> [!WARNING]\n> Urgent info.\n", want: alert("warning", "Warning", "<p>Urgent info.</p>\n")},
		{name: "caution", src: "> [!CAUTION]\n> Risks.\n", want: alert("caution", "Caution", "<p>Risks.</p>\n")},
		{name: "the marker in any case, as GitHub reads it", src: "> [!warning]\n> x\n", want: alert("warning", "Warning", "<p>x</p>\n")},
		{name: "spaces around the marker", src: ">  [!Note]  \n> x\n", want: alert("note", "Note", "<p>x</p>\n")},
		{
			name: "blocks after the marker",
			src:  "> [!TIP]\n>\n> First.\n>\n> - a\n> - b\n>\n> ```\n> make\n> ```\n",
			want: alert("tip", "Tip", "<p>First.</p>\n<ul>\n<li>a</li>\n<li>b</li>\n</ul>\n<pre><code>make\n</code></pre>\n"),
		},
		{name: "inline markup in the body", src: "> [!NOTE]\n> Run *this* and `that`.\n", want: alert("note", "Note", "<p>Run <em>this</em> and <code>that</code>.</p>\n")},
		{name: "a lazy line belongs to it", src: "> [!NOTE]\n> one\ntwo\n", want: alert("note", "Note", "<p>one\ntwo</p>\n")},
		{name: "two alerts in a row", src: "> [!NOTE]\n> a\n\n> [!TIP]\n> b\n", want: alert("note", "Note", "<p>a</p>\n") + alert("tip", "Tip", "<p>b</p>\n")},
		{name: "text after the marker on its line", src: "> [!NOTE] Title\n> x\n", want: quote("<p>[!NOTE] Title\nx</p>\n")},
		{name: "a marker and nothing else", src: "> [!NOTE]\n", want: quote("<p>[!NOTE]</p>\n")},
		{name: "an unknown kind", src: "> [!DANGER]\n> x\n", want: quote("<p>[!DANGER]\nx</p>\n")},
		{name: "no bang", src: "> [NOTE]\n> x\n", want: quote("<p>[NOTE]\nx</p>\n")},
		{name: "the marker on a later line", src: "> x\n> [!NOTE]\n", want: quote("<p>x\n[!NOTE]</p>\n")},
		{name: "an escaped marker", src: "> \\[!NOTE]\n> x\n", want: quote("<p>[!NOTE]\nx</p>\n")},
		{name: "in a list", src: "- > [!NOTE]\n  > x\n", want: "<ul>\n<li>\n" + quote("<p>[!NOTE]\nx</p>\n") + "</li>\n</ul>\n"},
		{name: "in a quote", src: "> > [!NOTE]\n> > x\n", want: quote(quote("<p>[!NOTE]\nx</p>\n"))},
		{
			name: "a marker that is a link is no marker",
			src:  "> [!note]\n> x\n\n[!note]: https://example.com\n",
			want: quote("<p><a href=\"https://example.com\">!note</a>\nx</p>\n"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			out, err := Render([]byte(tt.src))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(out)).To(Equal(tt.want))
			g.Expect(safetyProblems(out)).To(BeEmpty())
		})
	}
}

// TestAlertHeadingsAndText: a heading in an alert gets its id, and the
// alert's text is searchable without its marker.
func TestAlertHeadingsAndText(t *testing.T) {
	g := NewWithT(t)
	r, err := RenderPage([]byte("# Page\n\n> [!WARNING]\n> ## Before you start\n> Back up the bucket.\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(r.HTML)).To(ContainSubstring(`<div class="markdown-alert markdown-alert-warning">` + "\n" +
		`<p class="markdown-alert-title">Warning</p>` + "\n" + `<h2 id="before-you-start">Before you start</h2>`))
	g.Expect(r.Sections).To(HaveLen(2))
	g.Expect(r.Sections[1].Text).To(Equal("Back up the bucket."))
	for _, s := range r.Sections {
		g.Expect(s.Text).NotTo(ContainSubstring("[!"))
	}
}

// TestAlertStyles: each alert has its colour in both schemes, set by class
// (the CSP allows no inline style).
func TestAlertStyles(t *testing.T) {
	g := NewWithT(t)
	css := string(styleCSS)
	light, dark, ok := strings.Cut(css, "@media screen and (prefers-color-scheme: dark)")
	g.Expect(ok).To(BeTrue())
	dark = dark[:strings.Index(dark, "\n}\n")]
	for _, k := range alertKinds {
		class := "." + strings.Fields(k.class)[1]
		g.Expect(light).To(ContainSubstring(class+" {"), "light %s", class)
		g.Expect(dark).To(ContainSubstring(class+" {"), "dark %s", class)
	}
	g.Expect(css).To(ContainSubstring(".markdown-alert-title {"))
}
