package viewer

import (
	"bytes"
	"html"
	"html/template"
	"math"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// Search limits. The index is built once per content version and held in
// memory; maxIndexedBytes bounds it: pages whose text would take the total
// past it are left out (and the results page says so). A MarkdownView is
// at most 1 MiB, far below it; the bound is for a large --dir.
const (
	maxIndexedBytes     = 8 << 20
	maxQueryBytes       = 256 // longer queries are cut, on a character boundary
	maxQueryTerms       = 16  // further distinct terms are ignored
	maxPrefixExpansions = 32  // words a query word may stand for as a prefix
	minPrefixRunes      = 3   // shorter query words match whole words only
	maxResults          = 20
	phraseCandidates    = 200 // best-scored results checked for the exact phrase
)

// Ranking: BM25 over sections, a bonus for a term in the section's heading
// (or the page title), a smaller weight for a word found as a prefix, and a
// bonus when the query occurs verbatim.
const (
	bm25K1        = 1.2
	bm25B         = 0.75
	headingBoost  = 2.0
	prefixWeight  = 0.5
	phraseBonus   = 1.5
	snippetBytes  = 240 // about 240 Latin or 80 CJK characters
	snippetBefore = 60
)

// indexedSection is one searchable section of a page.
type indexedSection struct {
	page      string // file name
	pageTitle string
	heading   Heading // zero for the text before the first heading
	text      string
	folded    string // heading and text, folded, white space collapsed: for phrases
	length    int    // terms in text
}

// posting says how often a term occurs in one section.
type posting struct {
	doc  uint32 // index into searchIndex.docs
	body uint16 // occurrences in the text (saturating)
	head uint16 // occurrences in the heading or page title (saturating)
}

// searchIndex is an inverted index over the sections of a site's pages.
// It is laid out for size — CJK text has many distinct bigrams — as sorted
// arrays, not maps: terms[i] (all of them substrings of one string) occurs in
// postings[starts[i]:starts[i+1]], sorted by doc.
type searchIndex struct {
	docs     []indexedSection
	terms    []string
	starts   []uint32
	postings []posting
	avgLen   float64
	bytes    int // text indexed
	skipped  int // pages left out to stay under maxIndexedBytes
}

// lookup returns the postings of term.
func (ix *searchIndex) lookup(term string) []posting {
	i, found := slices.BinarySearch(ix.terms, term)
	if !found {
		return nil
	}
	return ix.postings[ix.starts[i]:ix.starts[i+1]]
}

// indexPage is a page to index, in site order.
type indexPage struct {
	name, title string
	sections    []Section
}

// buildIndex indexes the sections of pages, in order, up to maxIndexedBytes.
func buildIndex(pages []indexPage) *searchIndex {
	ix := &searchIndex{}
	lists := map[string][]posting{} // while building
	counts := map[string]*posting{}
	totalLen := 0
	for _, p := range pages {
		size := 0
		for _, s := range p.sections {
			size += len(s.Text) + len(s.Heading.Text)
		}
		if ix.bytes+size > maxIndexedBytes {
			ix.skipped++
			continue
		}
		ix.bytes += size
		for i, s := range p.sections {
			doc := uint32(len(ix.docs))
			clear(counts)
			count := func(field func(*posting)) func([]byte, int, int) {
				return func(term []byte, _, _ int) {
					c := counts[string(term)]
					if c == nil {
						c = &posting{doc: doc}
						counts[string(term)] = c
					}
					field(c)
				}
			}
			length := 0
			tokenize(s.Text, true, count(func(c *posting) { c.body = saturatingInc(c.body); length++ }))
			inHeading := count(func(c *posting) { c.head = saturatingInc(c.head) })
			tokenize(s.Heading.Text, true, inHeading)
			if i == 0 {
				tokenize(p.title, true, inHeading)
			}
			for term, c := range counts {
				lists[term] = append(lists[term], *c)
			}
			ix.docs = append(ix.docs, indexedSection{page: p.name, pageTitle: p.title, heading: s.Heading, text: s.Text,
				folded: collapseSpaces(foldText(s.Heading.Text + "\n" + s.Text)), length: length})
			totalLen += length
		}
	}
	if len(ix.docs) > 0 {
		ix.avgLen = float64(totalLen) / float64(len(ix.docs))
	}
	// Postings were appended doc by doc, so each list is sorted by doc. Copy
	// them into one exactly-sized array, and the terms into one string.
	ix.terms = make([]string, 0, len(lists))
	total, termBytes := 0, 0
	for term, ps := range lists {
		ix.terms = append(ix.terms, term)
		total += len(ps)
		termBytes += len(term)
	}
	slices.Sort(ix.terms)
	var arena strings.Builder
	arena.Grow(termBytes)
	for _, term := range ix.terms {
		arena.WriteString(term)
	}
	all := arena.String()
	ix.starts = make([]uint32, 0, len(ix.terms)+1)
	ix.postings = make([]posting, 0, total)
	for i, term := range ix.terms {
		ix.starts = append(ix.starts, uint32(len(ix.postings)))
		ix.postings = append(ix.postings, lists[term]...)
		ix.terms[i], all = all[:len(term)], all[len(term):]
	}
	ix.starts = append(ix.starts, uint32(len(ix.postings)))
	return ix
}

func saturatingInc(n uint16) uint16 {
	if n == math.MaxUint16 {
		return n
	}
	return n + 1
}

// queryTerm is one term of a query and the index terms that match it.
type queryTerm struct {
	term     string
	variants []variant
}

type variant struct {
	term   string
	weight float64
}

// query is a parsed search query.
type query struct {
	text  string // the query as searched: cut to maxQueryBytes, folded, spaces collapsed
	terms []queryTerm
	// runs are the query's runs of three or more CJK characters, folded. A
	// section must contain each of them as written, not only its bigrams.
	runs []string
}

// parseQuery cuts q to maxQueryBytes and tokenises it the way pages are,
// keeping at most maxQueryTerms distinct terms.
func parseQuery(q string) query {
	q = strings.ToValidUTF8(q, "\uFFFD")
	if len(q) > maxQueryBytes {
		cut := maxQueryBytes
		for cut > 0 && !utf8.RuneStart(q[cut]) {
			cut--
		}
		q = q[:cut]
	}
	out := query{text: collapseSpaces(foldText(q))}
	seen := map[string]bool{}
	runStart, runEnd := -1, -1 // the CJK run being read, as a byte range of q
	endRun := func() {
		if runStart >= 0 {
			if run := foldText(q[runStart:runEnd]); utf8.RuneCountInString(run) >= 3 {
				out.runs = append(out.runs, run)
			}
		}
		runStart = -1
	}
	tokenize(q, false, func(b []byte, start, end int) {
		term := string(b)
		if r, _ := utf8.DecodeRuneInString(term); isCJK(r) {
			if start > runEnd || runStart < 0 {
				endRun()
				runStart = start
			}
			runEnd = end
		} else {
			endRun()
		}
		if !seen[term] && len(out.terms) < maxQueryTerms {
			seen[term] = true
			out.terms = append(out.terms, queryTerm{term: term})
		}
	})
	endRun()
	return out
}

// collapseSpaces replaces each run of white space in s with one space.
func collapseSpaces(s string) string { return strings.Join(strings.Fields(s), " ") }

// expand finds the index terms each query term matches: itself, and for a
// word of minPrefixRunes or more, up to maxPrefixExpansions longer words it
// begins (at prefixWeight).
func (ix *searchIndex) expand(q *query) {
	for i := range q.terms {
		t := &q.terms[i]
		t.variants = t.variants[:0]
		if ix.lookup(t.term) != nil {
			t.variants = append(t.variants, variant{term: t.term, weight: 1})
		}
		if !isPrefixable(t.term) {
			continue
		}
		added := 0
		first, _ := slices.BinarySearch(ix.terms, t.term)
		for j := first; j < len(ix.terms) && added < maxPrefixExpansions; j++ {
			w := ix.terms[j]
			if !strings.HasPrefix(w, t.term) {
				break
			}
			if w != t.term {
				t.variants = append(t.variants, variant{term: w, weight: prefixWeight})
				added++
			}
		}
	}
}

// isPrefixable reports whether a query term may match longer words: a word
// (not CJK) of at least minPrefixRunes characters.
func isPrefixable(term string) bool {
	r, _ := utf8.DecodeRuneInString(term)
	return !isCJK(r) && utf8.RuneCountInString(term) >= minPrefixRunes
}

// Hit is one search result: a section of a page.
type Hit struct {
	Page      string
	PageTitle string
	Anchor    string        // the heading's id; empty for the top of the page
	Heading   template.HTML // the heading (or page title), matches marked
	ShowPage  bool          // the heading is not the page title, so name the page too
	Snippet   template.HTML // text around the best match, matches marked
	score     float64
	doc       uint32
}

// Results is what a search found.
type Results struct {
	Query   string
	Total   int // sections that matched; Hits holds at most maxResults
	Hits    []Hit
	Skipped int // pages not indexed (maxIndexedBytes)
	// Building says the index is not ready: Read of Pages pages are read.
	Building    bool
	Read, Pages int
}

// Search finds the sections that contain every term of q, best first.
func (ix *searchIndex) Search(raw string) Results {
	q := parseQuery(raw)
	res := Results{Query: raw, Skipped: ix.skipped}
	if len(q.terms) == 0 || len(ix.docs) == 0 {
		return res
	}
	ix.expand(&q)
	n := float64(len(ix.docs))
	scores := make([]float64, len(ix.docs))
	matched := make([]uint8, len(ix.docs))
	best := make([]float64, len(ix.docs))
	for ti, t := range q.terms {
		if len(t.variants) == 0 {
			return res // every term must match
		}
		// A section's score for this term is its best variant's; the term's
		// rarity (idf) counts the sections any variant is in.
		clear(best)
		for _, v := range t.variants {
			for _, p := range ix.lookup(v.term) {
				if int(matched[p.doc]) != ti {
					continue // missed an earlier term
				}
				tf := float64(p.body)
				norm := bm25K1 * (1 - bm25B + bm25B*float64(ix.docs[p.doc].length)/math.Max(ix.avgLen, 1))
				s := tf * (bm25K1 + 1) / (tf + norm)
				if p.head > 0 {
					s += headingBoost
				}
				best[p.doc] = math.Max(best[p.doc], v.weight*s)
			}
		}
		df := 0
		for _, s := range best {
			if s > 0 {
				df++
			}
		}
		idf := math.Log(1 + (n-float64(df)+0.5)/(float64(df)+0.5))
		for doc, s := range best {
			if s > 0 {
				scores[doc] += idf * s
				matched[doc]++
			}
		}
	}
	var hits []Hit
	for doc, m := range matched {
		if int(m) == len(q.terms) && ix.hasRuns(doc, &q) {
			hits = append(hits, Hit{doc: uint32(doc), score: scores[doc]})
		}
	}
	res.Total = len(hits)
	byScore := func() {
		sort.Slice(hits, func(i, j int) bool {
			if hits[i].score != hits[j].score {
				return hits[i].score > hits[j].score
			}
			return hits[i].doc < hits[j].doc // site order
		})
	}
	byScore()
	if len(q.terms) > 1 {
		for i := range hits[:min(len(hits), phraseCandidates)] {
			if strings.Contains(ix.docs[hits[i].doc].folded, q.text) {
				hits[i].score *= phraseBonus
			}
		}
		byScore()
	}
	hits = hits[:min(len(hits), maxResults)]
	for i := range hits {
		d := &ix.docs[hits[i].doc]
		hits[i].Page, hits[i].PageTitle, hits[i].Anchor = d.page, d.pageTitle, d.heading.ID
		heading := d.heading.Text
		if heading == "" {
			heading = d.pageTitle
		}
		hits[i].ShowPage = heading != d.pageTitle
		hits[i].Heading = markAll(heading, &q)
		hits[i].Snippet = snippet(d.text, &q)
	}
	res.Hits = hits
	return res
}

// hasRuns reports whether a section contains each CJK run of q as written.
// Bigrams alone would also match "ペーパーとメッセージ" for "ページ".
func (ix *searchIndex) hasRuns(doc int, q *query) bool {
	for _, run := range q.runs {
		if !strings.Contains(ix.docs[doc].folded, run) {
			return false
		}
	}
	return true
}

// matchSpans returns the byte ranges of text that match q's terms, merged
// where they touch, in order.
func matchSpans(text string, q *query) [][2]int {
	want := map[string]bool{}
	var prefixes []string
	for _, t := range q.terms {
		want[t.term] = true
		if isPrefixable(t.term) {
			prefixes = append(prefixes, t.term)
		}
	}
	var spans [][2]int
	tokenize(text, true, func(term []byte, start, end int) {
		ok := want[string(term)]
		for _, p := range prefixes {
			ok = ok || bytes.HasPrefix(term, []byte(p))
		}
		if !ok {
			return
		}
		if n := len(spans); n > 0 && start <= spans[n-1][1] {
			spans[n-1][1] = max(spans[n-1][1], end)
			return
		}
		spans = append(spans, [2]int{start, end})
	})
	return spans
}

// markAll returns text escaped, with every match of q in <mark>.
func markAll(text string, q *query) template.HTML {
	return marked(text, 0, len(text), matchSpans(text, q))
}

// snippet returns about snippetBytes of text around the place where most
// matches sit close together, escaped, matches in <mark>, "…" where cut.
func snippet(text string, q *query) template.HTML {
	spans := matchSpans(text, q)
	start := 0
	if len(spans) > 0 {
		// The window that starts at a match and covers the most matches.
		bestCount, bestStart := 0, spans[0][0]
		for i := range spans {
			count := 0
			for j := i; j < len(spans) && spans[j][1] <= spans[i][0]+snippetBytes; j++ {
				count++
			}
			if count > bestCount {
				bestCount, bestStart = count, spans[i][0]
			}
		}
		start = max(0, bestStart-snippetBefore)
	}
	end := min(len(text), start+snippetBytes)
	for start > 0 && !utf8.RuneStart(text[start]) {
		start--
	}
	for end < len(text) && !utf8.RuneStart(text[end]) {
		end++
	}
	// Cut at a space when one is near, not inside a word.
	if start > 0 {
		if i := strings.IndexAny(text[start:min(end, start+20)], " \n"); i >= 0 {
			start += i + 1
		}
	}
	if end < len(text) {
		if i := strings.LastIndexAny(text[max(start, end-20):end], " \n"); i >= 0 {
			end = max(start, end-20) + i
		}
	}
	out := marked(text, start, end, spans)
	if start > 0 {
		out = "…" + out
	}
	if end < len(text) {
		out += "…"
	}
	return out
}

// marked escapes text[start:end], wrapping the parts inside spans in <mark>;
// line breaks become spaces.
func marked(text string, start, end int, spans [][2]int) template.HTML {
	var b strings.Builder
	b.Grow(end - start + 32)
	pos := start
	write := func(s string) { b.WriteString(html.EscapeString(strings.ReplaceAll(s, "\n", " "))) }
	for _, sp := range spans {
		s, e := max(sp[0], start), min(sp[1], end)
		if s >= e {
			continue
		}
		write(text[pos:s])
		b.WriteString("<mark>")
		write(text[s:e])
		b.WriteString("</mark>")
		pos = e
	}
	write(text[pos:end])
	// Safe: the text is escaped; the only markup is <mark>.
	return template.HTML(b.String())
}
