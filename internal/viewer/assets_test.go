package viewer

import (
	"bytes"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestAssetType(t *testing.T) {
	tests := []struct {
		name string
		want string
	}{
		{"logo.png", "image/png"},
		{"Logo.PNG", "image/png"},
		{"photo.jpg", "image/jpeg"},
		{"photo.JPEG", "image/jpeg"},
		{"anim.gif", "image/gif"},
		{"pic.webp", "image/webp"},
		{"pic.avif", "image/avif"},
		{"diagram.svg", "image/svg+xml"},
		{"my logo v2.png", "image/png"},
		{"ロゴ.png", "image/png"},
		{"a.b.c.png", "image/png"},
		// Not assets.
		{"", ""},
		{".png", ""},
		{".hidden.png", ""},
		{"..data", ""},
		{"a/b.png", ""},
		{"../logo.png", ""},
		{`a\b.png`, ""},
		{"/logo.png", ""},
		{"logo.png/", ""},
		{"logo.png.html", ""},
		{"page.md", ""},
		{"page.html", ""},
		{"style.css", ""},
		{"script.js", ""},
		{"doc.pdf", ""},
		{"icon.ico", ""},
		{"icon.bmp", ""},
		{"movie.mp4", ""},
		{"drawing.svgz", ""},
		{"logo.png\x00.html", ""},
		{"logo", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(AssetType(tt.name)).To(Equal(tt.want))
		})
	}
}

// encoded returns a 2×2 image in a standard library format.
func encoded(t *testing.T, format string) []byte {
	img := image.NewPaletted(image.Rect(0, 0, 2, 2), color.Palette{color.White, color.Black})
	var b bytes.Buffer
	var err error
	switch format {
	case "png":
		err = png.Encode(&b, img)
	case "jpeg":
		err = jpeg.Encode(&b, img, nil)
	case "gif":
		err = gif.Encode(&b, img, nil)
	}
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return b.Bytes()
}

// webpHeader and avifHeader are the first bytes of real files of the kind.
var (
	webpHeader = []byte("RIFF\x24\x00\x00\x00WEBPVP8 \x18\x00\x00\x00")
	avifHeader = []byte("\x00\x00\x00\x1cftypavif\x00\x00\x00\x00avifmif1miaf\x00\x00\x00\x00")
	// avifCompatible names AVIF only among its compatible brands.
	avifCompatible = []byte("\x00\x00\x00\x18ftypmif1\x00\x00\x00\x00mif1avif")
)

func TestRasterSignature(t *testing.T) {
	pngData, jpegData, gifData := encoded(t, "png"), encoded(t, "jpeg"), encoded(t, "gif")
	tests := []struct {
		name        string
		contentType string
		data        []byte
		want        bool
	}{
		{"png", "image/png", pngData, true},
		{"jpeg", "image/jpeg", jpegData, true},
		{"gif", "image/gif", gifData, true},
		{"webp", "image/webp", webpHeader, true},
		{"avif", "image/avif", avifHeader, true},
		{"avif by compatible brand", "image/avif", avifCompatible, true},
		{"svg is not checked", "image/svg+xml", []byte("anything"), true},
		{"HTML named .png", "image/png", []byte("<!DOCTYPE html><script>alert(1)</script>"), false},
		{"jpeg named .png", "image/png", jpegData, false},
		{"png named .gif", "image/gif", pngData, false},
		{"empty png", "image/png", nil, false},
		{"truncated webp", "image/webp", webpHeader[:10], false},
		{"RIFF but not WEBP", "image/webp", []byte("RIFF\x24\x00\x00\x00WAVEfmt "), false},
		{"ftyp of an MP4", "image/avif", []byte("\x00\x00\x00\x18ftypisom\x00\x00\x00\x00isomiso2"), false},
		{"ftyp box larger than the data", "image/avif", []byte("\x00\x00\x10\x00ftypavif\x00\x00\x00\x00"), false},
		{"ftyp box too small", "image/avif", []byte("\x00\x00\x00\x08ftypavif\x00\x00\x00\x00"), false},
		{"avif brand only as the minor version", "image/avif", []byte("\x00\x00\x00\x14ftypmif1avifmiaf"), false},
		{"unknown type", "text/html", pngData, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(rasterSignature(tt.contentType, tt.data)).To(Equal(tt.want))
		})
	}
}

// scriptedSVG tries every way an SVG can run script when opened on its own.
const scriptedSVG = `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" onload="document.documentElement.setAttribute('data-pwned','onload')" width="40" height="40">
<script>document.documentElement.setAttribute('data-pwned', 'script')</script>
<rect width="40" height="40" fill="green"/>
<a xlink:href="javascript:alert(1)"><text y="20">x</text></a>
<foreignObject width="40" height="40"><body xmlns="http://www.w3.org/1999/xhtml"><iframe src="javascript:alert(1)"></iframe></body></foreignObject>
</svg>`

func assetServer(t *testing.T) *Server {
	s, _ := newTestServer(nil)
	mem := s.source.(*MemorySource)
	mem.Set(map[string]string{"a.md": "# A\n\n![logo](logo.png) ![diagram](diagram.svg) ![photo](Photo.JPG)\n"},
		map[string][]byte{
			"logo.png":      encoded(t, "png"),
			"Photo.JPG":     encoded(t, "jpeg"),
			"anim.gif":      encoded(t, "gif"),
			"pic.webp":      webpHeader,
			"pic.avif":      avifHeader,
			"diagram.svg":   []byte(scriptedSVG),
			"fake.png":      []byte("<!DOCTYPE html><script>alert(1)</script>"),
			"page.html":     []byte("<script>alert(1)</script>"),
			".hidden.png":   encoded(t, "png"),
			"../escape.png": encoded(t, "png"),
			"dir/in.png":    encoded(t, "png"),
		})
	return s
}

