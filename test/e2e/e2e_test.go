//go:build e2e

// Package e2e runs Trellis as a real process against a fresh local KWOK
// cluster (real kube-apiserver, etcd, controller-manager and scheduler from
// bin/, simulated nodes) and checks what a user would: samples become Ready,
// the manifests apply, metrics need credentials, the viewer renders.
//
// Run with `make test-e2e` (or `make test`); it needs `make tools build`.
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
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

var (
	root       string // repository root
	bin        string // root/bin
	kubeconfig string
	cluster    string
	managerLog string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	wd, _ := os.Getwd()
	root = filepath.Clean(filepath.Join(wd, "..", ".."))
	bin = filepath.Join(root, "bin")
	for _, b := range []string{"manager", "viewer", "kwokctl", "kubectl", "kustomize"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			fmt.Fprintf(os.Stderr, "bin/%s missing: run `make tools build`\n", b)
			return 1
		}
	}
	cluster = fmt.Sprintf("trellis-e2e-%d", os.Getpid())
	out, err := exec.Command(filepath.Join(root, "hack", "cluster.sh"), "up", cluster, "2").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "creating cluster:", err, string(exitStderr(err)))
		return 1
	}
	kubeconfig = strings.TrimSpace(string(out))
	defer func() {
		if err := exec.Command(filepath.Join(root, "hack", "cluster.sh"), "down", cluster).Run(); err != nil {
			fmt.Fprintln(os.Stderr, "deleting cluster:", err)
		}
	}()

	if err := installCRDs(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := createSecrets(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stopManager, err := startManager()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// versitygw checks its bucket-event webhook when it starts: after the manager.
	s3Port = freePort()
	if err := s3Up(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = stopManager()
		return 1
	}
	defer func() { _ = exec.Command(filepath.Join(root, "hack", "cluster.sh"), "s3-down", cluster).Run() }()
	code := m.Run()
	if err := stopManager(); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
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

func installCRDs() error {
	crds, err := exec.Command(filepath.Join(bin, "kustomize"), "build", filepath.Join(root, "config", "crd")).Output()
	if err != nil {
		return fmt.Errorf("kustomize build config/crd: %w", err)
	}
	if _, err := kubectlIn(crds, "apply", "--server-side", "-f", "-"); err != nil {
		return err
	}
	if _, err := kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"); err != nil {
		return err
	}
	_, err = kubectl("create", "namespace", "trellis-system")
	return err
}

// managerKubeconfig installs config/rbac as `make deploy` would and returns a
// kubeconfig that authenticates as the manager's ServiceAccount, so the
// manager runs with exactly the permissions its markers generate.
func managerKubeconfig() (string, error) {
	rbac, err := exec.Command(filepath.Join(bin, "kustomize"), "build", filepath.Join(root, "test", "e2e", "testdata", "rbac")).Output()
	if err != nil {
		return "", fmt.Errorf("kustomize build rbac: %w %s", err, exitStderr(err))
	}
	if _, err := kubectlIn(rbac, "apply", "--server-side", "-f", "-"); err != nil {
		return "", err
	}
	token, err := kubectl("create", "token", "trellis-controller-manager", "-n", "trellis-system", "--duration=6h")
	if err != nil {
		return "", err
	}
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		return "", err
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	cfg.AuthInfos = map[string]*clientcmdapi.AuthInfo{"manager": {Token: strings.TrimSpace(token)}}
	ctx.AuthInfo = "manager"
	path := filepath.Join(root, ".dev", cluster+"-manager.kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

// managerProcess is one bin/manager run by the suite.
type managerProcess struct {
	name                               string
	cmd                                *exec.Cmd
	log                                string
	logFile                            *os.File
	metricsAddr, probeAddr, eventsAddr string
	done                               chan error
}

var (
	// current is the manager the tests talk to; the leader-election test swaps it.
	current *managerProcess
	// managerLogs lists every manager's log, for the final secret grep.
	managerLogs []string
	// managerConfigPath is the ServiceAccount kubeconfig, made once.
	managerConfigPath string
)

// startManager runs the suite's first manager and waits until it is ready.
func startManager() (func() error, error) {
	m, err := startManagerProcess("manager")
	if err != nil {
		return nil, err
	}
	current = m
	managerLog = m.log
	env.metricsAddr, env.probeAddr = m.metricsAddr, m.probeAddr
	eventsAddr = m.eventsAddr
	return func() error { return current.stop() }, nil
}

// startManagerProcess runs bin/manager, with leader election on short timings,
// as the manager's ServiceAccount, and waits until it is ready.
func startManagerProcess(name string) (*managerProcess, error) {
	return startManagerWith(name, true)
}

// startManagerWith is startManagerProcess with leader election optional.
func startManagerWith(name string, leaderElect bool) (*managerProcess, error) {
	if managerConfigPath == "" {
		p, err := managerKubeconfig()
		if err != nil {
			return nil, err
		}
		managerConfigPath = p
	}
	m := &managerProcess{name: name, metricsAddr: freeAddr(), probeAddr: freeAddr(), eventsAddr: freeAddr(),
		log: filepath.Join(root, ".dev", cluster+"-"+name+".log"), done: make(chan error, 1)}
	logFile, err := os.Create(m.log)
	if err != nil {
		return nil, err
	}
	m.logFile = logFile
	managerLogs = append(managerLogs, m.log)
	m.cmd = exec.Command(filepath.Join(bin, "manager"),
		"--kubeconfig", managerConfigPath,
		"--namespace", "trellis-system",
		"--metrics-bind-address", m.metricsAddr,
		"--health-probe-bind-address", m.probeAddr,
		"--leader-elect="+fmt.Sprint(leaderElect),
		"--bucket-events-bind-address", m.eventsAddr,
		"--bucket-events-token-secret", "trellis-bucket-events",
		"--leader-elect-lease-duration="+leaseDuration.String(), "--leader-elect-renew-deadline="+renewDeadline.String(),
		"--leader-elect-retry-period=1s",
	)
	m.cmd.Stdout, m.cmd.Stderr = logFile, logFile
	if err := m.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { m.done <- m.cmd.Wait() }()
	if err := waitHTTP("http://"+m.probeAddr+"/readyz", 60*time.Second); err != nil {
		_ = m.stop()
		return nil, fmt.Errorf("%s not ready: %w", name, err)
	}
	return m, nil
}

// Leader-election timings of the suite's managers (short, so a hand-over is quick).
const (
	leaseDuration = 6 * time.Second
	renewDeadline = 4 * time.Second
)

// stop sends SIGTERM and checks the manager exits in time, cleanly.
func (m *managerProcess) stop() error {
	defer func() { _ = m.logFile.Close() }()
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-m.done:
		return err
	case <-time.After(45 * time.Second):
		_ = m.cmd.Process.Kill()
		return fmt.Errorf("%s did not exit within 45s of SIGTERM", m.name)
	}
}

// kill ends the manager with SIGKILL: no lease release, no clean-up.
func (m *managerProcess) kill() {
	_ = m.cmd.Process.Kill()
	<-m.done
	_ = m.logFile.Close()
}

// env holds addresses the tests need.
var env struct{ metricsAddr, probeAddr string }

// The S3 server and the bucket-event receiver of this run.
var (
	s3Port      int
	eventsAddr  string
	eventsToken = "e2e-" + fmt.Sprint(os.Getpid()) + "-bucket-events-token"
)

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
	out, err := exec.Command(filepath.Join(root, "hack", "cluster.sh"), "s3-up", cluster, fmt.Sprint(s3Port),
		"http://"+eventsAddr+"/bucket-events?token="+eventsToken).CombinedOutput()
	if err != nil {
		return fmt.Errorf("starting versitygw: %w: %s", err, out)
	}
	return nil
}

func s3Down() error {
	return exec.Command(filepath.Join(root, "hack", "cluster.sh"), "s3-down", cluster).Run()
}

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
	cmd := exec.Command(filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

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
