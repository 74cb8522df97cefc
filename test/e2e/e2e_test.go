//go:build e2e

// Package e2e runs Trellis against a fresh local KWOK cluster (real
// kube-apiserver, etcd, controller-manager and scheduler from bin/, simulated
// nodes) with one real node (containerd, kubelet, kube-proxy: hack/lib/node.sh)
// and checks what a user would: samples become Ready, the manager deployed
// from its image serves the sample site through its Service, hands its lease
// over, guards its metrics; the viewer renders in a browser.
//
// Each test sets up the manager it needs (useLocalManager: bin/manager as a
// process; useDeployedManager: `make install` and `make deploy`), so tests
// run in any order; checks over the whole run (no secret in any manager's
// log) run in TestMain after them.
//
// Run with `make test-e2e` (or `make test`).
package e2e

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var (
	root       string // repository root
	bin        string // root/bin
	kubeconfig string
	cluster    string
	// hostIP is the host end of the real node's veth: pods reach the host
	// (the S3 server, the API server's relay) there.
	hostIP string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	wd, _ := os.Getwd()
	root = filepath.Clean(filepath.Join(wd, "..", ".."))
	bin = filepath.Join(root, "bin")
	for _, b := range []string{"manager", "viewer", "kwokctl", "kubectl", "kustomize", "kubelet", "kube-proxy", "containerd",
		"images/trellis-manager.tar", "images/trellis-viewer.tar", "images/trellis-pause.tar"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			fmt.Fprintf(os.Stderr, "bin/%s missing: run `make tools build images`\n", b)
			return 1
		}
	}
	cluster = fmt.Sprintf("trellis-e2e-%d", os.Getpid())
	defer func() {
		if out, err := clusterSh("down", cluster); err != nil {
			fmt.Fprintln(os.Stderr, "deleting cluster:", err, out)
		}
	}()
	out, err := clusterSh("up", cluster, "2", "real-node")
	if err != nil {
		fmt.Fprintln(os.Stderr, "creating cluster:", err, out)
		return 1
	}
	kubeconfig = strings.TrimSpace(out)
	nodeNet, err := clusterSh("node-net", cluster)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	hostIP = strings.Fields(nodeNet)[0]
	start := time.Now()
	if out, err := clusterSh("node-up", cluster); err != nil {
		fmt.Fprintln(os.Stderr, "starting the real node:", err, out)
		return 1
	}
	fmt.Fprintf(os.Stderr, "real node Ready %.1fs after start\n", time.Since(start).Seconds())
	// The manager and the viewers of `default` run on the real node; every
	// other namespace's pods stay on the simulated nodes.
	for _, ns := range []string{"trellis-system", "default"} {
		if out, err := clusterSh("steer", cluster, ns); err != nil {
			fmt.Fprintln(os.Stderr, err, out)
			return 1
		}
	}

	if err := installCRDs(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := createSecrets(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// One bucket-event receiver address for the run: versitygw is told it
	// once, and checks it when it starts, so a manager listens there first.
	eventsAddr = freeAddr()
	if _, err := startLocalManager(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := s3Up(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = stopLocalManager()
		return 1
	}
	defer func() { _ = s3Down() }()

	code := m.Run()

	if err := stopLocalManager(); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		code = 1
	}
	saveDeployedManagerLogs()
	if leaks := secretLeaks(); len(leaks) > 0 {
		fmt.Fprintln(os.Stderr, "FAIL: secret values leaked:\n  "+strings.Join(leaks, "\n  "))
		code = 1
	}
	if code != 0 {
		for _, l := range managerLogs {
			if b, err := os.ReadFile(l); err == nil {
				fmt.Fprintf(os.Stderr, "---- %s (last 60 lines) ----\n%s\n", filepath.Base(l), tail(string(b), 60))
			}
		}
	}
	return code
}

// clusterSh runs hack/cluster.sh and returns its standard output.
func clusterSh(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(root, "hack", "cluster.sh"), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("hack/cluster.sh %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

func installCRDs() error {
	crds, err := exec.Command(filepath.Join(bin, "kustomize"), "build", filepath.Join(root, "config", "crd")).Output()
	if err != nil {
		return fmt.Errorf("kustomize build config/crd: %w", err)
	}
	if _, err := kubectlIn(crds, "apply", "--server-side", "-f", "-"); err != nil {
		return err
	}
	// (The namespace trellis-system exists: TestMain steered it to the real node.)
	_, err = kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
	return err
}

// The S3 server and the bucket-event receiver of this run. The S3 server
// listens on hostIP, where the real node's pods reach it too.
var (
	s3Port      = freePort()
	eventsAddr  string
	eventsToken = "e2e-" + fmt.Sprint(os.Getpid()) + "-bucket-events-token"
)

func s3Endpoint() string { return fmt.Sprintf("http://%s:%d", hostIP, s3Port) }

// createSecrets puts the S3 keys (generated by hack/cluster.sh) and the
// bucket-event token where the manager reads them.
func createSecrets() error {
	if err := exec.Command(filepath.Join(root, "hack", "cluster.sh"), "s3-credentials", cluster).Run(); err != nil {
		return fmt.Errorf("generating S3 credentials: %w", err)
	}
	creds, err := os.ReadFile(filepath.Join(root, ".dev", cluster+"-s3", "credentials"))
	if err != nil {
		return err
	}
	vals := map[string]string{}
	for _, line := range strings.Split(string(creds), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			vals[k] = v
		}
	}
	if _, err := kubectl("-n", "trellis-system", "create", "secret", "generic", "local-s3-credentials",
		"--from-literal=accessKeyID="+vals["AWS_ACCESS_KEY_ID"], "--from-literal=secretAccessKey="+vals["AWS_SECRET_ACCESS_KEY"]); err != nil {
		return err
	}
	_, err = kubectl("-n", "trellis-system", "create", "secret", "generic", "trellis-bucket-events", "--from-literal=token="+eventsToken)
	return err
}

func s3Up() error {
	_, err := clusterSh("s3-up", cluster, fmt.Sprintf("%s:%d", hostIP, s3Port), "http://"+eventsAddr+"/bucket-events?token="+eventsToken)
	return err
}

func s3Down() error {
	_, err := clusterSh("s3-down", cluster)
	return err
}

// freePort is a free TCP port on 127.0.0.1; on hostIP, this run's own
// address, any port is free.
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

func kubectl(args ...string) (string, error) { return kubectlIn(nil, args...) }

func kubectlIn(stdin []byte, args ...string) (string, error) {
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		cmd := exec.Command(filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
		if stdin != nil {
			cmd.Stdin = bytes.NewReader(stdin)
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if err == nil {
			return stdout.String(), nil
		}
		// An Established CRD's kind can still be unknown to server-side
		// apply for a moment (the API server builds its schema apart):
		// nothing was done, so the command is run again.
		if strings.Contains(stderr.String(), crdNotYetServed) && time.Now().Before(deadline) {
			continue
		}
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
}

// crdNotYetServed is how the API server refuses a CRD's kind it does not
// serve yet.
const crdNotYetServed = "There can be a delay between when CustomResourceDefinitions are created and when they are available"

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

func waitHTTP(url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s: %s", url, resp.Status)
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	return last
}

func exitStderr(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
