package tenancy

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
)

// Attacks on the tenancy boundary, each by one actor impersonated against
// the real API server (RBAC on, config/admission installed, the manager
// running under config/rbac/role.yaml), each with who must refuse it. These
// are the attacks tenancy operators have fallen to (Capsule's advisories:
// CVE-2024-39690, a tenant owner taking a namespace by patching its owner
// references; CVE-2025-55205, labels injected into namespaces that other
// selectors trust) and Trellis' own.
//
// envtest runs no ClusterRole aggregation, so the built-in admin and view
// roles grant nothing here. emulateBuiltinRoles stands in for them: for every
// binding Trellis makes to admin (view), it binds the same subjects to a role
// with what admin (view) grants on a real cluster, plus, for admin, writes on
// quotas and limit ranges (which the real admin role only reads), so that
// where the admission policy must refuse, RBAC does not refuse first. The
// e2e suite runs the same attacks against the real roles
// (TestTenantAdminCannotTakeOrEscape).

// Who refuses an attack, told apart by the refusal's words.
type refuser int

const (
	byRBAC refuser = iota
	byPolicy
	byPodSecurity
	bySchema
)

func (r refuser) String() string {
	return [...]string{"RBAC", "the admission policy", "Pod Security admission", "the Tenant schema"}[r]
}

// fingerprint is what each refuser's refusals say.
func (r refuser) fingerprint(binding string) string {
	switch r {
	case byRBAC:
		return "cannot "
	case byPolicy:
		return "ValidatingAdmissionPolicy 'tenant-guardrails' with binding '" + binding + "' denied request"
	case byPodSecurity:
		return "violates PodSecurity"
	}
	return "" // the schema's messages are the want fragments themselves
}

// apiAttack is a request an actor sends, and who refuses it, in what words.
type apiAttack struct {
	actor, name string
	try         func() error
	by          refuser
	want        string
}

// expectRefused runs each attack as a subtest. binding names the admission
// policy binding expected to refuse.
func expectRefused(t *testing.T, binding string, attacks []apiAttack) {
	for _, a := range attacks {
		t.Run(a.actor+": "+a.name, func(t *testing.T) {
			g := NewWithT(t)
			err := a.try()
			g.Expect(err).To(HaveOccurred(), "allowed: refused by %s expected", a.by)
			g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "not a refusal: %v", err)
			g.Expect(err.Error()).To(ContainSubstring(a.by.fingerprint(binding)), "not refused by %s", a.by)
			g.Expect(err.Error()).To(ContainSubstring(a.want))
		})
	}
}

const (
	emulatedAdminRole = "test-emulated-admin"
	emulatedViewRole  = "test-emulated-view"
)

// emulateBuiltinRoles gives the subjects of Trellis' admin and viewer
// bindings in namespaces what the built-in roles grant them on a real
// cluster (see above). Only Trellis' bindings are read: if Trellis bound its
// viewers to admin, they would get the admin powers here too.
func emulateBuiltinRoles(g Gomega, namespaces ...string) {
	ctx := context.Background()
	all := []string{"*"}
	read := []string{"get", "list", "watch"}
	for _, role := range []*rbacv1.ClusterRole{
		{ObjectMeta: metav1.ObjectMeta{Name: emulatedAdminRole}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods", "configmaps", "secrets", "serviceaccounts", "services"}, Verbs: all},
			{APIGroups: []string{""}, Resources: []string{"resourcequotas", "limitranges"}, Verbs: all},
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: read},
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: all},
			{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles", "rolebindings"}, Verbs: all},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: emulatedViewRole}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods", "configmaps", "services", "serviceaccounts", "resourcequotas", "limitranges", "namespaces"}, Verbs: read},
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: read},
		}},
	} {
		if err := k8s.Create(ctx, role); !apierrors.IsAlreadyExists(err) {
			g.Expect(err).NotTo(HaveOccurred())
		}
	}
	emulated := map[string]string{builtinAdminRole: emulatedAdminRole, builtinViewRole: emulatedViewRole}
	for _, ns := range namespaces {
		for _, name := range []string{adminRoleBindingName, viewerRoleBindingName} {
			rb := &rbacv1.RoleBinding{}
			err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, rb)
			if apierrors.IsNotFound(err) {
				continue
			}
			g.Expect(err).NotTo(HaveOccurred())
			role, ok := emulated[rb.RoleRef.Name]
			g.Expect(ok).To(BeTrue(), "Trellis bound %s/%s to %q", ns, name, rb.RoleRef.Name)
			g.Expect(k8s.Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "emulated-" + name},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
				Subjects:   rb.Subjects,
			})).To(Succeed())
		}
	}
}

