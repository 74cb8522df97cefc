package storage

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
)

// TestObjectStoreSpecNeedsRightsOnItsReferences: an ObjectStore editor
// (config/rbac's objectstore-editor-role) sets a store's spec only if they
// may get its credentials Secret, and its CA bundle's object, themselves
// (config/admission/objectstore_rights.yaml). Without, they could have the
// manager use keys they cannot read: another store's, at an endpoint or
// for namespaces of their choosing. Every request is a dry run: admission
// runs in full, and nothing reaches the manager.
func TestObjectStoreSpecNeedsRightsOnItsReferences(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	dry := client.DryRunAll
	const user = "platform-op"
	op := asStoreEditor(t, g, user)

	g.Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: managerNS, Name: "op-keys"}})).To(Succeed())
	g.Expect(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: managerNS, Name: "op-ca"}})).To(Succeed())
	t.Cleanup(func() {
		_ = k8s.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: managerNS, Name: "op-keys"}})
		_ = k8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: managerNS, Name: "op-ca"}})
	})
	withKeys := newStore("op-store", "op-keys")
	withCA := withKeys.DeepCopy()
	withCA.Spec.Type, withCA.Spec.Endpoint = storagev1.StoreTypeS3, "https://s3.example.test"
	withCA.Spec.CABundleRef = storagev1.CABundleReference{Kind: storagev1.CABundleConfigMap, Name: "op-ca"}
	// Each is valid: an admin may make it.
	for _, s := range []*storagev1.ObjectStore{withKeys, withCA} {
		g.Expect(k8s.Create(ctx, s.DeepCopy(), dry)).To(Succeed())
	}
	refused := func(err error, field string) {
		t.Helper()
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		g.Expect(err.Error()).To(ContainSubstring("objectstore-reference-rights"))
		g.Expect(err.Error()).To(ContainSubstring(field))
	}

	// The policy is in force once it refuses the editor: the API server
	// learns a new policy a moment after it was created.
	g.Eventually(func(g Gomega) {
		err := op.Create(ctx, withKeys.DeepCopy(), dry)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	}, timeout, poll).Should(Succeed())
	refused(op.Create(ctx, withKeys.DeepCopy(), dry), "credentialsSecretRef")

	// Allowed to get that Secret, by name: the store; not another's keys.
	mayGet(t, g, user, "secrets", "op-keys")
	g.Eventually(func() error { return op.Create(ctx, withKeys.DeepCopy(), dry) }, timeout, poll).Should(Succeed())
	refused(op.Create(ctx, newStore("op-other", credsSecret), dry), "credentialsSecretRef")

	// The CA bundle's object too, a ConfigMap or a Secret: another
	// store's credentials Secret named as a CA bundle is refused.
	refused(op.Create(ctx, withCA.DeepCopy(), dry), "caBundleRef")
	mayGet(t, g, user, "configmaps", "op-ca")
	g.Eventually(func() error { return op.Create(ctx, withCA.DeepCopy(), dry) }, timeout, poll).Should(Succeed())
	secretCA := withCA.DeepCopy()
	secretCA.Spec.CABundleRef = storagev1.CABundleReference{Kind: storagev1.CABundleSecret, Name: credsSecret}
	g.Expect(k8s.Create(ctx, secretCA.DeepCopy(), dry)).To(Succeed())
	refused(op.Create(ctx, secretCA.DeepCopy(), dry), "caBundleRef")

	// A store an admin set, with keys the editor may not get: its endpoint,
	// its namespaces, any of its spec and its in-use finalizer (without
	// which it would go while buckets use it, and a store made again under
	// its name would take them over) are out of their reach; the rest of
	// its metadata is not.
	existing := newStore("op-existing", "absent-keys")
	g.Expect(k8s.Create(ctx, existing)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(ctx, existing) })
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(existing), existing)).To(Succeed())
		g.Expect(existing.Finalizers).To(ContainElement(stores.StoreFinalizer))
	}, timeout, poll).Should(Succeed())
	for what, patch := range map[string]client.Patch{
		"endpoint":          client.RawPatch(types.MergePatchType, []byte(`{"spec":{"endpoint":"http://127.0.0.1:1"}}`)),
		"namespaceSelector": client.RawPatch(types.MergePatchType, []byte(`{"spec":{"namespaceSelector":{"matchLabels":{"team":"mine"}}}}`)),
		"region":            client.RawPatch(types.MergePatchType, []byte(`{"spec":{"region":"eu-west-1"}}`)),
		"endpoint, by a JSON patch": client.RawPatch(types.JSONPatchType,
			[]byte(`[{"op":"replace","path":"/spec/endpoint","value":"http://127.0.0.1:1"}]`)),
		"in-use finalizer": client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)),
	} {
		err := op.Patch(ctx, existing.DeepCopy(), patch, dry)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: %v", what, err)
		g.Expect(err.Error()).To(ContainSubstring("credentialsSecretRef"), what)
	}
	g.Expect(op.Patch(ctx, existing.DeepCopy(),
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"owner":"platform"}}}`)), dry)).To(Succeed())
}

// asStoreEditor binds user to objectstore-editor-role cluster-wide and
// returns a client acting as them, once the authorizer knows the binding.
func asStoreEditor(t *testing.T, g *WithT, user string) client.Client {
	t.Helper()
	ctx := context.Background()
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-objectstore-editor"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "objectstore-editor-role"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	g.Expect(k8s.Create(ctx, crb)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(ctx, crb) })
	cfg := rest.CopyConfig(adminCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() error { return c.List(ctx, &storagev1.ObjectStoreList{}) }, timeout, poll).Should(Succeed())
	return c
}

// mayGet lets user get one object of resource, by name, in the manager's
// namespace.
func mayGet(t *testing.T, g *WithT, user, resource, name string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: managerNS, Name: user + "-get-" + name},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{resource}, ResourceNames: []string{name}, Verbs: []string{"get"}}},
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: managerNS, Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	g.Expect(k8s.Create(ctx, role)).To(Succeed())
	g.Expect(k8s.Create(ctx, rb)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(ctx, rb); _ = k8s.Delete(ctx, role) })
}
