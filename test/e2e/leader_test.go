//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestLeaderHandOver runs a second manager next to the first: only the leader
// reconciles and runs the periodic Runnables. The leader is then killed with
// SIGKILL (no lease release); the standby must take over within lease
// duration + renew deadline and reconcile. Afterwards the standby is the
// suite's manager.
func TestLeaderHandOver(t *testing.T) {
	leader := useLocalManager(t)
	standby, err := startManagerWith("standby", true)
	if err != nil {
		t.Fatal(err)
	}
	first := leaseHolder()
	if first == "" {
		t.Fatal("no leader lease")
	}
	time.Sleep(3 * time.Second)
	if s := standby.logText(); strings.Contains(s, "Starting workers") || strings.Contains(s, "receiving bucket events") {
		t.Fatalf("the standby started controllers or runnables without leading:\n%s", tail(s, 20))
	}

	killed := time.Now()
	leader.kill()
	current = standby
	// The promise is about the lease: the standby holds it within lease
	// duration + renew deadline. Starting the controllers then takes a cache sync.
	deadline := killed.Add(leaseDuration + renewDeadline + 10*time.Second)
	var tookLease time.Duration
	for !strings.Contains(standby.logText(), "Starting workers") {
		if h := leaseHolder(); tookLease == 0 && h != "" && h != first {
			tookLease = time.Since(killed)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby did not take over:\n%s", tail(standby.logText(), 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
	working := time.Since(killed)
	if tookLease == 0 {
		tookLease = working
	}
	t.Logf("standby held the lease %.1fs and ran its controllers %.1fs after the leader was killed (lease %s, renew deadline %s)",
		tookLease.Seconds(), working.Seconds(), leaseDuration, renewDeadline)
	if tookLease > leaseDuration+renewDeadline {
		t.Errorf("lease taken over after %s, more than lease duration + renew deadline (%s)", tookLease, leaseDuration+renewDeadline)
	}
	if h := leaseHolder(); h == first {
		t.Errorf("the lease is still held by the killed leader %q", h)
	}

	// The new leader reconciles.
	mv := `apiVersion: view.trellis.dev/v1
kind: MarkdownView
metadata: {name: after-failover, namespace: default}
spec:
  markdowns: {index.md: "# Still here"}
`
	if _, err := kubectlIn([]byte(mv), "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	if _, err := kubectl("wait", "--for=condition=Ready", "markdownview/after-failover", "-n", "default", "--timeout=60s"); err != nil {
		t.Fatal(err)
	}
}
