package viewer

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite testdata/xss-corpus.json from xssCorpus")

// TestXSSCorpusFileIsCurrent keeps testdata/xss-corpus.json — which the e2e
// suite loads into a MarkdownView and renders in headless Chromium — equal to
// the corpus the unit tests use.
func TestXSSCorpusFileIsCurrent(t *testing.T) {
	srcs := make([]string, 0, len(xssCorpus))
	for _, tt := range xssCorpus {
		srcs = append(srcs, tt.src)
	}
	want, err := json.MarshalIndent(srcs, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	path := filepath.Join("testdata", "xss-corpus.json")
	if *updateCorpus {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./internal/viewer -run TestXSSCorpusFileIsCurrent -update-corpus)", err)
	}
	if string(got) != string(want) {
		t.Fatalf("%s is stale: go test ./internal/viewer -run TestXSSCorpusFileIsCurrent -update-corpus", path)
	}
}
