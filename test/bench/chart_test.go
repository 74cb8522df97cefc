package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestChartDrawsEveryPointWithScaleResults(t *testing.T) {
	dir := t.TempDir()
	scale := filepath.Join(dir, "scale.json")
	saved, _ := json.Marshal(map[string]any{"points": []convergence{{Views: 10000, Floor: 410, Trellis: 520}}})
	if err := os.WriteFile(scale, saved, 0o644); err != nil {
		t.Fatal(err)
	}
	b := &bench{cfg: config{chart: filepath.Join(dir, "converge.svg"), scaleResults: scale},
		points: []convergence{{Views: 100, Floor: 6, Trellis: 7}, {Views: 300, Floor: 15, Trellis: 18}, {Views: 1000, Floor: 45, Trellis: 52}}}
	if err := b.chart(); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(b.cfg.chart)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "Trellis", "floor", ">100<", ">300<", ">1000<", ">10000<"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("chart lacks %q", want)
		}
	}
}

func TestChartNeedsTwoSizes(t *testing.T) {
	dir := t.TempDir()
	b := &bench{cfg: config{chart: filepath.Join(dir, "converge.svg")}, points: []convergence{{Views: 100, Floor: 6, Trellis: 7}}}
	if err := b.chart(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(b.cfg.chart); !os.IsNotExist(err) {
		t.Errorf("a chart of one point was written: %v", err)
	}
}
