package tenancy

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
)

// TestGuardrailsHoldAgainstOtherRoutes: the tenant admin's attacks of
// TestTenantAttacks reach the same guardrails by routes other than the
// plain verb: a collection delete, a server-side apply that forces
// ownership of Trellis' fields, a finalizer or an owner reference (for the
// garbage collector to act on) added to a guardrail, a Pod Security level
// escaped through the ephemeral-containers subresource or a host
// namespace, and writes while the namespace is being deleted, which the
// policy lets through for the namespace controller.
func TestGuardrailsHoldAgainstOtherRoutes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, newGuardedTenant("rte", "rte-", "a", "b"))).To(Succeed())
	eventuallyReady(g, "rte")
	emulateBuiltinRoles(g, "rte-a", "rte-b")
	// Where a cluster lets admins add ephemeral containers (the built-in
	// admin role does not), Pod Security still judges them.
	g.Expect(k8s.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-ephemeral-containers"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods/ephemeralcontainers"}, Verbs: []string{"update", "patch"}}}})).To(Succeed())
	g.Expect(k8s.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "rte-a", Name: "test-ephemeral-containers"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "test-ephemeral-containers"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "rte-admins", APIGroup: rbacv1.GroupName}}})).To(Succeed())
	// What the quota controller (not run by envtest) writes before the
	// quota admits any pod.
	q := &corev1.ResourceQuota{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "rte-a", Name: quotaName}, q)).To(Succeed())
	q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: corev1.ResourceList{"pods": resource.MustParse("0"), "requests.cpu": resource.MustParse("0")}}
	g.Expect(k8s.Status().Update(ctx, q)).To(Succeed())
	g.Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "rte-a", Name: "default"}})).To(Succeed())
	g.Expect(k8s.Create(ctx, restrictedPod("rte-a", "app", false))).To(Succeed())
	g.Expect(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "rte-a", Name: "owner"}})).To(Succeed())
	owner := &corev1.ConfigMap{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "rte-a", Name: "owner"}, owner)).To(Succeed())

	admin := clientAs(g, "mallory", "rte-admins")
	g.Eventually(func() error {
		return admin.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("rte-a"))
	}, timeout, interval).Should(Succeed())
	const tenantAdmin, kept, isolated = "tenant admin", "a guardrail or binding Trellis keeps", "network-isolated"
	trellis := client.MatchingLabels{TenantLabel: "rte"}
	quota := func(ns string) *corev1.ResourceQuota {
		return &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: quotaName}}
	}
	isolation := func(ns string) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: networkPolicyName}}
	}

	expectRefused(t, "tenant-guardrails", []apiAttack{
		{tenantAdmin, "delete the tenant's quotas as a collection", func() error {
			return admin.DeleteAllOf(ctx, &corev1.ResourceQuota{}, client.InNamespace("rte-a"), trellis)
		}, byPolicy, kept},
		{tenantAdmin, "delete the tenant's bindings as a collection", func() error {
			return admin.DeleteAllOf(ctx, &rbacv1.RoleBinding{}, client.InNamespace("rte-a"), trellis)
		}, byPolicy, kept},
		{tenantAdmin, "delete the isolation policy as a collection", func() error {
			return admin.DeleteAllOf(ctx, &networkingv1.NetworkPolicy{}, client.InNamespace("rte-a"), trellis)
		}, byPolicy, kept},
		{tenantAdmin, "take the admin binding's subjects over by server-side apply", func() error {
			return admin.Apply(ctx, rbacv1ac.RoleBinding(adminRoleBindingName, "rte-a").
				WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName(builtinAdminRole)).
				WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.UserKind).WithName("mallory").WithAPIGroup(rbacv1.GroupName)),
				client.FieldOwner("mallory"), client.ForceOwnership)
		}, byPolicy, kept},
		{tenantAdmin, "hold the isolation policy with a finalizer of its own", func() error {
			return mergePatch(admin, isolation("rte-a"), `{"metadata":{"finalizers":["example.com/keep"]}}`)
		}, byPolicy, kept},
		{tenantAdmin, "make the quota a dependent of its own ConfigMap, for the garbage collector to delete", func() error {
			return mergePatch(admin, quota("rte-a"), `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"owner","uid":"`+
				string(owner.UID)+`"}]}}`)
		}, byPolicy, kept},
		{tenantAdmin, "add a privileged ephemeral container to a running pod", func() error {
			p := &corev1.Pod{}
			if err := admin.Get(ctx, client.ObjectKey{Namespace: "rte-a", Name: "app"}, p); err != nil {
				return err
			}
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "debug", Image: "registry.example/debug:1", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				ImagePullPolicy: corev1.PullIfNotPresent, SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
			}}}
			return admin.SubResource("ephemeralcontainers").Update(ctx, p)
		}, byPodSecurity, "privileged"},
		{tenantAdmin, "run a pod in the node's network namespace", func() error {
			p := restrictedPod("rte-a", "host", false)
			p.Spec.HostNetwork = true
			return admin.Create(ctx, p)
		}, byPodSecurity, "host namespaces"},
	})

	// The namespace controller empties a namespace being deleted, and the
	// policy never stands in its way. envtest runs no namespace
	// controller: a namespace deleted here stays Terminating, its
	// guardrails and bindings in place, as they are while a real one waits
	// for pods in their grace period.
	g.Expect(k8s.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "rte-b", Name: "team-web"},
		Spec: ingressFrom(networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{}})})).To(Succeed())
	g.Expect(k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "rte-b"}})).To(Succeed())
	g.Expect(getNamespace(g, "rte-b").DeletionTimestamp).NotTo(BeNil())
	expectRefused(t, "tenant-guardrails", []apiAttack{
		{tenantAdmin, "raise the quota of a namespace being deleted", func() error {
			return mergePatch(admin, quota("rte-b"), `{"spec":{"hard":{"pods":"1000","requests.cpu":"1000"}}}`)
		}, byPolicy, kept},
		{tenantAdmin, "open the isolation policy of a namespace being deleted to every namespace", func() error {
			return mergePatch(admin, isolation("rte-b"), `{"spec":{"ingress":[{"from":[{"namespaceSelector":{}}]}]}}`)
		}, byPolicy, kept},
		{tenantAdmin, "open a policy of its own in a namespace being deleted", func() error {
			return mergePatch(admin, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "rte-b", Name: "team-web"}},
				`{"spec":{"ingress":[{"from":[{"ipBlock":{"cidr":"0.0.0.0/0"}}]}]}}`)
		}, byPolicy, isolated},
	})
	t.Run(tenantAdmin+": deletes what the namespace controller deletes anyway", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(admin.Delete(ctx, quota("rte-b"))).To(Succeed())
	})
	deleteTenant(g, "rte")
}

