package benchsite

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"path"
	"strings"
)

// Repository returns a documentation repository as people keep one in
// Git: pages Markdown files of about pageBytes each, in folders
// part-NN/chapter-NN/ with a README.md each (the folder's page); relative
// links between pages and folders, as on GitHub; a title in front matter on
// every fourth page; and images PNG files of imageBytes (noise, so they do
// not compress) in images/, shown by every tenth page. The same arguments
// give the same files.
func Repository(pages, pageBytes, images, imageBytes int) map[string][]byte {
	files := map[string][]byte{}
	names := make([]string, pages)
	for i := range pages {
		names[i] = RepositoryPath(i)
	}
	imageNames := make([]string, images)
	for i := range images {
		imageNames[i] = fmt.Sprintf("images/diagram-%02d.png", i)
		files[imageNames[i]] = noisePNG(i, imageBytes)
	}
	for i, name := range names {
		up := strings.Repeat("../", strings.Count(name, "/"))
		title := fmt.Sprintf("%s %d", titleOf(i), i)
		var b strings.Builder
		if i%4 == 0 {
			fmt.Fprintf(&b, "---\ntitle: %q\n---\n\n", "Topic "+title)
		}
		b.WriteString(page(i, title, pageBytes, func(n int) string { return up + names[n%pages] }))
		b.WriteString("## See also\n\n")
		fmt.Fprintf(&b, "- [Next](%s%s) and [the one before](%s%s)\n", up, names[(i+1)%pages], up, names[(i+pages-1)%pages])
		fmt.Fprintf(&b, "- [Elsewhere](%s%s), [this folder](./) and [the handbook](%sREADME.md)\n", up, names[(i*7919+13)%pages], up)
		if images > 0 && i%10 == 0 {
			fmt.Fprintf(&b, "\n![Diagram %d](%s%s)\n", i, up, imageNames[(i/10)%images])
		}
		files[name] = []byte(b.String())
	}
	return files
}

// RepositoryPath is where Repository puts page i: README.md first, then parts of 200 files,
// each a README.md and ten chapters of a README.md and pages.
func RepositoryPath(i int) string {
	if i == 0 {
		return "README.md"
	}
	k := i - 1
	part, j := k/200, k%200
	if j == 0 {
		return fmt.Sprintf("part-%02d/README.md", part)
	}
	chapter, q := (j-1)/20, (j-1)%20
	dir := fmt.Sprintf("part-%02d/chapter-%02d", part, chapter)
	if q == 0 {
		return path.Join(dir, "README.md")
	}
	return path.Join(dir, fmt.Sprintf("page-%02d.md", q))
}

// noisePNG is an opaque PNG of random pixels of about size bytes.
func noisePNG(seed, size int) []byte {
	side := 1
	for side*side*3 < size {
		side++
	}
	r := rand.New(rand.NewPCG(uint64(seed), 3))
	img := image.NewRGBA(image.Rect(0, 0, side, side))
	for y := range side {
		for x := range side {
			img.Set(x, y, color.RGBA{R: uint8(r.Uint32()), G: uint8(r.Uint32()), B: uint8(r.Uint32()), A: 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		panic(err) // an in-memory image of a valid size always encodes
	}
	return buf.Bytes()
}
