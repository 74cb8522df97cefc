//go:build e2e

package e2e

import (
	"fmt"
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

// The suite has one manager at a time: a local process (useLocalManager) or
// the Deployment of config/default (useDeployedManager). Each test asks for
// the one it needs; switching stops the other.

// managerProcess is one bin/manager run by the suite.
type managerProcess struct {
	name                               string
	leaderElect                        bool
	cmd                                *exec.Cmd
	log                                string
	logFile                            *os.File
	metricsAddr, probeAddr, eventsAddr string
	exited                             chan struct{} // closed when the process has exited
	waitErr                            error         // its exit status, once exited is closed
}

var (
	// current is the local manager the tests talk to, nil when none runs.
	current *managerProcess
	// managerLogs lists every manager's log, local or deployed, for the secret grep.
	managerLogs []string
	// managerConfigPath is the ServiceAccount kubeconfig, made once.
	managerConfigPath string
	// managersStarted numbers the local managers' logs.
	managersStarted int
)

// Leader-election timings of the suite's local managers: short, so a
// hand-over is quick, but with room for a loaded machine (a 4s renew
// deadline lost the lease while Chromium ran the XSS corpus).
const (
	leaseDuration = 12 * time.Second
	renewDeadline = 8 * time.Second
)

// useLocalManager makes a local manager with leader election the suite's
// manager: the deployed one, if any, is scaled to zero; a local one without
// leader election is replaced.
func useLocalManager(t *testing.T) *managerProcess {
	t.Helper()
	if err := scaleDeployedManager(0); err != nil {
		t.Fatal(err)
	}
	if current != nil && current.running() && current.leaderElect {
		return current
	}
	m, err := startLocalManager()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// startLocalManager replaces the current local manager, if any, with a new
// one with leader election, and waits until it leads.
func startLocalManager() (*managerProcess, error) {
	if err := stopLocalManager(); err != nil {
		return nil, fmt.Errorf("stopping the previous manager: %w", err)
	}
	m, err := startManagerWith("manager", true)
	if err != nil {
		return nil, err
	}
	current = m
	// A deployed pod scaled away released the lease; a killed local manager's
	// lease runs out: either way the new manager leads within this time.
	deadline := time.Now().Add(leaseDuration + renewDeadline + 30*time.Second)
	for !strings.Contains(m.logText(), "Starting workers") { // only the leader starts its controllers
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s did not take the lease (holder %q):\n%s", m.name, leaseHolder(), tail(m.logText(), 20))
		}
		time.Sleep(200 * time.Millisecond)
	}
	return m, nil
}

// stopLocalManager stops the current local manager, if any, and reports how it exited.
func stopLocalManager() error {
	if current == nil {
		return nil
	}
	m := current
	current = nil
	return m.stop()
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

// startManagerWith runs bin/manager as the manager's ServiceAccount, with
// leader election (on short timings) or without, and waits until it is ready.
// NAME goes into its log's name.
func startManagerWith(name string, leaderElect bool) (*managerProcess, error) {
	if managerConfigPath == "" {
		p, err := managerKubeconfig()
		if err != nil {
			return nil, err
		}
		managerConfigPath = p
	}
	managersStarted++
	name = fmt.Sprintf("%s-%d", name, managersStarted)
	m := &managerProcess{name: name, leaderElect: leaderElect, metricsAddr: freeAddr(), probeAddr: freeAddr(), eventsAddr: eventsAddr,
		log: filepath.Join(root, ".dev", cluster+"-"+name+".log"), exited: make(chan struct{})}
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
	go func() { m.waitErr = m.cmd.Wait(); close(m.exited) }()
	if err := waitHTTP("http://"+m.probeAddr+"/readyz", 60*time.Second); err != nil {
		_ = m.stop()
		return nil, fmt.Errorf("%s not ready: %w", name, err)
	}
	return m, nil
}

func (m *managerProcess) running() bool {
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and checks the manager exits in time, cleanly.
func (m *managerProcess) stop() error {
	defer func() { _ = m.logFile.Close() }()
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
		return m.waitErr
	case <-time.After(45 * time.Second):
		_ = m.cmd.Process.Kill()
		return fmt.Errorf("%s did not exit within 45s of SIGTERM", m.name)
	}
}

// kill ends the manager with SIGKILL: no lease release, no clean-up.
func (m *managerProcess) kill() {
	_ = m.cmd.Process.Kill()
	<-m.exited
	_ = m.logFile.Close()
}

func (m *managerProcess) logText() string {
	b, _ := os.ReadFile(m.log)
	return string(b)
}

// The manager as `make deploy` installs it.
const (
	deployment     = "trellis-controller-manager"
	managerLabel   = "app.kubernetes.io/component=manager"
	deployedImage  = "trellis-manager:dev" // what `make images` builds and node_up imports
	leaseName      = "trellis.trellis.dev"
	managerNS      = "trellis-system"
	managerAccount = "trellis-controller-manager"
)

// deployed tells whether `make deploy` ran in this cluster.
var deployed bool

// useDeployedManager makes the manager installed as the README says
// (`make install`, `make deploy IMG=...`) the suite's manager, with its two
// replicas Available and one of them holding the lease. A local manager is
// stopped first.
func useDeployedManager(t *testing.T) {
	t.Helper()
	if err := stopLocalManager(); err != nil {
		t.Fatalf("stopping the local manager: %v", err)
	}
	if !deployed {
		for _, target := range [][]string{{"install"}, {"deploy", "IMG=" + deployedImage}} {
			cmd := exec.Command("make", append([]string{"--no-print-directory", "-C", root}, target...)...)
			cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("make %s: %v\n%s", strings.Join(target, " "), err, out)
			}
		}
		deployed = true
	}
	if _, err := kubectl("-n", managerNS, "scale", "deployment/"+deployment, "--replicas=2"); err != nil {
		t.Fatal(err)
	}
	if _, err := kubectl("-n", managerNS, "rollout", "status", "deployment/"+deployment, "--timeout=180s"); err != nil {
		t.Fatalf("the deployed manager did not become Available: %v\n%s", err, describeManagerPods())
	}
	deadline := time.Now().Add(60 * time.Second)
	for !strings.HasPrefix(leaseHolder(), deployment+"-") {
		if time.Now().After(deadline) {
			t.Fatalf("no deployed manager pod took the lease (holder %q)", leaseHolder())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// scaleDeployedManager sets the deployed manager's replicas (after saving
// its pods' logs) and waits until exactly that many pods exist.
func scaleDeployedManager(replicas int) error {
	if !deployed {
		return nil
	}
	saveDeployedManagerLogs()
	if _, err := kubectl("-n", managerNS, "scale", "deployment/"+deployment, fmt.Sprintf("--replicas=%d", replicas)); err != nil {
		return err
	}
	deadline := time.Now().Add(90 * time.Second)
	for len(managerPods()) != replicas {
		if time.Now().After(deadline) {
			return fmt.Errorf("the deployed manager has %d pods, want %d", len(managerPods()), replicas)
		}
		time.Sleep(300 * time.Millisecond)
	}
	return nil
}

// managerPods names the deployed manager's pods.
func managerPods() []string {
	out, err := kubectl("-n", managerNS, "get", "pods", "-l", managerLabel, "-o", "jsonpath={.items[*].metadata.name}")
	if err != nil {
		return nil
	}
	return strings.Fields(out)
}

// leaseHolder is the leader-election Lease's holder: "POD_UUID" for a pod.
func leaseHolder() string {
	out, _ := kubectl("get", "lease", leaseName, "-n", managerNS, "-o", "jsonpath={.spec.holderIdentity}")
	return strings.TrimSpace(out)
}

// describeManagerPods ends with the nodes' taints: a pod left Pending on a
// node with DiskPressure (this machine's disk nearly full) says nothing of
// it in its own description.
func describeManagerPods() string {
	out, _ := kubectl("-n", managerNS, "describe", "pods", "-l", managerLabel)
	nodes, _ := kubectl("get", "nodes", "-o",
		`custom-columns=NODE:.metadata.name,TAINTS:.spec.taints[*].key,UNSCHEDULABLE:.spec.unschedulable`)
	return tail(out, 60) + "\n" + nodes
}

// saveDeployedManagerLogs writes each deployed manager pod's log to .dev and
// adds it to managerLogs (once per pod).
func saveDeployedManagerLogs() {
	if !deployed {
		return
	}
	for _, pod := range managerPods() {
		out, err := kubectl("-n", managerNS, "logs", pod)
		if err != nil {
			continue
		}
		path := filepath.Join(root, ".dev", cluster+"-pod-"+pod+".log")
		if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
			continue
		}
		seen := false
		for _, l := range managerLogs {
			seen = seen || l == path
		}
		if !seen {
			managerLogs = append(managerLogs, path)
		}
	}
}

// secretLeaks greps what the managers wrote (their logs, local and deployed)
// and what users can read (Events and the status of every Trellis object)
// for the S3 keys and the bucket-event token. TestMain runs it after every
// test has generated activity.
func secretLeaks() []string {
	creds, err := os.ReadFile(filepath.Join(root, ".dev", cluster+"-s3", "credentials"))
	if err != nil {
		return []string{err.Error()}
	}
	secrets := []string{eventsToken}
	for _, line := range strings.Split(string(creds), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && k == "AWS_SECRET_ACCESS_KEY" {
			secrets = append(secrets, v)
		}
	}
	texts := map[string]string{}
	for _, l := range managerLogs {
		b, err := os.ReadFile(l)
		if err != nil {
			return []string{err.Error()}
		}
		texts["log "+filepath.Base(l)] = string(b)
	}
	events, err := kubectl("get", "events", "-A", "-o", "yaml")
	if err != nil {
		return []string{err.Error()}
	}
	texts["Events"] = events
	objects, err := kubectl("get", "markdownviews,storagebuckets,objectstores,tenants", "-A", "-o", "yaml")
	if err != nil {
		return []string{err.Error()}
	}
	texts["object status"] = objects
	var leaks []string
	for _, s := range secrets {
		if len(s) < 8 {
			return []string{fmt.Sprintf("secret %q too short to grep for", s)}
		}
		for where, text := range texts {
			if strings.Contains(text, s) {
				leaks = append(leaks, "a secret value appears in the "+where)
			}
		}
	}
	return leaks
}
