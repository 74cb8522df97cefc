package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestMetricNames(t *testing.T) {
	cases := []struct {
		expr string
		want []string
	}{
		{`absent(up{job="trellis"} == 1)`, []string{"up"}},
		{`sum by (controller, result) (rate(controller_runtime_reconcile_total{job="$job"}[$__rate_interval]))`,
			[]string{"controller_runtime_reconcile_total"}},
		{`histogram_quantile(0.99, sum by (le) (rate(a_seconds_bucket{job="x",le!="+Inf"}[5m])))`, []string{"a_seconds_bucket"}},
		{`max by (tenant) (used) / on (tenant) group_left (resource) max without (pod) (hard > 0) > 0.9`, []string{"used", "hard"}},
		{`sum(x) by (store) > 1e3 and bool y offset 5m unless z{a=~"b|c"}`, []string{"x", "y", "z"}},
		{`count(m{name="by (x) rate(y)"}) or vector(0)`, []string{"m"}},
		{`rate(n[5m:1m]) * on() group_right() o`, []string{"n", "o"}},
		{`ns:recorded:rate5m`, []string{"ns:recorded:rate5m"}},
	}
	for _, tc := range cases {
		if got := metricNames(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("metricNames(%s) = %q, want %q", tc.expr, got, tc.want)
		}
	}
}

func TestDashboardQueries(t *testing.T) {
	doc := map[string]any{
		"templating": map[string]any{"list": []any{
			map[string]any{"query": map[string]any{"query": "label_values(trellis_build_info, job)"}},
			map[string]any{"query": "prometheus"},
		}},
		"panels": []any{
			map[string]any{"targets": []any{map[string]any{"expr": "a"}}},
			map[string]any{"type": "row", "panels": []any{map[string]any{"targets": []any{map[string]any{"expr": "b"}}}}},
		},
	}
	got := dashboardQueries(doc)
	slices.Sort(got)
	if want := []string{"a", "b", "trellis_build_info"}; !slices.Equal(got, want) {
		t.Errorf("queries %q, want %q", got, want)
	}
}

// The shipped rules pass the check, and the names the e2e suite looks for
// cover every alert's and panel's metric.
func TestShippedRulesAndDashboard(t *testing.T) {
	root := filepath.Join("..", "..")
	out := filepath.Join(t.TempDir(), "rules.yaml")
	rule := filepath.Join(root, "config", "prometheus", "prometheusrule.yaml")
	if err := rules(rule, out, filepath.Join(root, "docs", "operations.md")); err != nil {
		t.Fatal(err)
	}
	written, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, alert := range []string{"TrellisManagerDown", "TrellisNoLeader", "TrellisReconcileErrors", "TrellisObjectsStalled",
		"TrellisObjectStoreDown", "TrellisStoreSweepFailing", "TrellisTenantQuotaNearLimit"} {
		if !strings.Contains(string(written), "alert: "+alert+"\n") {
			t.Errorf("the rule file lacks %s", alert)
		}
	}
	names, err := namesUsed(rule, []string{filepath.Join(root, "config", "grafana", "trellis-dashboard.json")})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"up", "leader_election_master_status", "controller_runtime_reconcile_errors_total", "trellis_objects",
		"trellis_objectstore_up", "trellis_objectstore_sweeps_total", "trellis_tenant_quota_used", "trellis_tenant_quota_hard",
		"workqueue_depth", "process_resident_memory_bytes", "trellis_build_info", "trellis_storagebucket_checks_total"} {
		if !slices.Contains(names, n) {
			t.Errorf("names %q lack %s", names, n)
		}
	}
}

func TestCheck(t *testing.T) {
	good := rule{Alert: "A", Expr: "up == 0", For: "5m", Labels: map[string]string{"severity": "warning"},
		Annotations: map[string]string{"summary": "s", "description": "d", "runbook_url": runbookBase + "a"}}
	fileOf := func(r rule) ruleFile {
		var f ruleFile
		f.Groups = append(f.Groups, struct {
			Name     string `json:"name"`
			Interval string `json:"interval,omitempty"`
			Rules    []rule `json:"rules"`
		}{Name: "g", Rules: []rule{r}})
		return f
	}
	headings := map[string]bool{"A": true}
	if err := check(fileOf(good), headings); err != nil {
		t.Fatalf("a complete alert: %v", err)
	}
	cases := map[string]struct {
		edit     func(*rule)
		headings map[string]bool
		want     string
	}{
		"no severity":         {edit: func(r *rule) { r.Labels = nil }, want: "no severity"},
		"no for":              {edit: func(r *rule) { r.For = "" }, want: "no for duration"},
		"no description":      {edit: func(r *rule) { delete(r.Annotations, "description") }, want: "no description"},
		"blank summary":       {edit: func(r *rule) { r.Annotations["summary"] = " " }, want: "no summary"},
		"runbook elsewhere":   {edit: func(r *rule) { r.Annotations["runbook_url"] = "https://example.com" }, want: "want " + runbookBase + "a"},
		"no heading for it":   {headings: map[string]bool{"B": true}, want: `no heading "A"`},
		"no alert, only rule": {edit: func(r *rule) { r.Alert, r.Record = "", "r" }, want: "no alerts"},
	}
	for name, tc := range cases {
		r := good
		r.Labels = map[string]string{"severity": "warning"}
		r.Annotations = map[string]string{}
		for k, v := range good.Annotations {
			r.Annotations[k] = v
		}
		if tc.edit != nil {
			tc.edit(&r)
		}
		h := headings
		if tc.headings != nil {
			h = tc.headings
		}
		err := check(fileOf(r), h)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", name, err, tc.want)
		}
	}
}
