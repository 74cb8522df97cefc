package main

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The result table and JSON, and the small helpers every scenario uses.

func (b *bench) add(r row) {
	if math.IsNaN(r.Ratio) || math.IsInf(r.Ratio, 0) {
		r.Ratio = 0 // a floor of 0 (a process not sampled): no ratio, and JSON has no NaN
	}
	if r.Ratio != 0 {
		r.Ratio = math.Round(r.Ratio*100) / 100
	}
	b.rows = append(b.rows, r)
	log("%s | %s: %.2f %s", r.Scenario, r.Figure, r.Value, r.Unit)
}

func (b *bench) report() error {
	fmt.Printf("\n%-58s | %-46s | %10s | %8s | %6s | %-28s | %s\n", "scenario", "figure", "value", "floor", "ratio", "target", "met")
	fmt.Println(strings.Repeat("-", 190))
	for _, r := range b.rows {
		floor, ratio := "", ""
		if r.Floor != 0 {
			floor = fmt.Sprintf("%.2f", r.Floor)
		}
		if r.Ratio != 0 {
			ratio = fmt.Sprintf("%.2f", r.Ratio)
		}
		met := "yes"
		if !r.Met {
			met = "NO"
		}
		fmt.Printf("%-58s | %-46s | %7.2f %-2s | %8s | %6s | %-28s | %s\n", r.Scenario, r.Figure, r.Value, unitShort(r.Unit), floor, ratio, r.Target, met)
	}
	log("results written to %s", b.resultsPath())
	return b.save()
}

// resultsPath is the run's JSON file, named after the time the run started.
func (b *bench) resultsPath() string {
	return filepath.Join(b.cfg.out, b.started.UTC().Format("20060102-150405")+".json")
}

// save writes the rows so far to the run's JSON (and to saveAs).
func (b *bench) save() error {
	if err := os.MkdirAll(b.cfg.out, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(map[string]any{"config": fmt.Sprintf("%+v", b.cfg), "results": b.rows, "points": b.points}, "", "  ")
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	if err := os.WriteFile(b.resultsPath(), data, 0o644); err != nil {
		return err
	}
	if b.cfg.saveAs != "" {
		return os.WriteFile(b.cfg.saveAs, data, 0o644)
	}
	return nil
}

func unitShort(u string) string {
	if len(u) > 2 {
		return u[:2]
	}
	return u
}

func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// parallel runs f(0..n-1) on workers goroutines; the first error wins.
func parallel(n, workers int, f func(int) error) error {
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil && !apierrors.IsAlreadyExists(err) {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

func waitFor(timeout time.Duration, cond func() (bool, error), every ...time.Duration) error {
	poll := 500 * time.Millisecond
	if len(every) > 0 {
		poll = every[0]
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		time.Sleep(poll)
	}
	return fmt.Errorf("timed out after %s", timeout)
}

func (b *bench) kubectlIn(stdin []byte, args ...string) error {
	cmd := exec.Command(filepath.Join(b.bin, "kubectl"), append([]string{"--kubeconfig", b.kubeconfig}, args...)...)
	if stdin != nil {
		cmd.Stdin = strings.NewReader(string(stdin))
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

func freeAddr() string { return fmt.Sprintf("127.0.0.1:%d", freePort()) }

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

func exitStderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
