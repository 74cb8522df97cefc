package tenancy

import (
	"context"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// copyItem is an item of spec.copies.
func copyItem(kind tenancyv1.CopyKind, name, fromNamespace, fromName string) tenancyv1.TenantCopy {
	return tenancyv1.TenantCopy{Kind: kind, Name: name, From: tenancyv1.CopySource{Namespace: fromNamespace, Name: fromName}}
}

// grantCopySource is what a source namespace's owner does to let Tenants
// copy its Secrets: bind config/rbac's copy-source ClusterRole to the manager.
func grantCopySource(g Gomega, ns string) {
	ctx := context.Background()
	g.Expect(testenv.ApplyClusterRoles(ctx, k8s, "config/rbac/copy_source_role.yaml")).To(Succeed())
	g.Expect(k8s.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trellis-copy-source"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "copy-source"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: testenv.ManagerNamespace, Name: testenv.ManagerServiceAccount}},
	})).To(Succeed())
}

// platformOperator is a client of someone holding config/rbac's
// tenant-editor-role, and allowed to read the Secrets and ConfigMaps of
// the namespaces readable.
func platformOperator(g Gomega, user string, readable ...string) client.Client {
	ctx := context.Background()
	g.Expect(testenv.ApplyClusterRoles(ctx, k8s, "config/rbac/tenant_editor_role.yaml")).To(Succeed())
	g.Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-tenant-editor"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "tenant-editor-role"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	})).To(Succeed())
	for _, ns := range readable {
		g.Expect(k8s.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-read"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"get"}}}})).To(Succeed())
		g.Expect(k8s.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-read"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user + "-read"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}})).To(Succeed())
	}
	return clientAs(g, user)
}

// expectSecretCopy waits until ns holds the copy regcred with data.
func expectSecretCopy(g Gomega, ns string, data map[string][]byte) *corev1.Secret {
	got := &corev1.Secret{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "regcred"}, got)).To(Succeed())
		g.Expect(got.Data).To(Equal(data))
		g.Expect(got.Type).To(Equal(corev1.SecretTypeDockerConfigJson))
		g.Expect(got.Annotations).To(HaveKey(CopyOfAnnotation))
	}, timeout, interval).Should(Succeed())
	return got
}

// expectConfigMapCopy waits until ns holds the copy name with data.
func expectConfigMapCopy(g Gomega, ns, name string, data map[string]string) *corev1.ConfigMap {
	got := &corev1.ConfigMap{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, got)).To(Succeed())
		g.Expect(got.Data).To(Equal(data))
	}, timeout, interval).Should(Succeed())
	return got
}

