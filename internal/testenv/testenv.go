// Package testenv starts a real kube-apiserver and etcd (envtest, with the
// binaries `make tools` builds into bin/) for the controllers' integration
// tests, and counts the writes a client sends so tests can assert "zero writes".
package testenv

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// RepoRoot is the repository's top directory, found from this file.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Start runs a control plane with the CRDs from config/crd/bases installed,
// and those in the further directories given (GatewayAPICRDs, say). It
// fails when the binaries are missing instead of downloading anything.
func Start(scheme *k8sruntime.Scheme, crdDirs ...string) (*envtest.Environment, *rest.Config, error) {
	assets := assetsDir()
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			return nil, nil, fmt.Errorf("%s not found in %s: run `make tools` first", bin, assets)
		}
	}
	env := &envtest.Environment{
		Scheme:                scheme,
		CRDDirectoryPaths:     append([]string{filepath.Join(RepoRoot(), "config", "crd", "bases")}, crdDirs...),
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop() // Start may fail after launching etcd and the API server
		return nil, nil, fmt.Errorf("starting envtest: %w", err)
	}
	return env, cfg, nil
}

// assetsDir is where `make tools` put the pinned binaries (and the Gateway
// API CRDs): $KUBEBUILDER_ASSETS, else bin/.
func assetsDir() string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	return filepath.Join(RepoRoot(), "bin")
}

// GatewayAPICRDs is the directory of the Gateway API's standard-channel CRDs
// that `make gateway-api-crds` (part of `make tools`) copies into bin/ from
// the sigs.k8s.io/gateway-api module go.mod pins.
func GatewayAPICRDs() (string, error) {
	dir := filepath.Join(assetsDir(), "gateway-api-crds")
	if _, err := os.Stat(filepath.Join(dir, "gateway.networking.k8s.io_httproutes.yaml")); err != nil {
		return "", fmt.Errorf("the Gateway API CRDs are not in %s: run `make gateway-api-crds` (or `make tools`) first", dir)
	}
	return dir, nil
}

// WriteCounter counts mutating requests (POST, PUT, PATCH, DELETE) sent through
// a rest.Config it wrapped.
type WriteCounter struct {
	n     atomic.Int64
	mu    sync.Mutex
	paths []string
}

// Wrap returns a copy of cfg whose requests are counted.
func (c *WriteCounter) Wrap(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			switch req.Method {
			case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
				c.n.Add(1)
				c.mu.Lock()
				c.paths = append(c.paths, req.Method+" "+req.URL.Path)
				c.mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	return out
}

// Writes returns the number of writes so far and what they were.
func (c *WriteCounter) Writes() (int64, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n.Load(), append([]string(nil), c.paths...)
}

// Reset forgets the writes counted so far.
func (c *WriteCounter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n.Store(0)
	c.paths = nil
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// ManagerServiceAccount is who the manager runs as in tests that check its RBAC.
const (
	ManagerNamespace      = "trellis-system"
	ManagerServiceAccount = "trellis-controller-manager"
)

// AsManager returns a copy of cfg that impersonates the manager's
// ServiceAccount, bound to exactly the ClusterRole generated into
// config/rbac/role.yaml: a controller that needs a permission its markers do
// not grant fails its tests.
func AsManager(ctx context.Context, cfg *rest.Config, c client.Client) (*rest.Config, error) {
	raw, err := os.ReadFile(filepath.Join(RepoRoot(), "config", "rbac", "role.yaml"))
	if err != nil {
		return nil, err
	}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ManagerNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ManagerServiceAccount, Namespace: ManagerNamespace}},
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ManagerServiceAccount, Namespace: ManagerNamespace}}
	// role.yaml holds the ClusterRole and, for namespaced rules, a Role in
	// "system" (kustomize's placeholder for the manager's namespace).
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil || meta.Kind == "" {
			continue
		}
		switch meta.Kind {
		case "ClusterRole":
			role := &rbacv1.ClusterRole{}
			if err := yaml.Unmarshal([]byte(doc), role); err != nil {
				return nil, fmt.Errorf("config/rbac/role.yaml: %w", err)
			}
			role.Name = "trellis-manager-role"
			objs = append(objs, role, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "trellis-manager-rolebinding"},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
				Subjects:   subjects,
			})
		case "Role":
			role := &rbacv1.Role{}
			if err := yaml.Unmarshal([]byte(doc), role); err != nil {
				return nil, fmt.Errorf("config/rbac/role.yaml: %w", err)
			}
			role.Name, role.Namespace = "trellis-manager-role", ManagerNamespace
			objs = append(objs, role, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "trellis-manager-rolebinding", Namespace: ManagerNamespace},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
				Subjects:   subjects,
			})
		}
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	out := rest.CopyConfig(cfg)
	out.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ManagerNamespace + ":" + ManagerServiceAccount}
	return out, nil
}