// serviceAccountClient impersonates a ServiceAccount as its token would
// authenticate it.
func serviceAccountClient(g Gomega, namespace, name string) client.Client {
	return clientAs(g, "system:serviceaccount:"+namespace+":"+name,
		"system:serviceaccounts", "system:serviceaccounts:"+namespace, "system:authenticated")
}

func mergePatch(c client.Client, obj client.Object, patch string) error {
	return c.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, []byte(patch)))
}

// restrictedPod passes the restricted Pod Security level; privileged, no level.
func restrictedPod(ns, name string, privileged bool) *corev1.Pod {
	sc := &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	if privileged {
		sc = &corev1.SecurityContext{Privileged: ptr.To(true)}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers:      []corev1.Container{{Name: "app", Image: "registry.example/app:1", SecurityContext: sc}},
		},
	}
}

func tenantSelector(value string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{TenantLabel: value}}}
}

// TestReleasingNeverLoosens: a namespace released under Retain (dropped from
// the spec, or its Tenant deleted) loses what gave the tenant access and
// keeps every restriction. The team's leftover credential there (a
// ServiceAccount bound to admin by the team's own, unlabelled RoleBinding,
// which Trellis does not touch) can still work in the namespace, but cannot
// loosen any restriction: not the guardrails (the admission policy, bound to
// released namespaces by the released-from label), not the namespace's
// labels (RBAC), and no privileged pod runs (Pod Security admission).
func TestReleasingNeverLoosens(t *testing.T) {
	ctx := context.Background()
	emulateBuiltinRoles(NewWithT(t))
	for _, trigger := range []struct {
		name, tenant string
		release      func(g Gomega)
	}{
		{"dropped from the spec", "rel-drop", func(g Gomega) {
			g.Eventually(func() error {
				tenant := getTenant(g, "rel-drop")
				tenant.Spec.Namespaces = []string{"a"}
				return k8s.Update(ctx, tenant)
			}, timeout, interval).Should(Succeed())
		}},
		{"Tenant deleted", "rel-del", func(g Gomega) { deleteTenant(g, "rel-del") }},
	} {
		t.Run(trigger.name, func(t *testing.T) {
			g := NewWithT(t)
			name := trigger.tenant
			ns := name + "-b"
			g.Expect(k8s.Create(ctx, newGuardedTenant(name, name+"-", "a", "b"))).To(Succeed())
			eventuallyReady(g, name)
			// The team's credential: a ServiceAccount bound by a RoleBinding of
			// the team's own (unlabelled: the admission policy lets a tenant
			// admin make it).
			g.Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ci"}})).To(Succeed())
			g.Expect(k8s.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-ci"},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: emulatedAdminRole},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "ci", Namespace: ns}}})).To(Succeed())

			kept := func() map[string]client.Object {
				return map[string]client.Object{quotaName: &corev1.ResourceQuota{}, limitRangeName: &corev1.LimitRange{}, networkPolicyName: &networkingv1.NetworkPolicy{}}
			}
			uids := map[string]types.UID{}
			for n, obj := range kept() {
				g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, obj)).To(Succeed())
				uids[n] = obj.GetUID()
			}

			trigger.release(g)
			g.Eventually(func(g Gomega) {
				g.Expect(getNamespace(g, ns).Labels).NotTo(HaveKey(TenantLabel))
				err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: adminRoleBindingName}, &rbacv1.RoleBinding{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the tenant's access goes: %v", err)
			}, timeout, interval).Should(Succeed())
			// What the quota controller (not run by envtest) would write
			// before the quota admits any pod.
			q := &corev1.ResourceQuota{}
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: quotaName}, q); err == nil {
				q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: corev1.ResourceList{"pods": resource.MustParse("0"), "requests.cpu": resource.MustParse("0")}}
				g.Expect(k8s.Status().Update(ctx, q)).To(Succeed())
			}

			ci := serviceAccountClient(g, ns, "ci")
			g.Eventually(func() error { // the team's binding is in the authorizer's cache
				return ci.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns))
			}, timeout, interval).Should(Succeed())
			const actor = "the team's leftover ServiceAccount"
			const kept1, isolated = "a guardrail or binding Trellis keeps", "network-isolated"
			np := func(name string, peers ...networkingv1.NetworkPolicyPeer) *networkingv1.NetworkPolicy {
				return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: ingressFrom(peers...)}
			}
			expectRefused(t, "tenant-guardrails-released", []apiAttack{
				{actor, "delete the quota", func() error {
					return ci.Delete(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: quotaName}})
				}, byPolicy, kept1},
				{actor, "raise the quota", func() error {
					return mergePatch(ci, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: quotaName}},
						`{"spec":{"hard":{"pods":"1000"}}}`)
				}, byPolicy, kept1},
				{actor, "take the quota out of the policy's reach (strip its tenant label)", func() error {
					return mergePatch(ci, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: quotaName}},
						`{"metadata":{"labels":{"tenancy.trellis.dev/tenant":null}}}`)
				}, byPolicy, kept1},
				{actor, "delete the limit range", func() error {
					return ci.Delete(ctx, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: limitRangeName}})
				}, byPolicy, kept1},
				{actor, "delete the network policy", func() error {
					return ci.Delete(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: networkPolicyName}})
				}, byPolicy, kept1},
				{actor, "open the network policy to every namespace", func() error {
					return mergePatch(ci, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: networkPolicyName}},
						`{"spec":{"ingress":[{"from":[{"namespaceSelector":{}}]}]}}`)
				}, byPolicy, kept1},
				{actor, "add an allow-all NetworkPolicy", func() error {
					return ci.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "allow-all"},
						Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{}}}})
				}, byPolicy, isolated},
				{actor, "admit namespaces labelled with an empty tenant (the released namespace's own 'tenant')", func() error {
					return ci.Create(ctx, np("empty-tenant", tenantSelector("")))
				}, byPolicy, isolated},
				{actor, "admit the former tenant's namespaces", func() error {
					return ci.Create(ctx, np("former-tenant", tenantSelector(name)))
				}, byPolicy, isolated},
				{actor, "drop the Pod Security level", func() error {
					return mergePatch(ci, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
						`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":null}}}`)
				}, byRBAC, `cannot patch resource "namespaces"`},
				{actor, "drop the released mark", func() error {
					return mergePatch(ci, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
						`{"metadata":{"labels":{"tenancy.trellis.dev/released-from":null}}}`)
				}, byRBAC, `cannot patch resource "namespaces"`},
				{actor, "run a privileged pod", func() error {
					return ci.Create(ctx, restrictedPod(ns, "root", true))
				}, byPodSecurity, `"restricted:latest"`},
			})

			t.Run(actor+" still works in the namespace, within the restrictions", func(t *testing.T) {
				g := NewWithT(t)
				g.Expect(ci.Create(ctx, restrictedPod(ns, "app", false))).To(Succeed())
				g.Expect(ci.Create(ctx, np("same-namespace", networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{}}))).To(Succeed())
				g.Expect(ci.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns))).To(Succeed())
			})

			// The restrictions stayed, and nothing moved.
			keptLabels := map[string]string{
				"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted",
				NetworkIsolationLabel: "true", ReleasedFromLabel: name,
			}
			for k, v := range keptLabels {
				g.Expect(getNamespace(g, ns).Labels).To(HaveKeyWithValue(k, v))
			}
			for n, obj := range kept() {
				g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, obj)).To(Succeed())
				g.Expect(obj.GetUID()).To(Equal(uids[n]))
				g.Expect(obj.GetLabels()).To(HaveKeyWithValue(TenantLabel, name))
			}
			g.Expect(getNamespace(g, ns).DeletionTimestamp).To(BeNil())
			deleteTenant(g, name)
		})
	}
}