// TestTenantCopies: a pull Secret and a ConfigMap of a source namespace are
// in every namespace of the tenant, a requested one too (before its admins
// are bound there); an edit of the source reaches every copy; a team's own
// object of a copy's name is left untouched and reported; removing an item
// removes its copies, and nothing else.
func TestTenantCopies(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	for _, ns := range []string{"cps-src"} {
		g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	pull := map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"registry.example.com":{"auth":"YTpi"}}}`)}
	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "cps-src", Name: "regcred", Labels: map[string]string{"source-only": "x"}},
		Type: corev1.SecretTypeDockerConfigJson, Data: pull}
	g.Expect(k8s.Create(ctx, src)).To(Succeed())
	ca := map[string]string{"ca.crt": "-----BEGIN CERTIFICATE-----"}
	g.Expect(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "cps-src", Name: "ca-bundle"}, Data: ca})).To(Succeed())
	g.Expect(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "cps-src", Name: "settings"}, Data: map[string]string{"a": "from the source"}})).To(Succeed())
	grantCopySource(g, "cps-src")
	operator := platformOperator(g, "cps-operator", "cps-src")

	tenant := newTenant("cps", "cps-", "a", "b")
	tenant.Spec.SelfService = tenancyv1.SelfService{MaxNamespaces: 1}
	tenant.Spec.Copies = []tenancyv1.TenantCopy{
		copyItem(tenancyv1.CopySecret, "regcred", "cps-src", "regcred"),
		copyItem(tenancyv1.CopyConfigMap, "ca-bundle", "cps-src", "ca-bundle"),
	}
	g.Expect(operator.Create(ctx, tenant)).To(Succeed())
	eventuallyReady(g, "cps")
	for _, ns := range []string{"cps-a", "cps-b"} {
		s := expectSecretCopy(g, ns, pull)
		g.Expect(s.Labels).NotTo(HaveKey("source-only"), "the source's labels are not copied")
		g.Expect(s.Labels).To(HaveKeyWithValue(TenantLabel, "cps"))
		expectConfigMapCopy(g, ns, "ca-bundle", ca)
	}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "cps"}, tenant)).To(Succeed())
	g.Expect(tenant.Status.Copies).To(HaveLen(2))
	for _, c := range tenant.Status.Copies {
		g.Expect(c.State).To(Equal(tenancyv1.CopyReady))
	}

	t.Run("a requested namespace holds the copies before its admins are bound", func(t *testing.T) {
		g := NewWithT(t)
		letRequest(g, "cps-admins", "cps-a")
		admin := clientAs(g, "alice", "cps-admins")
		g.Eventually(func() error { return admin.Create(ctx, newRequest("cps-a", "extra")) }, timeout, interval).Should(Succeed())
		s := expectSecretCopy(g, "cps-extra", pull)
		cm := expectConfigMapCopy(g, "cps-extra", "ca-bundle", ca)
		binding := &rbacv1.RoleBinding{}
		g.Eventually(func() error {
			return k8s.Get(ctx, client.ObjectKey{Namespace: "cps-extra", Name: adminRoleBindingName}, binding)
		}, timeout, interval).Should(Succeed())
		// etcd's revisions order the writes: each copy was created (and not
		// written since) before the binding was.
		revision := func(o client.Object) int64 {
			n, err := strconv.ParseInt(o.GetResourceVersion(), 10, 64)
			g.Expect(err).NotTo(HaveOccurred())
			return n
		}
		g.Expect(revision(s)).To(BeNumerically("<", revision(binding)))
		g.Expect(revision(cm)).To(BeNumerically("<", revision(binding)))
	})

	t.Run("an edit of the source reaches every copy", func(t *testing.T) {
		g := NewWithT(t)
		edited := map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"registry.example.com":{"auth":"YzpkZQ=="}}}`)}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(src), src)).To(Succeed())
		src.Data = edited
		g.Expect(k8s.Update(ctx, src)).To(Succeed())
		for _, ns := range []string{"cps-a", "cps-b", "cps-extra"} {
			expectSecretCopy(g, ns, edited)
		}
	})

	t.Run("a team's own object of a copy's name is left untouched, and reported", func(t *testing.T) {
		g := NewWithT(t)
		own := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "cps-b", Name: "settings"}, Data: map[string]string{"a": "the team's"}}
		g.Expect(k8s.Create(ctx, own)).To(Succeed())
		// Read again on a conflict: the manager writes the Tenant's status meanwhile.
		g.Eventually(func() error {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "cps"}, tenant)).To(Succeed())
			tenant.Spec.Copies = append(tenant.Spec.Copies, copyItem(tenancyv1.CopyConfigMap, "settings", "cps-src", "settings"))
			return operator.Update(ctx, tenant)
		}, timeout, interval).Should(Succeed())
		expectConfigMapCopy(g, "cps-a", "settings", map[string]string{"a": "from the source"})
		g.Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "cps"}, tenant)).To(Succeed())
			g.Expect(conditions.Get(tenant.Status.Conditions, conditions.Stalled)).NotTo(BeNil())
			g.Expect(conditions.Get(tenant.Status.Conditions, conditions.Ready).Reason).To(Equal(ReasonNamespaceConflict))
			g.Expect(nsState(g, "cps", "cps-b").State).To(Equal(tenancyv1.NamespaceConflict))
			g.Expect(nsState(g, "cps", "cps-b").Message).To(ContainSubstring("ConfigMap cps-b/settings exists and was not created by this Tenant"))
		}, timeout, interval).Should(Succeed())
		got := &corev1.ConfigMap{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(own), got)).To(Succeed())
		g.Expect(got.Data).To(Equal(own.Data))
		g.Expect(got.Labels).To(BeEmpty())
		g.Expect(got.ResourceVersion).To(Equal(own.ResourceVersion), "never written")
	})

	t.Run("removing an item removes its copies, and nothing else", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func() error {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "cps"}, tenant)).To(Succeed())
			tenant.Spec.Copies = tenant.Spec.Copies[:1] // the Secret alone
			return operator.Update(ctx, tenant)
		}, timeout, interval).Should(Succeed())
		for _, ns := range []string{"cps-a", "cps-b", "cps-extra"} {
			g.Eventually(func() bool {
				return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ca-bundle"}, &corev1.ConfigMap{}))
			}, timeout, interval).Should(BeTrue(), ns)
			expectSecretCopy(g, ns, src.Data)
		}
		g.Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: "cps-a", Name: "settings"}, &corev1.ConfigMap{}))
		}, timeout, interval).Should(BeTrue())
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "cps-b", Name: "settings"}, &corev1.ConfigMap{})).To(Succeed(), "the team's own stays")
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(src), &corev1.Secret{})).To(Succeed(), "the source stays")
		eventuallyReady(g, "cps")
	})
	deleteTenant(g, "cps")
}