// FieldManagers lists who manages obj's fields, per subresource ("" for the
// object itself): what `kubectl get -o yaml --show-managed-fields` shows.
func FieldManagers(obj metav1.Object) map[string][]string {
	out := map[string][]string{}
	for _, e := range obj.GetManagedFields() {
		out[e.Subresource] = append(out[e.Subresource], e.Manager)
	}
	return out
}

// ApplyClusterRoles creates the ClusterRoles of a file of config/ (relative
// to the repository), as `make deploy` would install them.
func ApplyClusterRoles(ctx context.Context, c client.Client, path string) error {
	raw, err := os.ReadFile(filepath.Join(RepoRoot(), path))
	if err != nil {
		return err
	}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		role := &rbacv1.ClusterRole{}
		if err := yaml.Unmarshal([]byte(doc), role); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if role.Kind != "ClusterRole" {
			continue
		}
		if err := c.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s: ClusterRole %s: %w", path, role.Name, err)
		}
	}
	return nil
}

// AsNamespaceEditor returns a copy of cfg that acts as user, bound in each of
// namespaces to the built-in edit ClusterRole and to the extra ClusterRoles
// given. envtest runs no kube-controller-manager, so edit is empty here (its
// rules come by aggregation): the extra roles are what aggregation would have
// put into it in a real cluster, and all the user may do.
func AsNamespaceEditor(ctx context.Context, cfg *rest.Config, c client.Client, user string, namespaces []string, extra ...string) (*rest.Config, error) {
	for _, ns := range namespaces {
		for _, role := range append([]string{"edit"}, extra...) {
			rb := &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-" + role},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
				Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
			}
			if err := c.Create(ctx, rb); err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, err
			}
			if err := waitBound(ctx, c, user, ns, role); err != nil {
				return nil, err
			}
		}
	}
	out := rest.CopyConfig(cfg)
	out.Impersonate = rest.ImpersonationConfig{UserName: user}
	return out, nil
}

// waitBound waits until the API server's authorizer grants user in ns the
// first rule of the ClusterRole role: it learns a new RoleBinding
// from its own informer, a moment after the create answered, and a request
// made in between is refused. A role with no such rule (envtest's empty
// edit) has nothing to wait for.
func waitBound(ctx context.Context, c client.Client, user, ns, role string) error {
	cr := &rbacv1.ClusterRole{}
	if err := c.Get(ctx, client.ObjectKey{Name: role}, cr); err != nil {
		return fmt.Errorf("ClusterRole %s: %w", role, err)
	}
	attrs, ok := firstResourceRule(cr.Rules)
	if !ok {
		return nil
	}
	attrs.Namespace = ns
	deadline := time.Now().Add(30 * time.Second)
	for {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, ResourceAttributes: &attrs,
		}}
		if err := c.Create(ctx, review); err != nil {
			return fmt.Errorf("asking whether %s may %s %s in %s: %w", user, attrs.Verb, attrs.Resource, ns, err)
		}
		if review.Status.Allowed {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s is bound to %s in %s, and still may not %s %s", user, role, ns, attrs.Verb, attrs.Resource)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// firstResourceRule is a request the first rule about resources grants,
// as the rule writes it: a "*" is asked as "*", which only a "*" rule
// grants, and a rule of named objects is asked for its first name.
func firstResourceRule(rules []rbacv1.PolicyRule) (authorizationv1.ResourceAttributes, bool) {
	for _, r := range rules {
		if len(r.Verbs) == 0 || len(r.Resources) == 0 || len(r.APIGroups) == 0 {
			continue
		}
		resource, sub, _ := strings.Cut(r.Resources[0], "/")
		attrs := authorizationv1.ResourceAttributes{Verb: r.Verbs[0], Group: r.APIGroups[0], Resource: resource, Subresource: sub}
		if len(r.ResourceNames) > 0 {
			attrs.Name = r.ResourceNames[0]
		}
		return attrs, true
	}
	return authorizationv1.ResourceAttributes{}, false
}
