package viewer

import (
	"bytes"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxFrontMatterBytes bounds the YAML a page's front matter may hold. A
// longer block is not front matter: the page is rendered as it is written.
const maxFrontMatterBytes = 16 << 10

// splitFrontMatter splits Jekyll-style front matter off the start of a
// page: a first line "---", YAML, and a line "---". It returns the front
// matter's title, when it is a string, and the Markdown after the block.
//
// A block that is not closed, is over maxFrontMatterBytes, or whose YAML is
// not a mapping (a syntax error, a list, plain text between two rules) is
// not front matter: title is empty and body is the whole page, rendered as
// Markdown. Only the document's top level is read, as a node tree: aliases
// are never expanded.
func splitFrontMatter(src []byte) (title string, body []byte) {
	rest, ok := cutFence(src)
	if !ok {
		return "", src
	}
	var yamlText []byte
	closed := false
	for end := 0; end <= maxFrontMatterBytes && end < len(rest); {
		if after, ok := cutFence(rest[end:]); ok {
			yamlText, body, closed = rest[:end], after, true
			break
		}
		i := bytes.IndexByte(rest[end:], '\n')
		if i < 0 {
			break
		}
		end += i + 1
	}
	if !closed {
		return "", src
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(yamlText, &doc); err != nil {
		return "", src
	}
	if doc.Kind == 0 || doc.Kind == yaml.DocumentNode && len(doc.Content) == 0 {
		return "", body // nothing in it, or only comments
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return "", src
	}
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		key, value := m.Content[i], m.Content[i+1]
		if key.Kind != yaml.ScalarNode || key.Value != "title" {
			continue
		}
		if value.Kind == yaml.ScalarNode && value.ShortTag() == "!!str" {
			title = strings.Join(strings.Fields(value.Value), " ")
		}
		break
	}
	return title, body
}

// frontMatterOf is splitFrontMatter for a page held as a string; body
// shares text's memory.
func frontMatterOf(text string) (title, body string) {
	if !strings.HasPrefix(text, "---") {
		return "", text
	}
	title, b := splitFrontMatter([]byte(text))
	return title, text[len(text)-len(b):]
}

// cutFence reports whether b starts with a fence line, "---" with nothing
// after it but spaces, tabs and the line's end, and returns what follows it.
func cutFence(b []byte) (rest []byte, ok bool) {
	after, found := bytes.CutPrefix(b, []byte("---"))
	if !found {
		return nil, false
	}
	line, next, hasNext := bytes.Cut(after, []byte("\n"))
	if len(bytes.Trim(line, " \t\r")) != 0 {
		return nil, false
	}
	if !hasNext {
		return []byte{}, true // the fence ends the page
	}
	return next, true
}