// TestRequestMetadataDoesNotGrowTheManager: NamespaceRequests cost the
// manager the same whatever is written on them. The cache drops their
// labels and annotations; a tenant admin writes 250 KiB of finalizers
// instead (the API server bounds the list only by the object's size), and
// as much of owner references, which only those who may patch Tenants may
// put on a request (the namespace-requests policy): the manager's copy
// holds neither.
func TestRequestMetadataDoesNotGrowTheManager(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, newTenant("rqm", "rqm-", "home"))).To(Succeed())
	eventuallyReady(g, "rqm")
	letRequest(g, "rqm-admins", "rqm-home")
	admin := clientAs(g, "alice", "rqm-admins")
	req := newRequest("rqm-home", "big")
	g.Eventually(func() error { return admin.Create(ctx, req) }, timeout, interval).Should(Succeed())

	const n = 850
	prefix := strings.Repeat("a", 230) + ".example.com/"
	finalizers := make([]string, 0, n)
	owners := make([]map[string]any, 0, n)
	for i := range n {
		finalizers = append(finalizers, fmt.Sprintf("%sf-%s-%04d", prefix, strings.Repeat("x", 50), i))
		owners = append(owners, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"name": fmt.Sprintf("owner-%s-%04d", strings.Repeat("y", 220), i), "uid": fmt.Sprintf("00000000-0000-4000-8000-%012d", i)})
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": finalizers}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(patch)).To(BeNumerically(">", 250<<10))
	g.Expect(admin.Patch(ctx, req, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
	patch, err = json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": owners}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(patch)).To(BeNumerically(">", 250<<10))
	g.Expect(k8s.Patch(ctx, req, client.RawPatch(types.MergePatchType, patch))).To(Succeed())

	g.Eventually(func(g Gomega) {
		cached := &tenancyv1.NamespaceRequest{}
		g.Expect(reconciler.client.Get(ctx, client.ObjectKeyFromObject(req), cached)).To(Succeed())
		g.Expect(cached.ResourceVersion).To(Equal(req.ResourceVersion), "the cache has seen the patch")
		raw, err := json.Marshal(cached)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(len(raw)).To(BeNumerically("<=", 4<<10), "the cached request, in bytes")
	}, timeout, interval).Should(Succeed())

	g.Expect(k8s.Patch(ctx, req, client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":null,"ownerReferences":null}}`)))).To(Succeed())
	g.Expect(k8s.Delete(ctx, req)).To(Succeed())
	deleteTenant(g, "rqm")
}