// TestCopyAttacks: what a copy could give someone, each tried as the actor.
// A platform operator cannot have a Secret copied that they may not read; a
// Secret is never read from a namespace whose owner did not allow it, even
// on a cluster admin's Tenant; a tenant admin can neither change nor delete
// a copy by any route, nor make an object of theirs pass for one.
func TestCopyAttacks(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	for _, ns := range []string{"cpa-src", "cpa-vault", "cpa-nogrant"} {
		g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	for _, ns := range []string{"cpa-src", "cpa-vault", "cpa-nogrant"} {
		g.Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "token"},
			Data: map[string][]byte{"token": []byte("s3cr3t-" + ns)}})).To(Succeed())
	}
	grantCopySource(g, "cpa-src")
	grantCopySource(g, "cpa-vault")
	operator := platformOperator(g, "cpa-operator", "cpa-src")

	t.Run("platform operator: copy a Secret they may not read", func(t *testing.T) {
		g := NewWithT(t)
		tenant := newTenant("cpa-steal", "cpa-steal-", "a")
		tenant.Spec.Copies = []tenancyv1.TenantCopy{copyItem(tenancyv1.CopySecret, "loot", "cpa-vault", "token")}
		err := operator.Create(ctx, tenant)
		g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "not refused: %v", err)
		g.Expect(err.Error()).To(ContainSubstring("ValidatingAdmissionPolicy 'tenant-copy-rights'"))
		g.Expect(err.Error()).To(ContainSubstring("spec.copies[0]: you may not get secrets cpa-vault/token yourself"))
		// Nor by adding the item to a Tenant they may edit.
		tenant.Spec.Copies = []tenancyv1.TenantCopy{copyItem(tenancyv1.CopySecret, "fine", "cpa-src", "token")}
		g.Expect(operator.Create(ctx, tenant)).To(Succeed())
		tenant.Spec.Copies = append(tenant.Spec.Copies, copyItem(tenancyv1.CopySecret, "loot", "cpa-vault", "token"))
		err = operator.Update(ctx, tenant)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring("spec.copies[1]: you may not get secrets cpa-vault/token yourself"))
		deleteTenant(g, "cpa-steal")
	})

	t.Run("cluster admin: a Secret of a namespace that did not allow the manager is not read", func(t *testing.T) {
		g := NewWithT(t)
		tenant := newTenant("cpa-nogrant", "cpa-nogrant-", "a")
		tenant.Spec.Copies = []tenancyv1.TenantCopy{copyItem(tenancyv1.CopySecret, "token", "cpa-nogrant", "token")}
		g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "cpa-nogrant"}, tenant)).To(Succeed())
			ready := conditions.Get(tenant.Status.Conditions, conditions.Ready)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Reason).To(Equal(ReasonCopySourceUnavailable))
			g.Expect(ready.Message).To(ContainSubstring("binds the ClusterRole trellis-copy-source"))
			g.Expect(tenant.Status.Copies).To(ConsistOf(HaveField("State", tenancyv1.CopySourceNotGranted)))
		}, timeout, interval).Should(Succeed())
		g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: "cpa-nogrant-a", Name: "token"}, &corev1.Secret{}))).To(BeTrue())
		deleteTenant(g, "cpa-nogrant")
	})

	tenant := newTenant("cpa", "cpa-", "a")
	tenant.Spec.Copies = []tenancyv1.TenantCopy{copyItem(tenancyv1.CopySecret, "token", "cpa-src", "token")}
	g.Expect(operator.Create(ctx, tenant)).To(Succeed())
	eventuallyReady(g, "cpa")
	emulateBuiltinRoles(g, "cpa-a")
	copyOf := func() *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "cpa-a", Name: "token"}}
	}
	g.Eventually(func() error { return k8s.Get(ctx, client.ObjectKeyFromObject(copyOf()), copyOf()) }, timeout, interval).Should(Succeed())
	admin := clientAs(g, "mallory", "cpa-admins")
	g.Eventually(func() error {
		return admin.List(ctx, &corev1.SecretList{}, client.InNamespace("cpa-a"))
	}, timeout, interval).Should(Succeed())
	const refusal = "ValidatingAdmissionPolicy 'tenant-copies' with binding 'tenant-copies' denied request"
	for name, try := range map[string]func() error{
		"update a copy": func() error {
			s := &corev1.Secret{}
			if err := admin.Get(ctx, client.ObjectKeyFromObject(copyOf()), s); err != nil {
				return err
			}
			s.Data = map[string][]byte{"token": []byte("mine")}
			return admin.Update(ctx, s)
		},
		"patch a copy": func() error { return mergePatch(admin, copyOf(), `{"stringData":{"token":"mine"}}`) },
		"take a copy's labels off by patch": func() error {
			return mergePatch(admin, copyOf(), `{"metadata":{"labels":{"tenancy.trellis.dev/tenant":null}}}`)
		},
		"apply a copy, forcing ownership": func() error {
			return admin.Apply(ctx, corev1ac.Secret("token", "cpa-a").WithData(map[string][]byte{"token": []byte("mine")}),
				client.FieldOwner("mallory"), client.ForceOwnership)
		},
		"delete a copy":     func() error { return admin.Delete(ctx, copyOf()) },
		"delete collection": func() error { return admin.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace("cpa-a")) },
		"delete by the mark": func() error {
			return admin.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace("cpa-a"), client.MatchingLabels{TenantLabel: "cpa"})
		},
		"make a Secret of theirs pass for a copy": func() error {
			return admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "cpa-a", Name: "forged",
				Labels: map[string]string{TenantLabel: "cpa", "app.kubernetes.io/managed-by": "trellis"}, Annotations: map[string]string{CopyOfAnnotation: "Secret/cpa-vault/token"}}})
		},
	} {
		t.Run("tenant admin: "+name, func(t *testing.T) {
			g := NewWithT(t)
			err := try()
			g.Expect(err).To(HaveOccurred(), "allowed")
			g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "not a refusal: %v", err)
			g.Expect(err.Error()).To(ContainSubstring(refusal))
		})
	}
	got := &corev1.Secret{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(copyOf()), got)).To(Succeed())
	g.Expect(got.Data).To(Equal(map[string][]byte{"token": []byte("s3cr3t-cpa-src")}))
	g.Expect(got.DeletionTimestamp).To(BeNil())
	deleteTenant(g, "cpa")
}
