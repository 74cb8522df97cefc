//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The tests in this file run bin/viewer on a directory (no cluster) and look
// at what headless Chromium makes of it. Screenshots and a printed PDF are
// kept in .dev/artifacts/viewer (git-ignored) for people to look at.

// siteFiles is a small site: the MarkdownView sample's Japanese page (config/samples),
// a Chinese page, code with and without a language, an image and a
// scripted SVG.
func siteFiles(t *testing.T) map[string][]byte {
	t.Helper()
	var logo bytes.Buffer
	img := image.NewRGBA(image.Rect(0, 0, 160, 48))
	for x := range 160 {
		for y := range 48 {
			img.Set(x, y, color.RGBA{R: uint8(x), G: 120, B: 200, A: 255})
		}
	}
	if err := png.Encode(&logo, img); err != nil {
		t.Fatal(err)
	}
	code := "package main\n\nimport \"fmt\"\n\n// main greets.\nfunc main() {\n\tfor i := 0; i < 3; i++ {\n\t\tfmt.Println(\"hello\", i, true, nil)\n\t}\n}\n"
	return map[string][]byte{
		"SUMMARY.md": []byte("# Summary\n\n- [Page 1](page1.md)\n- [中文](zh.md)\n- [Code](code.md)\n- [Plain](plain.md)\n- [Images](images.md)\n"),
		"page1.md":   []byte("# Page 1\n\n一ページ目のコンテンツです。\n\n- Item 1\n- Item 2\n"),
		"zh.md":      []byte("# 中文\n\n## 安装\n\n使用搜索引擎查找页面。\n\n## 配置\n\n修改配置文件。\n"),
		"code.md":    []byte("# Code\n\n## Go\n\n```go\n" + code + "```\n\n## YAML\n\n```yaml\nkind: MarkdownView\nspec:\n  replicas: 2\n```\n"),
		"plain.md":   []byte("# Code\n\n## Go\n\n```\n" + code + "```\n\n## YAML\n\n```\nkind: MarkdownView\nspec:\n  replicas: 2\n```\n"),
		"images.md":  []byte("# Images\n\n![logo](logo.png)\n\n![diagram](evil.svg)\n"),
		"logo.png":   logo.Bytes(),
		"evil.svg":   []byte(scriptedSVG),
	}
}

// scriptedSVG marks its own root element with a data-pwned attribute if any
// of its scripts runs (pwnedMark; the source itself only names it in quotes).
const scriptedSVG = `<svg xmlns="http://www.w3.org/2000/svg" width="120" height="40" onload="document.documentElement.setAttribute('data-pwned','onload')">
<script>document.documentElement.setAttribute('data-pwned','script')</script>
<rect width="120" height="40" fill="#2da44e"/>
</svg>`

// pwnedMark is what the browser's DOM of scriptedSVG shows once a script ran.
const pwnedMark = `data-pwned="`

// startViewerOnDir writes files into a temporary directory and serves it
// with bin/viewer; it returns the base URL.
func startViewerOnDir(t *testing.T, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	addr := freeAddr()
	ctx, cancel := context.WithCancel(context.Background())
	viewer := exec.CommandContext(ctx, filepath.Join(bin, "viewer"), "--dir", dir, "--addr", addr)
	if err := viewer.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = viewer.Wait() })
	if err := waitHTTP("http://"+addr+"/healthz", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

func chromiumPath(t *testing.T) string {
	t.Helper()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium not installed: `make chromium` installs it from Debian's packages")
	}
	return chromium
}

// artifactDir is where screenshots are kept: .dev/artifacts/viewer.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(root, ".dev", "artifacts", "viewer")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// capture runs headless Chromium on pageURL with extra flags (e.g. a
// screenshot or a PDF target) and a 1280×900 window.
func capture(t *testing.T, chromium, pageURL string, flags ...string) {
	t.Helper()
	profile := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--user-data-dir=" + profile, "--window-size=1280,900", "--virtual-time-budget=2000"}, flags...)
	if out, err := exec.CommandContext(ctx, chromium, append(args, pageURL)...).CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
}

