//go:build e2e

package e2e

import (
	"bufio"
	"crypto/tls"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMetricsTheAlertsAndDashboardUse scrapes the local manager, with an
// object of every kind Ready (the samples), as a ServiceAccount bound to
// trellis-metrics-reader, and checks that every metric the PrometheusRule
// or the Grafana dashboard names is in its /metrics. `up`, which
// Prometheus itself writes, is not looked for, and trellis_shard_info must
// be absent: this manager is no shard, and the rules would add its counts
// to the shards' (the bench's shards scenario checks a shard serves it).
func TestMetricsTheAlertsAndDashboardUse(t *testing.T) {
	m := useLocalManager(t)
	applySamples(t)
	for _, obj := range []string{"tenant/team-a", "markdownview/markdownview-sample", "objectstore/local-s3",
		"storagebucket/assets", "bucketaccess/assets-writer"} {
		if _, err := kubectl("wait", "--for=condition=Ready", obj, "-n", "default", "--timeout=120s"); err != nil {
			t.Fatal(err)
		}
	}

	cmd := exec.Command("go", "run", "./hack/promrule", "names",
		filepath.Join("config", "prometheus", "prometheusrule.yaml"), filepath.Join("config", "grafana", "trellis-dashboard.json"))
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/promrule names: %v %s", err, exitStderr(err))
	}
	used := strings.Fields(string(out))
	if !slices.Contains(used, "trellis_objects") || !slices.Contains(used, "controller_runtime_reconcile_errors_total") {
		t.Fatalf("hack/promrule names found too little: %q", used)
	}

	for _, args := range [][]string{
		{"-n", "default", "create", "serviceaccount", "e2e-prometheus"},
		{"create", "clusterrolebinding", "e2e-prometheus-metrics", "--clusterrole=trellis-metrics-reader", "--serviceaccount=default:e2e-prometheus"},
	} {
		manifest, err := kubectl(append(args, "--dry-run=client", "-o", "yaml")...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kubectlIn([]byte(manifest), "apply", "--server-side", "-f", "-"); err != nil {
			t.Fatal(err)
		}
	}
	token, err := kubectl("-n", "default", "create", "token", "e2e-prometheus", "--duration=10m")
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // self-signed serving cert of a local process
	}}

	// The binding may take a moment to reach the authorizer; the samples'
	// first bucket check and tenant quota a moment to be recorded.
	var missing []string
	deadline := time.Now().Add(60 * time.Second)
	for {
		names, code, err := scrapeNames(client, "https://"+m.metricsAddr+"/metrics", strings.TrimSpace(token))
		if err != nil {
			t.Fatal(err)
		}
		missing = missing[:0]
		if names["trellis_shard_info"] {
			t.Fatal("a manager that is no shard serves trellis_shard_info")
		}
		for _, n := range used {
			if n != "up" && n != "trellis_shard_info" && !names[n] {
				missing = append(missing, n)
			}
		}
		if code == http.StatusOK && len(missing) == 0 {
			t.Logf("all %d metrics the alerts and dashboard use are served (of %d names)", len(used), len(names))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("scrape %d; metrics the alerts or the dashboard use that the manager does not serve: %q", code, missing)
		}
		time.Sleep(2 * time.Second)
	}
}

// scrapeNames returns the names of the samples a Prometheus text scrape
// holds (a histogram's NAME_bucket, NAME_sum and NAME_count), and the status.
func scrapeNames(c *http.Client, url, token string) (map[string]bool, int, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	names := map[string]bool{}
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return names, resp.StatusCode, nil
	}
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		line := s.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names, resp.StatusCode, s.Err()
}
