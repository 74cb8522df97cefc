package viewer

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
	"golang.org/x/text/width"
)

// maxTermBytes bounds one search term; longer words are cut, the same way
// in pages and in queries, so they still match.
const maxTermBytes = 64

// foldRune is the form a character is searched in: full-width Latin and
// half-width katakana at their usual width, then lower case.
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		return r
	}
	if f := width.LookupRune(r).Folded(); f != 0 {
		r = f
	}
	return unicode.ToLower(r)
}

// foldString folds every character of s.
func foldString(s string) string { return strings.Map(foldRune, s) }

// foldText folds s and composes what tokenize composes (a kana and a
// separate voicing mark), for comparing whole phrases.
func foldText(s string) string { return norm.NFC.String(foldString(s)) }

// isCJK reports whether r belongs to a script written without spaces
// between words: Han, Hiragana, Katakana (with the prolonged-sound and voicing
// marks) and Hangul. Such text is searched by character pairs.
func isCJK(r rune) bool {
	switch {
	case r == 0x30FC, r >= 0x3099 && r <= 0x309C: // ー, ゛ ゜ and their combining forms
		return true
	case r < 0x1100:
		return false // fast path for Latin and most other alphabets
	}
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}

// isWordRune reports whether r is part of a word of an alphabet (or a
// number): letters, digits and combining marks that are not CJK.
func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || '0' <= r && r <= '9' || 'A' <= r && r <= 'Z'
	}
	return (unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)) && !isCJK(r)
}

// tokenize calls emit with each search term of text and the byte range it
// came from. Terms are folded (foldRune):
//   - a run of letters and digits is one term ("reconcile", "v2"), cut at
//     maxTermBytes; everything else separates words;
//   - a run of CJK characters gives every pair of neighbouring characters
//     (bigrams: "ページ" → "ペー", "ージ"), and every single character as well
//     when unigrams is set (for indexing, so a one-character query finds it);
//     a run of one character always gives that character.
//
// Bigrams need no dictionary, treat Chinese and Japanese alike, and find any
// substring of two or more characters; the price is some false matches
// (both pairs present, but not next to each other), which phrase ranking
// pushes down.
//
// term is valid only during the call to emit; emit copies it to keep it.
func tokenize(text string, unigrams bool, emit func(term []byte, start, end int)) {
	var word []byte // the current word, folded
	wordStart := -1 // its start in text, or -1 outside a word
	cjkRun := 0     // CJK characters in the current run
	var prev rune   // the previous CJK character (folded)
	prevStart := 0  // its range in text
	prevEnd := 0
	var gram [8]byte // scratch for a unigram or bigram
	endWord := func(end int) {
		if wordStart >= 0 {
			emit(word, wordStart, end)
			word, wordStart = word[:0], -1
		}
	}
	endRun := func() {
		if cjkRun == 1 && !unigrams {
			emit(utf8.AppendRune(gram[:0], prev), prevStart, prevEnd)
		}
		cjkRun = 0
	}
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:]) // an invalid byte is U+FFFD, size 1
		f := foldRune(r)
		// A kana followed by a separate voicing mark, as half-width katakana
		// are written, is one character: ﾍﾟ → ペ.
		if m, msize := utf8.DecodeRuneInString(text[i+size:]); msize > 0 {
			if fm := foldRune(m); fm == 0x3099 || fm == 0x309A {
				if c := norm.NFC.String(string([]rune{f, fm})); utf8.RuneCountInString(c) == 1 {
					f, _ = utf8.DecodeRuneInString(c)
					size += msize
				}
			}
		}
		switch {
		case isCJK(f):
			endWord(i)
			if unigrams {
				emit(utf8.AppendRune(gram[:0], f), i, i+size)
			}
			if cjkRun > 0 {
				emit(utf8.AppendRune(utf8.AppendRune(gram[:0], prev), f), prevStart, i+size)
			}
			cjkRun++
			prev, prevStart, prevEnd = f, i, i+size
		case isWordRune(f):
			endRun()
			if wordStart < 0 {
				wordStart = i
			}
			if len(word)+utf8.RuneLen(f) <= maxTermBytes {
				word = utf8.AppendRune(word, f)
			}
		default:
			endWord(i)
			endRun()
		}
		i += size
	}
	endWord(len(text))
	endRun()
}