// screenshot saves a PNG of pageURL under name in the artifact directory and
// returns the image. scheme is "light" or "dark": the emulated
// prefers-color-scheme (Blink's preferredColorScheme: 0 dark, 1 light).
func screenshot(t *testing.T, chromium, pageURL, name, scheme string) image.Image {
	t.Helper()
	path := filepath.Join(artifactDir(t), name+".png")
	preferred := map[string]string{"dark": "0", "light": "1"}[scheme]
	capture(t, chromium, pageURL, "--screenshot="+path, "--blink-settings=preferredColorScheme="+preferred)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func luma(c color.Color) float64 {
	r, g, b, _ := c.RGBA()
	return (0.299*float64(r) + 0.587*float64(g) + 0.114*float64(b)) / 257
}

// colourfulPixels counts pixels of a saturated colour: highlighted code has
// many, grey text on a plain background none.
func colourfulPixels(img image.Image) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			hi, lo := max(r, g, bl)>>8, min(r, g, bl)>>8
			if hi-lo > 60 {
				n++
			}
		}
	}
	return n
}

func TestViewerSearchFindsJapaneseAndChinesePages(t *testing.T) {
	chromium := chromiumPath(t)
	base := startViewerOnDir(t, siteFiles(t))
	tests := []struct {
		query   string
		want    []string
		notWant []string
	}{
		{query: "ページ", want: []string{`href="/page1.md#page-1"`, "<mark>ページ</mark>"}, notWant: []string{`href="/zh.md#`}},
		{query: "搜索", want: []string{`href="/zh.md#%e5%ae%89%e8%a3%85"`, "<mark>搜索</mark>"}, notWant: []string{`href="/page1.md#`}},
		{query: "配置文件", want: []string{`href="/zh.md#%e9%85%8d%e7%bd%ae"`}, notWant: []string{`href="/page1.md#`}},
	}
	for i, tt := range tests {
		page := base + "/search?q=" + url.QueryEscape(tt.query)
		dom := dumpDOM(t, chromium, page)
		for _, w := range tt.want {
			if !strings.Contains(dom, w) {
				t.Errorf("search %q: the page lacks %q:\n%s", tt.query, w, dom)
			}
		}
		for _, w := range tt.notWant {
			if strings.Contains(dom, w) {
				t.Errorf("search %q: the page has %q:\n%s", tt.query, w, dom)
			}
		}
		if problem := scriptCapable(dom); problem != "" {
			t.Errorf("search %q: %s", tt.query, problem)
		}
		screenshot(t, chromium, page, "search-"+[]string{"japanese", "chinese", "chinese-phrase"}[i], "light")
	}
}

// TestViewerSearchBoxSubmits submits the search form the way a reader does,
// with the form's own GET: no script is involved.
func TestViewerSearchBoxSubmits(t *testing.T) {
	chromium := chromiumPath(t)
	base := startViewerOnDir(t, siteFiles(t))
	dom := dumpDOM(t, chromium, base+"/page1.md")
	if !strings.Contains(dom, `<form class="search" action="/search" method="get" role="search">`) ||
		!strings.Contains(dom, `name="q"`) {
		t.Fatalf("no search form:\n%s", dom)
	}
	// What the browser sends for the form: action + "?q=" + the field,
	// percent-encoded. The page's CSP allows form-action 'self'.
	resp, err := http.Get(base + "/search?q=" + url.QueryEscape("ページ"))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self'") {
		t.Errorf("CSP %q does not let the search form submit", csp)
	}
}

