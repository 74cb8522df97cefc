package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
)

// namesUsed returns the metric names used by the alerts and recording rules
// of the PrometheusRule at rulePath and by the queries of the Grafana
// dashboards, sorted, each once.
func namesUsed(rulePath string, dashboards []string) ([]string, error) {
	pr, err := readRule(rulePath)
	if err != nil {
		return nil, err
	}
	var exprs []string
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	for _, d := range dashboards {
		raw, err := os.ReadFile(d)
		if err != nil {
			return nil, err
		}
		var doc any
		if err := json.Unmarshal(raw, &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", d, err)
		}
		exprs = append(exprs, dashboardQueries(doc)...)
	}
	seen := map[string]bool{}
	for _, e := range exprs {
		for _, n := range metricNames(e) {
			seen[n] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

// dashboardQueries returns every PromQL query of a dashboard: each "expr"
// (panel targets, rows' panels included), and the metric of each
// label_values(METRIC, LABEL) variable query.
func dashboardQueries(doc any) []string {
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok {
					switch k {
					case "expr":
						out = append(out, s)
					case "query", "definition":
						if m := labelValues.FindStringSubmatch(s); m != nil {
							out = append(out, m[1])
						}
					}
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	return out
}

var (
	labelValues = regexp.MustCompile(`^\s*label_values\(\s*([^,)]+?)\s*,`)
	// What in PromQL is not a metric name: strings, label matchers, ranges
	// and subqueries, and the label lists of grouping and matching.
	quoted    = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	braces    = regexp.MustCompile(`\{[^{}]*\}`)
	brackets  = regexp.MustCompile(`\[[^\[\]]*\]`)
	grouping  = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	ident     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	keywords  = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true, "bool": true, "offset": true, "and": true, "or": true, "unless": true, "inf": true, "nan": true, "atan2": true}
	afterName = regexp.MustCompile(`^\s*\(`)
)

// metricNames returns the metric names a PromQL expression selects.
func metricNames(expr string) []string {
	e := quoted.ReplaceAllString(expr, `""`)
	e = braces.ReplaceAllString(e, " ")
	e = brackets.ReplaceAllString(e, " ")
	e = grouping.ReplaceAllString(e, " ")
	locs := ident.FindAllStringIndex(e, -1)
	out := make([]string, 0, len(locs))
	for _, loc := range locs {
		name := e[loc[0]:loc[1]]
		if loc[0] > 0 && (isNameChar(e[loc[0]-1]) || e[loc[0]-1] == '.' || e[loc[0]-1] == '$') {
			continue // part of a number (1e3, 0.5), or a dashboard variable
		}
		if keywords[strings.ToLower(name)] || afterName.MatchString(e[loc[1]:]) {
			continue // a keyword, or a function or aggregation called
		}
		out = append(out, name)
	}
	return out
}

func isNameChar(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