// TestTenantAttacks: a tenant admin, a tenant viewer, a platform operator
// and whoever else may write namespaces try to cross a tenant's boundary or
// loosen what it enforces. Requests the API server must refuse are in the
// first table (RBAC, the admission policy, the Tenant schema); attacks the
// controller must refuse (by never taking or adopting what its marks do not
// say is its own) follow it.
func TestTenantAttacks(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	attacker := newGuardedTenant("atk", "atk-", "a")
	attacker.Spec.Admins = append(attacker.Spec.Admins, tenancyv1.Subject{Kind: rbacv1.UserKind, Name: "co-admin", APIGroup: rbacv1.GroupName})
	attacker.Spec.Viewers = []tenancyv1.Subject{subjectGroup("atk-viewers")}
	g.Expect(k8s.Create(ctx, attacker)).To(Succeed())
	g.Expect(k8s.Create(ctx, newGuardedTenant("vic", "vic-", "a"))).To(Succeed())
	eventuallyReady(g, "atk")
	eventuallyReady(g, "vic")
	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "atk-free"}})).To(Succeed())
	emulateBuiltinRoles(g, "atk-a", "vic-a")
	g.Expect(k8s.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "atk-a", Name: "team-web"},
		Spec: ingressFrom(networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{}})})).To(Succeed())
	atkUID := getTenant(g, "atk").UID

	admin := clientAs(g, "mallory", "atk-admins")
	viewer := clientAs(g, "victor", "atk-viewers")
	const tenantAdmin, tenantViewer, operator = "tenant admin", "tenant viewer", "platform operator"
	const kept, isolated = "a guardrail or binding Trellis keeps", "network-isolated"
	nsPatch := func(c client.Client, name, patch string) func() error {
		return func() error {
			return mergePatch(c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, patch)
		}
	}
	withMetadata := func(labels map[string]tenancyv1.LabelValue) func() error {
		return func() error {
			t := newTenant("atk-meta", "atk-meta-", "a")
			t.Spec.NamespaceMetadata.Labels = labels
			return k8s.Create(ctx, t, client.DryRunAll)
		}
	}
	// Waits until the emulated roles are in the authorizer's cache.
	g.Eventually(func() error {
		return admin.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("atk-a"))
	}, timeout, interval).Should(Succeed())
	g.Eventually(func() error {
		return viewer.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("atk-a"))
	}, timeout, interval).Should(Succeed())

	expectRefused(t, "tenant-guardrails", []apiAttack{
		// CVE-2024-39690: a tenant owner took a namespace no tenant held by
		// patching its owner references. Trellis' admins cannot write
		// namespaces at all, and Trellis reads no owner reference (below).
		{tenantAdmin, "take a free namespace by owner reference", nsPatch(admin, "atk-free",
			`{"metadata":{"ownerReferences":[{"apiVersion":"tenancy.trellis.dev/v1","kind":"Tenant","name":"atk","uid":"`+string(atkUID)+`","controller":true}]}}`),
			byRBAC, `cannot patch resource "namespaces"`},
		{tenantAdmin, "ask Trellis to hand a free namespace over", nsPatch(admin, "atk-free",
			`{"metadata":{"annotations":{"tenancy.trellis.dev/hand-over-to":"atk"}}}`), byRBAC, `cannot patch resource "namespaces"`},
		{tenantAdmin, "ask Trellis to hand another tenant's namespace over", nsPatch(admin, "vic-a",
			`{"metadata":{"annotations":{"tenancy.trellis.dev/hand-over-to":"atk"}}}`), byRBAC, `cannot patch resource "namespaces"`},
		// CVE-2025-55205: labels injected into namespaces that other
		// selectors trust. Here the tenant label, by which the victim's
		// isolation policy admits traffic.
		{tenantAdmin, "label its own namespace as the victim's", nsPatch(admin, "atk-a",
			`{"metadata":{"labels":{"tenancy.trellis.dev/tenant":"vic"}}}`), byRBAC, `cannot patch resource "namespaces"`},
		{tenantAdmin, "create a namespace labelled as the victim's", func() error {
			return admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "atk-extra", Labels: map[string]string{TenantLabel: "vic"}}})
		}, byRBAC, `cannot create resource "namespaces"`},
		{tenantAdmin, "lower its namespace's Pod Security level", nsPatch(admin, "atk-a",
			`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"privileged"}}}`), byRBAC, `cannot patch resource "namespaces"`},
		{tenantAdmin, "add a namespace to its Tenant", func() error {
			return mergePatch(admin, &tenancyv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "atk"}}, `{"spec":{"namespaces":["a","b"]}}`)
		}, byRBAC, `cannot patch resource "tenants"`},
		{tenantAdmin, "bind itself into the victim's namespace", func() error {
			return admin.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "vic-a", Name: "in"},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: emulatedAdminRole},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "atk-admins", APIGroup: rbacv1.GroupName}}})
		}, byRBAC, `cannot create resource "rolebindings"`},
		{tenantAdmin, "read the victim's Secrets", func() error {
			return admin.List(ctx, &corev1.SecretList{}, client.InNamespace("vic-a"))
		}, byRBAC, `cannot list resource "secrets"`},
		{tenantAdmin, "widen the per-tenant ClusterRole", func() error {
			return mergePatch(admin, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "trellis:tenant:atk"}},
				`{"rules":[{"apiGroups":["*"],"resources":["*"],"verbs":["*"]}]}`)
		}, byRBAC, `cannot patch resource "clusterroles"`},
		// What the policy refuses in the tenant's own namespaces.
		{tenantAdmin, "create a binding labelled as the victim's", func() error {
			return admin.Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: "atk-a", Name: "forged",
					Labels: map[string]string{TenantLabel: "vic", "app.kubernetes.io/managed-by": "trellis"}},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: emulatedViewRole},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "mallory", APIGroup: rbacv1.GroupName}}})
		}, byPolicy, kept},
		{tenantAdmin, "relabel its own NetworkPolicy to pass for Trellis'", func() error {
			return mergePatch(admin, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "atk-a", Name: "team-web"}},
				`{"metadata":{"labels":{"tenancy.trellis.dev/tenant":"atk","app.kubernetes.io/managed-by":"trellis"}}}`)
		}, byPolicy, kept},
		{tenantAdmin, "delete the Tenant's admin binding to lock a co-admin out", func() error {
			return admin.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "atk-a", Name: adminRoleBindingName}})
		}, byPolicy, kept},
		{tenantAdmin, "take a co-admin off the Tenant's admin binding", func() error {
			return mergePatch(admin, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "atk-a", Name: adminRoleBindingName}},
				`{"subjects":[{"kind":"Group","name":"atk-admins","apiGroup":"rbac.authorization.k8s.io"}]}`)
		}, byPolicy, kept},
		{tenantAdmin, "put an owner reference to another Tenant on the admin binding", func() error {
			return mergePatch(admin, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "atk-a", Name: adminRoleBindingName}},
				`{"metadata":{"ownerReferences":[{"apiVersion":"tenancy.trellis.dev/v1","kind":"Tenant","name":"vic","uid":"`+string(getTenant(g, "vic").UID)+`"}]}}`)
		}, byPolicy, kept},
		{tenantAdmin, "admit the victim's namespaces into its own", func() error {
			return admin.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "atk-a", Name: "from-vic"},
				Spec: ingressFrom(tenantSelector("vic"))})
		}, byPolicy, isolated},
		// A viewer reads, and nothing more.
		{tenantViewer, "read its tenant's Secrets", func() error {
			return viewer.List(ctx, &corev1.SecretList{}, client.InNamespace("atk-a"))
		}, byRBAC, `cannot list resource "secrets"`},
		{tenantViewer, "bind itself to admin in its tenant's namespace", func() error {
			return viewer.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "atk-a", Name: "up"},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: emulatedAdminRole},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "victor", APIGroup: rbacv1.GroupName}}})
		}, byRBAC, `cannot create resource "rolebindings"`},
		{tenantViewer, "widen the per-tenant ClusterRole", func() error {
			return mergePatch(viewer, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "trellis:tenant:atk"}},
				`{"rules":[{"apiGroups":[""],"resources":["secrets"],"verbs":["get","list"]}]}`)
		}, byRBAC, `cannot patch resource "clusterroles"`},
		{tenantViewer, "bind the per-tenant ClusterRole to itself cluster-wide", func() error {
			return viewer.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "atk-viewer-up"},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "trellis:tenant:atk"},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "victor", APIGroup: rbacv1.GroupName}}})
		}, byRBAC, `cannot create resource "clusterrolebindings"`},
		{tenantViewer, "read the victim's Tenant", func() error {
			return viewer.Get(ctx, client.ObjectKey{Name: "vic"}, &tenancyv1.Tenant{})
		}, byRBAC, `cannot get resource "tenants"`},
		// CVE-2025-55205 through the operator: labels Trellis writes on
		// namespaces come from namespaceMetadata, which refuses the keys
		// other selectors trust (Trellis' marks, Pod Security).
		{operator, "put the victim's tenant label on a tenant's namespaces", withMetadata(map[string]tenancyv1.LabelValue{TenantLabel: "vic"}),
			bySchema, "labels of Trellis' own"},
		{operator, "put a Pod Security level through namespaceMetadata", withMetadata(map[string]tenancyv1.LabelValue{podSecurityEnforceLabel: "privileged"}),
			bySchema, "labels under kubernetes.io and k8s.io are reserved"},
		// Without the objectstore-editor role: a trellis.dev label an
		// ObjectStore's namespaceSelector, adoptionNamespaceSelector or
		// publicAccessNamespaceSelector reads opens the store, adoption or
		// public policies to the tenant's namespaces.
		{operator, "open an ObjectStore to a tenant's namespaces with its label", withMetadata(map[string]tenancyv1.LabelValue{"storage.trellis.dev/adopt": "yes"}),
			bySchema, "labels of Trellis' own"},
		{operator, "give a Tenant kube-system", func() error {
			return k8s.Create(ctx, newTenant("atk-sys", "", "kube-system"), client.DryRunAll)
		}, bySchema, "reserved"},
	})

	t.Run(tenantViewer+": reads what a viewer reads", func(t *testing.T) {
		// The viewer refusals above mean something only if the viewer can
		// read at all.
		g := NewWithT(t)
		g.Expect(viewer.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("atk-a"))).To(Succeed())
		g.Expect(viewer.Get(ctx, client.ObjectKey{Name: "atk"}, &tenancyv1.Tenant{})).To(Succeed())
	})

	// Nothing moved: the free namespace is nobody's, the victim's is the
	// victim's, and both Tenants are as they were.
	free := getNamespace(g, "atk-free")
	g.Expect(free.Labels).NotTo(HaveKey(TenantLabel))
	g.Expect(free.Annotations).To(BeEmpty())
	g.Expect(free.OwnerReferences).To(BeEmpty())
	g.Expect(getNamespace(g, "vic-a").Labels).To(HaveKeyWithValue(TenantLabel, "vic"))
	g.Expect(getNamespace(g, "atk-a").Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "restricted"))
	eventuallyReady(g, "atk")
	eventuallyReady(g, "vic")

	t.Run(operator+": a Tenant naming another tenant's namespace, or one owned by reference", func(t *testing.T) {
		// A platform operator's mistake (or a namespace writer's attempt):
		// "grab" names the victim's namespace, and a namespace whose owner
		// reference, set by whoever may write namespaces, names "grab".
		// Trellis decides by its marks only: both are conflicts, untouched,
		// and grab's admins get nothing in them. Refused by the controller.
		g := NewWithT(t)
		g.Expect(k8s.Create(ctx, newTenant("grab", "", "vic-a"))).To(Succeed())
		grab := getTenant(g, "grab")
		g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "grab-owned",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: tenancyv1.GroupVersion.String(), Kind: "Tenant", Name: "grab", UID: grab.UID, Controller: ptr.To(true)}}}})).To(Succeed())
		g.Eventually(func() error {
			grab := getTenant(g, "grab")
			grab.Spec.Namespaces = []string{"vic-a", "grab-owned"}
			return k8s.Update(ctx, grab)
		}, timeout, interval).Should(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(nsState(g, "grab", "vic-a")).To(Equal(tenancyv1.TenantNamespaceStatus{
				Name: "vic-a", State: tenancyv1.NamespaceConflict, Message: `namespace vic-a belongs to Tenant "vic"; it is left untouched`}))
			g.Expect(nsState(g, "grab", "grab-owned").State).To(Equal(tenancyv1.NamespaceConflict))
		}, timeout, interval).Should(Succeed())
		for _, ns := range []string{"vic-a", "grab-owned"} {
			g.Expect(getNamespace(g, ns).Labels).NotTo(HaveKeyWithValue(TenantLabel, "grab"))
			err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: adminRoleBindingName}, &rbacv1.RoleBinding{})
			if ns == "grab-owned" {
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no binding in %s: %v", ns, err)
			}
			g.Expect(canI(g, "grab-admins", "list", "secrets", "", ns, "")).To(BeFalse())
		}
		deleteTenant(g, "grab")
		// Released under Retain, grab gave up nothing it did not hold.
		g.Expect(getNamespace(g, "vic-a").Labels).NotTo(HaveKey(ReleasedFromLabel))
		g.Expect(getNamespace(g, "grab-owned").Labels).NotTo(HaveKey(ReleasedFromLabel))
		eventuallyReady(g, "vic")
	})

	t.Run(tenantAdmin+": squat the name of Trellis' isolation policy before isolation", func(t *testing.T) {
		// A policy of the admin's own, named as Trellis names its isolation
		// policy, made while the tenant is not isolated, would stand in the
		// way of the guardrail when the platform switches isolation on.
		// Refused by the admission policy. Someone it exempts (a cluster
		// admin) can still make one: Trellis never adopts it, reports the
		// conflict and leaves it exactly as it is (refused by the controller).
		g := NewWithT(t)
		g.Expect(k8s.Create(ctx, newTenant("sq", "sq-", "a"))).To(Succeed())
		eventuallyReady(g, "sq")
		emulateBuiltinRoles(g, "sq-a")
		sq := clientAs(g, "sam", "sq-admins")
		squat := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "sq-a", Name: networkPolicyName},
			Spec: ingressFrom(networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}})}
		g.Eventually(func(g Gomega) {
			err := sq.Create(ctx, squat.DeepCopy())
			g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
			g.Expect(err.Error()).To(ContainSubstring("names starting with trellis-tenant-"))
		}, timeout, interval).Should(Succeed())
		g.Expect(k8s.Create(ctx, squat)).To(Succeed())
		before := &networkingv1.NetworkPolicy{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(squat), before)).To(Succeed())

		g.Eventually(func() error {
			tenant := getTenant(g, "sq")
			tenant.Spec.NetworkIsolation = &tenancyv1.NetworkIsolation{}
			return k8s.Update(ctx, tenant)
		}, timeout, interval).Should(Succeed())
		g.Eventually(func(g Gomega) {
			tenant := getTenant(g, "sq")
			g.Expect(tenant.Status.ObservedGeneration).To(Equal(tenant.Generation))
			g.Expect(nsState(g, "sq", "sq-a").State).To(Equal(tenancyv1.NamespaceConflict))
			g.Expect(nsState(g, "sq", "sq-a").Message).To(ContainSubstring("NetworkPolicy sq-a/" + networkPolicyName))
		}, timeout, interval).Should(Succeed())
		after := &networkingv1.NetworkPolicy{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(squat), after)).To(Succeed())
		g.Expect(after.ResourceVersion).To(Equal(before.ResourceVersion), "never adopted, never written")
		g.Expect(after.Labels).To(BeEmpty())
		deleteTenant(g, "sq")
	})

	t.Run("namespace writer: forge a Delete-policy Tenant's marks on a protected namespace", func(t *testing.T) {
		// Whoever may write namespace labels (not a tenant admin) marks a
		// namespace no Tenant may hold with a Tenant's name and real UID, so
		// that the Tenant, whose spec does not name it, "releases" it under
		// its Delete policy. Trellis never touches a protected namespace,
		// whatever its marks say. Refused by the controller.
		g := NewWithT(t)
		del := newTenant("del", "del-", "a")
		del.Spec.NamespaceDeletionPolicy = tenancyv1.NamespaceDelete
		g.Expect(k8s.Create(ctx, del)).To(Succeed())
		del = eventuallyReady(g, "del")
		g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "protected-forged",
			Labels:      map[string]string{TenantLabel: "del", "app.kubernetes.io/managed-by": "trellis"},
			Annotations: map[string]string{TenantUIDAnnotation: string(del.UID)}}})).To(Succeed())
		// The namespace's creation is an event for "del"; this reconcile
		// makes sure one ran after the cache saw it.
		g.Eventually(func(g Gomega) {
			list := &corev1.NamespaceList{}
			g.Expect(reconciler.client.List(ctx, list, client.MatchingFields{namespaceTenantIndex: "del"})).To(Succeed())
			g.Expect(list.Items).To(HaveLen(2))
		}, timeout, interval).Should(Succeed())
		_, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: "del"}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Consistently(func(g Gomega) {
			ns := getNamespace(g, "protected-forged")
			g.Expect(ns.DeletionTimestamp).To(BeNil())
			g.Expect(ns.Labels).To(HaveKeyWithValue(TenantLabel, "del"), "not touched at all")
		}, 3*time.Second, 100*time.Millisecond).Should(Succeed())
		deleteTenant(g, "del")
		g.Expect(getNamespace(g, "protected-forged").DeletionTimestamp).To(BeNil())
		g.Expect(getNamespace(g, "del-a").DeletionTimestamp).NotTo(BeNil(), "its own namespace goes, as its policy says")
	})

	deleteTenant(g, "atk")
	deleteTenant(g, "vic")
}