func TestViewerHighlightsCode(t *testing.T) {
	chromium := chromiumPath(t)
	base := startViewerOnDir(t, siteFiles(t))
	dom := dumpDOM(t, chromium, base+"/code.md")
	for _, want := range []string{`<pre class="chroma"><code class="language-go">`, `<span class="kd">func</span>`, `<span class="nt">kind</span>`} {
		if !strings.Contains(dom, want) {
			t.Errorf("highlighted page lacks %q:\n%s", want, dom)
		}
	}
	// The same code with and without a language: only the stylesheet's token
	// colours tell the screenshots apart (both have the same blue links;
	// measured: about 2,900 colourful pixels against 1,050).
	highlighted := colourfulPixels(screenshot(t, chromium, base+"/code.md", "code-light", "light"))
	plain := colourfulPixels(screenshot(t, chromium, base+"/plain.md", "code-plain-light", "light"))
	if highlighted < 2*plain || highlighted < plain+1000 {
		t.Errorf("highlighted code has %d colourful pixels, plain code %d: the token colours do not apply", highlighted, plain)
	}
	darkHighlighted := colourfulPixels(screenshot(t, chromium, base+"/code.md", "code-dark", "dark"))
	darkPlain := colourfulPixels(screenshot(t, chromium, base+"/plain.md", "code-plain-dark", "dark"))
	if darkHighlighted < 2*darkPlain || darkHighlighted < darkPlain+1000 {
		t.Errorf("dark: highlighted code has %d colourful pixels, plain code %d", darkHighlighted, darkPlain)
	}
}

func TestViewerDarkMode(t *testing.T) {
	chromium := chromiumPath(t)
	base := startViewerOnDir(t, siteFiles(t))
	light := screenshot(t, chromium, base+"/zh.md", "page-light", "light")
	dark := screenshot(t, chromium, base+"/zh.md", "page-dark", "dark")
	// The page background (bottom right, away from text) and the sidebar
	// (bottom left).
	for _, p := range []image.Point{{1270, 890}, {10, 890}} {
		if l := luma(light.At(p.X, p.Y)); l < 200 {
			t.Errorf("light scheme: pixel %v has luma %.0f, want a light background", p, l)
		}
		if l := luma(dark.At(p.X, p.Y)); l > 60 {
			t.Errorf("dark scheme: pixel %v has luma %.0f, want a dark background", p, l)
		}
	}
	screenshot(t, chromium, base+"/search?q="+url.QueryEscape("ページ"), "search-japanese-dark", "dark")
	// Print keeps the light palette and drops the navigation; the PDF is
	// kept for people to look at.
	pdf := filepath.Join(artifactDir(t), "code-print.pdf")
	capture(t, chromium, base+"/code.md", "--print-to-pdf="+pdf, "--no-pdf-header-footer", "--blink-settings=preferredColorScheme=0")
	if b, err := os.ReadFile(pdf); err != nil || !bytes.HasPrefix(b, []byte("%PDF-")) {
		t.Errorf("no PDF printed: %v", err)
	}
}

// TestViewerScriptedSVGStaysInert opens a scripted SVG asset on its own, as
// a reader following a link to it would. The same file from a plain file
// server runs its scripts (so the check can see a script run); from the
// viewer, with its asset CSP, it must not.
func TestViewerScriptedSVGStaysInert(t *testing.T) {
	chromium := chromiumPath(t)
	files := siteFiles(t)
	base := startViewerOnDir(t, files)

	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "image/svg+xml")
		_, _ = w.Write(files["evil.svg"])
	}))
	defer plain.Close()
	if dom := dumpDOM(t, chromium, plain.URL+"/evil.svg"); !strings.Contains(dom, pwnedMark) {
		t.Fatalf("the control did not run the SVG's script, so this test cannot see one run:\n%s", dom)
	}

	dom := dumpDOM(t, chromium, base+"/evil.svg")
	if !strings.Contains(dom, "<rect") {
		t.Fatalf("the SVG did not load:\n%s", dom)
	}
	if strings.Contains(dom, pwnedMark) {
		t.Errorf("a script in the SVG ran:\n%s", dom)
	}
	// In a page, as an image, it shows (scripts never run in <img>).
	page := dumpDOM(t, chromium, base+"/images.md")
	for _, want := range []string{`<img src="logo.png" alt="logo">`, `<img src="evil.svg" alt="diagram">`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	// Both images are drawn: compared with a page without them, there are
	// more colourful pixels than the 160×48 PNG alone has (the SVG's green
	// rectangle adds 120×40).
	with := colourfulPixels(screenshot(t, chromium, base+"/images.md", "images-light", "light"))
	without := colourfulPixels(screenshot(t, chromium, base+"/page1.md", "page1-light", "light"))
	if with-without < 160*48 {
		t.Errorf("the images do not seem to be drawn: %d colourful pixels with them, %d without", with, without)
	}
}
