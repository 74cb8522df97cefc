//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAPIServerRestartUnderTheManager stops the whole control plane (etcd,
// kube-apiserver, controller-manager, scheduler) under a running manager and
// starts it again: the manager keeps running (no restart of its own) and
// resumes its watches. It runs without leader election here: with it, an
// outage longer than the renew deadline makes any controller-runtime manager
// give up leadership and exit, by design, for its Deployment to restart it.
func TestAPIServerRestartUnderTheManager(t *testing.T) {
	if err := scaleDeployedManager(0); err != nil {
		t.Fatal(err)
	}
	if err := stopLocalManager(); err != nil {
		t.Fatalf("stopping the previous manager: %v", err)
	}
	m, err := startManagerWith("no-leader-election", false)
	if err != nil {
		t.Fatal(err)
	}
	current = m // useLocalManager replaces it: it has no leader election

	apply := func(name, text string) {
		t.Helper()
		mv := "apiVersion: view.trellis.dev/v1\nkind: MarkdownView\nmetadata: {name: " + name + ", namespace: default}\nspec:\n  markdowns: {index.md: \"" + text + "\"}\n"
		if _, err := kubectlIn([]byte(mv), "apply", "--server-side", "-f", "-"); err != nil {
			t.Fatal(err)
		}
	}
	apply("rs-before", "# before")
	waitOutput(t, 60*time.Second, "before", "get", "configmap", "markdowns-rs-before", "-o", "jsonpath={.data.index\\.md}")

	kwokctl := func(args ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, "kwokctl"), append([]string{"--name", cluster}, args...)...)
		cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+filepath.Join(root, ".dev", "kwok"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kwokctl %v: %v %s", args, err, out)
		}
	}
	kwokctl("stop", "cluster")
	time.Sleep(5 * time.Second)
	kwokctl("start", "cluster", "--wait", "90s")

	if !m.running() {
		t.Fatalf("the manager exited during the outage: %v", m.waitErr)
	}
	// It resumed its watches: a change to an existing object and a new object
	// are both handled. (Ready itself waits for the restarted scheduler, which
	// on KWOK takes its time to schedule again; that is not ours to measure.)
	apply("rs-before", "# after the restart")
	apply("rs-after", "# new")
	waitOutput(t, 90*time.Second, "after the restart", "get", "configmap", "markdowns-rs-before", "-o", "jsonpath={.data.index\\.md}")
	waitOutput(t, 90*time.Second, "# new", "get", "configmap", "markdowns-rs-after", "-o", "jsonpath={.data.index\\.md}")
	waitOutput(t, 90*time.Second, "viewer-rs-after", "get", "deployment", "viewer-rs-after", "-o", "jsonpath={.metadata.name}")
	// Its first status is written once it is Ready or, still rolling out,
	// 2 minutes after it was created (docs/markdownview.md).
	waitOutput(t, 150*time.Second, "1", "get", "markdownview", "rs-after", "-o", "jsonpath={.status.observedGeneration}")
}

// waitOutput polls a kubectl command until its output contains want.
func waitOutput(t *testing.T, timeout time.Duration, want string, args ...string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out, _ := kubectl(args...)
		if strings.Contains(out, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kubectl %s: %q never contained %q", strings.Join(args, " "), out, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