// TestForgedTenantObjectsAreRefusedOutsideTenants: in a namespace that is no
// Tenant's, a namespace editor makes objects labelled as a Tenant's, or named
// as Trellis names a Tenant's, which the manager would recognise as its own
// and cache whole (and a Tenant later given the namespace would find in its
// way). Refused by the admission policy's binding for every other namespace.
func TestForgedTenantObjectsAreRefusedOutsideTenants(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "forge-free"}})).To(Succeed())
	g.Expect(k8s.Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "test-forge-powers"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"*"}},
			{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"rolebindings"}, Verbs: []string{"*"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}},
		},
	})).To(Succeed())
	g.Expect(k8s.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "forge-free", Name: "test-forge-powers"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "test-forge-powers"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "mallory", APIGroup: rbacv1.GroupName}},
	})).To(Succeed())
	mallory := clientAs(g, "mallory")
	marks := map[string]string{"app.kubernetes.io/managed-by": "trellis", TenantLabel: "victim"}
	allowAll := networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{}}}

	const kept, named = "a guardrail or binding Trellis keeps", "names starting with trellis-tenant-"
	refused := map[string]struct {
		obj  client.Object
		want string
	}{
		"Trellis' isolation policy, marks and all": {&networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "forge-free", Name: networkPolicyName, Labels: marks}, Spec: allowAll}, kept},
		"a policy labelled as a Tenant's": {&networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "forge-free", Name: "allow-all", Labels: marks}, Spec: allowAll}, kept},
		"a binding by the admin binding's name": {&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: "forge-free", Name: adminRoleBindingName},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "test-forge-powers"},
			Subjects:   []rbacv1.Subject{{Kind: "User", Name: "mallory", APIGroup: rbacv1.GroupName}}}, named},
	}
	// The API server loads a binding about a second after it is created.
	for name, tc := range refused {
		t.Run("refused: "+name, func(t *testing.T) {
			g := NewWithT(t)
			g.Eventually(func(g Gomega) {
				err := mallory.Create(ctx, tc.obj.DeepCopyObject().(client.Object))
				g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
				g.Expect(err.Error()).To(ContainSubstring(tc.want))
			}, timeout, interval).Should(Succeed())
		})
	}
	// The namespace's own objects are none of the policy's business.
	g.Expect(mallory.Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "forge-free", Name: "allow-all", Labels: map[string]string{"app.kubernetes.io/managed-by": "trellis"}},
		Spec:       allowAll})).To(Succeed())
	g.Expect(mallory.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "forge-free", Name: "trellis-tenant-notes"}})).To(Succeed())
}
