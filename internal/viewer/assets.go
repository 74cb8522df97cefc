package viewer

import (
	"bytes"
	"encoding/binary"
	"path"
	"strings"
)

// assetTypes are the only assets served: raster images and SVG, by the
// extension of the file name (any case).
var assetTypes = map[string]string{
	".png":  "image/png",
	".jpg":  "image/jpeg",
	".jpeg": "image/jpeg",
	".gif":  "image/gif",
	".webp": "image/webp",
	".avif": "image/avif",
	".svg":  "image/svg+xml",
}

// AssetType returns the Content-Type name is served with, or "" when name
// is not an asset: a plain file name (no directory, not hidden) with the
// extension of a raster image or of SVG.
func AssetType(name string) string {
	if !isPlainName(name) {
		return ""
	}
	ext := strings.ToLower(path.Ext(name))
	if len(ext) == len(name) {
		return "" // ".png" alone: no name before the extension
	}
	return assetTypes[ext]
}

// rasterSignature reports whether data begins the way a file of contentType
// must. Browsers are told the type and never sniff (nosniff), so this only
// keeps a file with the wrong name from being served as something it is not.
// SVG has no signature: it is an XML document, made inert by assetPolicy.
func rasterSignature(contentType string, data []byte) bool {
	switch contentType {
	case "image/png":
		return bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n"))
	case "image/jpeg":
		return bytes.HasPrefix(data, []byte{0xFF, 0xD8, 0xFF})
	case "image/gif":
		return bytes.HasPrefix(data, []byte("GIF87a")) || bytes.HasPrefix(data, []byte("GIF89a"))
	case "image/webp":
		return len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP"
	case "image/avif":
		return isAVIF(data)
	case "image/svg+xml":
		return true
	}
	return false
}

// isAVIF reports whether data starts with an ISO-BMFF "ftyp" box that names
// an AVIF brand, as major brand or among the compatible ones.
func isAVIF(data []byte) bool {
	if len(data) < 16 || string(data[4:8]) != "ftyp" {
		return false
	}
	size := int(binary.BigEndian.Uint32(data[:4]))
	if size < 16 || size > len(data) {
		return false
	}
	for i := 8; i+4 <= size; i += 4 {
		if i == 12 {
			continue // the minor version, not a brand
		}
		if b := string(data[i : i+4]); b == "avif" || b == "avis" {
			return true
		}
	}
	return false
}
