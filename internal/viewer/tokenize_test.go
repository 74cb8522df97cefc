package viewer

import (
	"strings"
	"testing"
	"unicode/utf8"

	. "github.com/onsi/gomega"
	"golang.org/x/text/unicode/norm"
)

type tok struct {
	term       string
	start, end int
}

func tokens(text string, unigrams bool) []tok {
	var out []tok
	tokenize(text, unigrams, func(term []byte, start, end int) { out = append(out, tok{string(term), start, end}) })
	return out
}

func terms(text string, unigrams bool) []string {
	toks := tokens(text, unigrams)
	if toks == nil {
		return nil
	}
	out := make([]string, 0, len(toks))
	for _, t := range toks {
		out = append(out, t.term)
	}
	return out
}

func TestTokenize(t *testing.T) {
	tests := []struct {
		name     string
		text     string
		unigrams bool
		want     []string
	}{
		{name: "empty", text: "", want: nil},
		{name: "only punctuation and spaces", text: " .,;!? \n\t— ", want: nil},
		{name: "Latin words, lower-cased", text: "Reconcile the MarkdownView!", want: []string{"reconcile", "the", "markdownview"}},
		{name: "identifiers split at punctuation", text: "spec.assets max_concurrent x86-64 v2", want: []string{"spec", "assets", "max", "concurrent", "x86", "64", "v2"}},
		{name: "accented and other alphabets", text: "Über café Ελληνικά кириллица", want: []string{"über", "café", "ελληνικά", "кириллица"}},
		{name: "full-width Latin folds to ASCII", text: "ＭａｒｋｄｏｗｎＶｉｅｗ １２３", want: []string{"markdownview", "123"}},
		{name: "Japanese: bigrams", text: "ページ", want: []string{"ペー", "ージ"}},
		{name: "Japanese with unigrams", text: "ページ", unigrams: true, want: []string{"ペ", "ー", "ペー", "ジ", "ージ"}},
		{name: "half-width katakana folds to full width", text: "ﾍﾟｰｼﾞ", want: terms("ページ", false)},
		{name: "a single CJK character is a term", text: "本", want: []string{"本"}},
		{name: "single CJK characters between words", text: "第3章", want: []string{"第", "3", "章"}},
		{name: "Chinese: bigrams", text: "搜索引擎", want: []string{"搜索", "索引", "引擎"}},
		{name: "punctuation ends a CJK run", text: "一ページ目。次", want: []string{"一ペ", "ペー", "ージ", "ジ目", "次"}},
		{name: "Korean", text: "한국어 검색", want: []string{"한국", "국어", "검색"}},
		{name: "mixed scripts", text: "Trellisのビューア v1", want: []string{"trellis", "のビ", "ビュ", "ュー", "ーア", "v1"}},
		{name: "long words are cut", text: strings.Repeat("a", 100), want: []string{strings.Repeat("a", maxTermBytes)}},
		{name: "invalid UTF-8 separates words", text: "ab\xffcd", want: []string{"ab", "cd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(terms(tt.text, tt.unigrams)).To(Equal(tt.want))
		})
	}
}

func TestTokenizeOffsets(t *testing.T) {
	g := NewWithT(t)
	text := "Ａb ページ x"
	g.Expect(tokens(text, false)).To(Equal([]tok{
		{"ab", 0, 4},  // "Ａb": the full-width Ａ is 3 bytes
		{"ペー", 5, 11}, // offsets are in the original text
		{"ージ", 8, 14},
		{"x", 15, 16},
	}))
}

func FuzzTokenize(f *testing.F) {
	f.Add("Reconcile the MarkdownView!", false)
	f.Add("一ページ目のコンテンツです。", true)
	f.Add("搜索引擎 한국어 Ｆｕｌｌ ﾍﾟｰｼﾞ", true)
	f.Add("ab\xffcd\uFFFD本", false)
	f.Add(strings.Repeat("word ", 50), false)
	f.Fuzz(func(t *testing.T, text string, unigrams bool) {
		g := NewWithT(t)
		lastStart := -1
		tokenize(text, unigrams, func(b []byte, start, end int) {
			term := string(b)
			g.Expect(term).NotTo(BeEmpty())
			g.Expect(len(term)).To(BeNumerically("<=", maxTermBytes))
			g.Expect(utf8.ValidString(term)).To(BeTrue(), "term %q", term)
			g.Expect(strings.ContainsAny(term, " \t\n.,;<>&\"'")).To(BeFalse(), "term %q", term)
			g.Expect(start).To(BeNumerically(">=", 0))
			g.Expect(start).To(BeNumerically("<", end))
			g.Expect(end).To(BeNumerically("<=", len(text)))
			g.Expect(start).To(BeNumerically(">=", lastStart-3*utf8.UTFMax), "terms come in text order")
			lastStart = max(lastStart, start)
			// The term is what its range reads, folded (and cut); compared
			// composed, as the tokeniser composes kana and voicing marks.
			read := norm.NFC.String(foldString(strings.ToValidUTF8(text[start:end], "\uFFFD")))
			g.Expect(strings.HasPrefix(read, norm.NFC.String(term))).To(BeTrue(), "term %q from %q", term, text[start:end])
		})
		// Query terms are a subset of what indexing the same text gives.
		indexed := map[string]bool{}
		tokenize(text, true, func(term []byte, _, _ int) { indexed[string(term)] = true })
		tokenize(text, false, func(term []byte, _, _ int) {
			g.Expect(indexed).To(HaveKey(string(term)))
		})
	})
}
