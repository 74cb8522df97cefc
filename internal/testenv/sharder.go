package testenv

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
)

// sharderWebhookPort is where the sharder serves its webhook: its
// configuration offers no other port.
const sharderWebhookPort = 9443

// SharderBuilt says why the sharder cannot run here, nil when it can:
// `make sharder` builds it from kubernetes-controller-sharding's released
// source, which only a checkout with ../shared/peers has.
func SharderBuilt() error {
	for _, p := range []string{"sharder", filepath.Join("sharder-crds", "sharding.timebertt.dev_controllerrings.yaml")} {
		if _, err := os.Stat(filepath.Join(RepoRoot(), "bin", p)); err != nil {
			return fmt.Errorf("bin/%s is missing: `make sharder` builds it from kubernetes-controller-sharding's source in PEERS (../shared/peers), which this checkout lacks", p)
		}
	}
	return nil
}

// Sharder is kubernetes-controller-sharding's sharder (bin/sharder), run
// out of cluster against an envtest API server: its ControllerRing CRD
// installed, its webhook served on 127.0.0.1 with a certificate the API
// server trusts, without leader election.
type Sharder struct{ process }

// StartSharder installs the ControllerRing CRD and runs the sharder as
// cfg's user (cluster-admin in the tests: it is the sharding project's
// component, not the one under test) until Stop.
func StartSharder(ctx context.Context, cfg *rest.Config) (*Sharder, error) {
	if err := SharderBuilt(); err != nil {
		return nil, err
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(RepoRoot(), "bin", "sharder-crds", "sharding.timebertt.dev_controllerrings.yaml")},
	}); err != nil {
		return nil, fmt.Errorf("installing the ControllerRing CRD: %w", err)
	}
	l, err := net.Listen("tcp", ":"+strconv.Itoa(sharderWebhookPort))
	if err != nil {
		return nil, fmt.Errorf("the sharder serves its webhook on port %d, which is taken: %w", sharderWebhookPort, err)
	}
	_ = l.Close()
	dir, err := os.MkdirTemp("", "sharder-")
	if err != nil {
		return nil, err
	}
	s := &Sharder{process{dir: dir, grace: 20 * time.Second}}
	fail := func(err error) error { return errors.Join(err, s.Stop()) }
	// A serving certificate for 127.0.0.1, and the CA the API server is told to trust.
	certs := &envtest.WebhookInstallOptions{LocalServingHost: "127.0.0.1"}
	if err := certs.PrepWithoutInstalling(); err != nil {
		return nil, fail(err)
	}
	defer func() { _ = os.RemoveAll(certs.LocalServingCertDir) }()
	for _, f := range []string{"tls.crt", "tls.key"} {
		raw, err := os.ReadFile(filepath.Join(certs.LocalServingCertDir, f))
		if err != nil {
			return nil, fail(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), raw, 0o600); err != nil {
			return nil, fail(err)
		}
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, fail(err)
	}
	config := fmt.Sprintf(`apiVersion: config.sharding.timebertt.dev/v1alpha1
kind: SharderConfig
leaderElection:
  leaderElect: false
health:
  bindAddress: 127.0.0.1:%d
metrics:
  bindAddress: 127.0.0.1:%d
webhook:
  server:
    certDir: %s
  config:
    clientConfig:
      url: https://127.0.0.1:%d/
      caBundle: %s
`, ports[0], ports[1], dir, sharderWebhookPort, base64.StdEncoding.EncodeToString(certs.LocalServingCAData))
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(config), 0o600); err != nil {
		return nil, fail(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(cfg, kubeconfig); err != nil {
		return nil, fail(err)
	}
	cmd := exec.Command(filepath.Join(RepoRoot(), "bin", "sharder"), "--config="+filepath.Join(dir, "config.yaml"))
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	if err := s.start(cmd); err != nil {
		return nil, fail(fmt.Errorf("starting the sharder: %w", err))
	}
	// Up when its webhook server answers TLS.
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if ended, err := s.exited(); ended {
			return nil, fail(fmt.Errorf("the sharder exited: %w\n%s", err, s.Log()))
		}
		conn, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(sharderWebhookPort), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only: is it up?
		if err == nil {
			_ = conn.Close()
			return s, nil
		}
		if ctx.Err() != nil {
			return nil, fail(ctx.Err())
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil, fail(fmt.Errorf("the sharder's webhook did not answer on port %d\n%s", sharderWebhookPort, s.Log()))
}

// ViewRing is a ControllerRing of MarkdownViews and their children, less
// HTTPRoutes: the API servers of the tests and the bench serve no Gateway
// API.
func ViewRing(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "sharding.timebertt.dev/v1alpha1", "kind": "ControllerRing",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{"resources": []any{map[string]any{
			"group": viewv1.GroupVersion.Group, "resource": "markdownviews",
			"controlledResources": []any{
				map[string]any{"group": "", "resource": "configmaps"},
				map[string]any{"group": "apps", "resource": "deployments"},
				map[string]any{"group": "", "resource": "services"},
				map[string]any{"group": "networking.k8s.io", "resource": "ingresses"},
			},
		}}},
	}}
}

// AllowLeases grants the manager's ServiceAccount the Role of
// config/rbac/leader_election_role.yaml in its namespace, as `make deploy`
// does: leader election, and a shard's own Lease, need it.
func AllowLeases(ctx context.Context, c client.Client) error {
	raw, err := os.ReadFile(filepath.Join(RepoRoot(), "config", "rbac", "leader_election_role.yaml"))
	if err != nil {
		return err
	}
	role := &rbacv1.Role{}
	if err := yaml.Unmarshal(raw, role); err != nil {
		return fmt.Errorf("config/rbac/leader_election_role.yaml: %w", err)
	}
	role.Name, role.Namespace = "trellis-"+role.Name, ManagerNamespace
	binding := &rbacv1.RoleBinding{
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ManagerServiceAccount, Namespace: ManagerNamespace}},
	}
	binding.Name, binding.Namespace = strings.TrimSuffix(role.Name, "-role")+"-rolebinding", ManagerNamespace
	for _, o := range []client.Object{role, binding} {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}
