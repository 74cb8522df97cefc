package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// The chart of convergence time against the number of MarkdownViews, floor
// and Trellis, from this run and, when there is one, a make bench-scale run.

// chart writes the SVG; with fewer than two sizes there is no line to draw.
func (b *bench) chart() error {
	points := append([]convergence(nil), b.points...)
	scale, err := readScalePoints(b.cfg.scaleResults)
	if err != nil {
		return err
	}
	for _, p := range scale {
		if len(points) == 0 || p.Views > points[len(points)-1].Views {
			points = append(points, p)
		}
	}
	if len(points) < 2 {
		return nil
	}
	sort.Slice(points, func(i, j int) bool { return points[i].Views < points[j].Views })

	p := plot.New()
	p.Title.Text = "MarkdownViews created at once: time until all are served"
	p.X.Label.Text = "MarkdownViews"
	p.Y.Label.Text = "seconds"
	p.X.Scale = plot.LogScale{}
	p.Y.Scale = plot.LogScale{}
	p.X.Tick.Marker = countTicks(points)
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	floor, trellis := make(plotter.XYs, len(points)), make(plotter.XYs, len(points))
	for i, pt := range points {
		floor[i] = plotter.XY{X: float64(pt.Views), Y: pt.Floor}
		trellis[i] = plotter.XY{X: float64(pt.Views), Y: pt.Trellis}
	}
	for _, series := range []struct {
		name string
		xys  plotter.XYs
		dash []vg.Length
	}{{"floor: the same objects created directly", floor, []vg.Length{vg.Points(4), vg.Points(3)}}, {"Trellis", trellis, nil}} {
		line, dots, err := plotter.NewLinePoints(series.xys)
		if err != nil {
			return err
		}
		line.Dashes = series.dash
		p.Add(line, dots)
		p.Legend.Add(series.name, line, dots)
	}
	if err := os.MkdirAll(filepath.Dir(b.cfg.chart), 0o755); err != nil {
		return err
	}
	if err := p.Save(16*vg.Centimeter, 10*vg.Centimeter, b.cfg.chart); err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	log("chart written to %s", b.cfg.chart)
	return nil
}

// countTicks puts a labelled tick at every measured size.
func countTicks(points []convergence) plot.ConstantTicks {
	ticks := make(plot.ConstantTicks, 0, len(points))
	for _, p := range points {
		ticks = append(ticks, plot.Tick{Value: float64(p.Views), Label: strconv.Itoa(p.Views)})
	}
	return ticks
}

// readScalePoints reads the convergence points a make bench-scale run saved,
// none if there is no such file.
func readScalePoints(path string) ([]convergence, error) {
	if path == "" {
		return nil, nil
	}
	points, err := readPoints(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return points, err
}

// readPoints reads the convergence points of a saved results file.
func readPoints(path string) ([]convergence, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var saved struct {
		Points []convergence `json:"points"`
	}
	if err := json.Unmarshal(raw, &saved); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return saved.Points, nil
}
