// Command promrule reads Trellis' PrometheusRule and Grafana dashboard for
// the tests (`make test-alerts`, docs/operations.md#monitoring-and-alerts):
//
//	promrule rules -docs docs/operations.md config/prometheus/prometheusrule.yaml OUT
//	promrule names config/prometheus/prometheusrule.yaml config/grafana/trellis-dashboard.json
//
// rules checks that every alert says what to do when it fires, then writes
// the rule file promtool reads: every alert must have a severity label, a
// `for` duration, the annotations summary, description and runbook_url, and
// its runbook_url must point at a heading of the docs that is its name.
//
// names prints, one a line, the metric names the rules' expressions and the
// dashboard's queries use (the e2e suite looks for each in the manager's
// /metrics).
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

// runbookBase is where the alerts' runbooks are published.
const runbookBase = "https://github.com/trellis-dev/trellis/blob/main/docs/operations.md#"

type rule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type ruleFile struct {
	Groups []struct {
		Name     string `json:"name"`
		Interval string `json:"interval,omitempty"`
		Rules    []rule `json:"rules"`
	} `json:"groups"`
}

type prometheusRule struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   map[string]any `json:"metadata"`
	Spec       ruleFile       `json:"spec"`
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "promrule:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: promrule rules|names ARGS")
	}
	switch args[0] {
	case "rules":
		fs := flag.NewFlagSet("rules", flag.ContinueOnError)
		docs := fs.String("docs", "docs/operations.md", "the runbooks: a heading per alert")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if fs.NArg() != 2 {
			return errors.New("usage: promrule rules [-docs FILE] PROMETHEUSRULE OUT")
		}
		return rules(fs.Arg(0), fs.Arg(1), *docs)
	case "names":
		if len(args) < 2 {
			return errors.New("usage: promrule names PROMETHEUSRULE [DASHBOARD.json...]")
		}
		names, err := namesUsed(args[1], args[2:])
		if err != nil {
			return err
		}
		for _, n := range names {
			if _, err := fmt.Fprintln(stdout, n); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unknown command %q: rules or names", args[0])
}

// readRule reads a PrometheusRule.
func readRule(path string) (*prometheusRule, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pr prometheusRule
	if err := yaml.UnmarshalStrict(raw, &pr); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		return nil, fmt.Errorf("%s: a monitoring.coreos.com/v1 PrometheusRule wanted, got %s %s", path, pr.APIVersion, pr.Kind)
	}
	return &pr, nil
}

func rules(in, out, docs string) error {
	pr, err := readRule(in)
	if err != nil {
		return err
	}
	headings, err := headingsOf(docs)
	if err != nil {
		return err
	}
	if err := check(pr.Spec, headings); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	b, err := yaml.Marshal(pr.Spec)
	if err != nil {
		return err
	}
	return os.WriteFile(out, b, 0o644)
}

// check returns what every alert of f lacks.
func check(f ruleFile, headings map[string]bool) error {
	var errs []error
	alerts := 0
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			if r.Labels["severity"] == "" {
				errs = append(errs, fmt.Errorf("alert %s: no severity label", r.Alert))
			}
			if r.For == "" {
				errs = append(errs, fmt.Errorf("alert %s: no for duration (it would fire on one evaluation)", r.Alert))
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					errs = append(errs, fmt.Errorf("alert %s: no %s annotation", r.Alert, a))
				}
			}
			want := runbookBase + strings.ToLower(r.Alert)
			if u := r.Annotations["runbook_url"]; u != "" && u != want {
				errs = append(errs, fmt.Errorf("alert %s: runbook_url %s, want %s", r.Alert, u, want))
			}
			if !headings[r.Alert] {
				errs = append(errs, fmt.Errorf("alert %s: the docs have no heading %q (its runbook)", r.Alert, r.Alert))
			}
		}
	}
	if alerts == 0 {
		errs = append(errs, errors.New("no alerts"))
	}
	return errors.Join(errs...)
}

// headingsOf returns the text of the Markdown headings of a file.
func headingsOf(path string) (map[string]bool, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	s := bufio.NewScanner(bytes.NewReader(raw))
	for s.Scan() {
		line := s.Text()
		if text, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); ok && strings.HasPrefix(line, "#") {
			out[strings.TrimSpace(text)] = true
		}
	}
	return out, s.Err()
}