func TestServerAssets(t *testing.T) {
	s := assetServer(t)
	for name, want := range map[string]string{
		"logo.png":    "image/png",
		"Photo.JPG":   "image/jpeg",
		"anim.gif":    "image/gif",
		"pic.webp":    "image/webp",
		"pic.avif":    "image/avif",
		"diagram.svg": "image/svg+xml",
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			rec := do(s, http.MethodGet, "/"+name)
			g.Expect(rec.Code).To(Equal(http.StatusOK))
			g.Expect(rec.Header().Get("Content-Type")).To(Equal(want))
			g.Expect(rec.Header().Get("X-Content-Type-Options")).To(Equal("nosniff"))
			g.Expect(rec.Header().Get("Content-Security-Policy")).To(Equal(assetPolicy))
			g.Expect(rec.Header().Get("Cache-Control")).To(Equal("no-cache"))
			g.Expect(rec.Header().Get("ETag")).NotTo(BeEmpty())
			g.Expect(rec.Header().Get("Referrer-Policy")).To(Equal("no-referrer"))
			g.Expect(rec.Body.Len()).To(BeNumerically(">", 0))

			// Revalidation costs no body.
			req := httptest.NewRequest(http.MethodGet, "/"+name, nil)
			req.Header.Set("If-None-Match", rec.Header().Get("ETag"))
			again := httptest.NewRecorder()
			s.ServeHTTP(again, req)
			g.Expect(again.Code).To(Equal(http.StatusNotModified))
			g.Expect(again.Body.Len()).To(BeZero())
		})
	}
	t.Run("HEAD", func(t *testing.T) {
		g := NewWithT(t)
		rec := do(s, http.MethodHead, "/logo.png")
		g.Expect(rec.Code).To(Equal(http.StatusOK))
		g.Expect(rec.Header().Get("Content-Type")).To(Equal("image/png"))
	})
}

// TestServerAssetPolicyKeepsSVGInert checks the policy an SVG document is
// served with: no script source at all, a sandbox without allow-scripts, and
// nothing fetched but data: images. (The browser test runs a scripted SVG.)
func TestServerAssetPolicyKeepsSVGInert(t *testing.T) {
	g := NewWithT(t)
	rec := do(assetServer(t), http.MethodGet, "/diagram.svg")
	directives := map[string]string{}
	for _, d := range strings.Split(rec.Header().Get("Content-Security-Policy"), ";") {
		if fields := strings.Fields(d); len(fields) > 0 {
			directives[fields[0]] = strings.Join(fields[1:], " ")
		}
	}
	g.Expect(directives).To(HaveKeyWithValue("default-src", "'none'"))
	g.Expect(directives).NotTo(HaveKey("script-src"))
	g.Expect(directives).To(HaveKeyWithValue("sandbox", ""), "a sandbox with no allow-scripts or allow-same-origin")
	g.Expect(directives).To(HaveKeyWithValue("img-src", "data:"))
	g.Expect(directives).To(HaveKeyWithValue("style-src", "'unsafe-inline'"))
	g.Expect(rec.Body.String()).To(Equal(scriptedSVG), "served as it is: the policy, not rewriting, makes it inert")
}

func TestServerAssetsNotServed(t *testing.T) {
	s := assetServer(t)
	for _, target := range []string{
		"/fake.png", // not a PNG inside
		"/page.html",
		"/.hidden.png",
		"/../escape.png",
		"/..%2fescape.png",
		"/dir/in.png",
		"/dir%2fin.png",
		"/logo.PNG", // names are exact
		"/logo.png/",
		"/logo.png%00",
		"/missing.png",
	} {
		t.Run(target, func(t *testing.T) {
			g := NewWithT(t)
			rec := do(s, http.MethodGet, target)
			g.Expect(rec.Code).To(Equal(http.StatusNotFound))
			g.Expect(rec.Body.String()).NotTo(ContainSubstring("<script"))
			expectSecurityHeaders(g, rec.Header())
		})
	}
}

func TestServerPageEmbedsAssets(t *testing.T) {
	g := NewWithT(t)
	body := do(assetServer(t), http.MethodGet, "/a.md").Body.String()
	// Relative to /a.md, so they resolve to /logo.png and /diagram.svg: the
	// page's img-src 'self' allows them.
	g.Expect(body).To(ContainSubstring(`<img src="logo.png" alt="logo">`))
	g.Expect(body).To(ContainSubstring(`<img src="diagram.svg" alt="diagram">`))
	g.Expect(body).To(ContainSubstring(`<img src="Photo.JPG" alt="photo">`))
}

func FuzzAssetType(f *testing.F) {
	for _, name := range []string{"logo.png", "a/b.svg", ".x.gif", "x.PNG", "..data", "a.png.md", "ロゴ.webp", `a\b.jpg`} {
		f.Add(name)
	}
	f.Fuzz(func(t *testing.T, name string) {
		g := NewWithT(t)
		typ := AssetType(name)
		if typ == "" {
			return
		}
		g.Expect(strings.ContainsAny(name, `/\`)).To(BeFalse(), "name %q", name)
		g.Expect(name).NotTo(HavePrefix("."))
		g.Expect(assetTypes).To(HaveKeyWithValue(strings.ToLower(path.Ext(name)), typ))
		g.Expect(IsMarkdownName(name)).To(BeFalse(), "a name is a page or an asset, never both")
		g.Expect(typ).To(HavePrefix("image/"))
	})
}
