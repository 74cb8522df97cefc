package tenancy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/testenv"
)

const (
	timeout  = 20 * time.Second
	interval = 50 * time.Millisecond
)

func newTenant(name, prefix string, namespaces ...string) *tenancyv1.Tenant {
	return &tenancyv1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: tenancyv1.TenantSpec{
			Namespaces:      namespaces,
			NamespacePrefix: ptr.To(prefix),
			Admins:          []tenancyv1.Subject{{Kind: rbacv1.GroupKind, Name: name + "-admins", APIGroup: rbacv1.GroupName}},
		},
	}
}

// newGuardedTenant is newTenant with every guardrail.
func newGuardedTenant(name, prefix string, namespaces ...string) *tenancyv1.Tenant {
	t := newTenant(name, prefix, namespaces...)
	t.Spec.Quota = tenancyv1.TenantQuota{Hard: corev1.ResourceList{"pods": resource.MustParse("10"), "requests.cpu": resource.MustParse("2")}}
	t.Spec.LimitRange = tenancyv1.TenantLimitRange{Limits: []tenancyv1.LimitRangeItem{{
		Type: corev1.LimitTypeContainer,
		Max:  corev1.ResourceList{"cpu": resource.MustParse("1"), "memory": resource.MustParse("1Gi")},
		Min:  corev1.ResourceList{"cpu": resource.MustParse("10m")},
	}}}
	t.Spec.NetworkIsolation = &tenancyv1.NetworkIsolation{AllowFromNamespaces: []string{"ingress"}}
	t.Spec.PodSecurity = tenancyv1.PodSecurity{Enforce: tenancyv1.PodSecurityRestricted, Warn: tenancyv1.PodSecurityRestricted}
	t.Spec.NamespaceMetadata = tenancyv1.NamespaceMetadata{
		Labels:      map[string]tenancyv1.LabelValue{"cost-center": "42"},
		Annotations: map[string]tenancyv1.AnnotationValue{"example.com/owner": tenancyv1.AnnotationValue(name)},
	}
	return t
}

func getTenant(g Gomega, name string) *tenancyv1.Tenant {
	t := &tenancyv1.Tenant{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Name: name}, t)).To(Succeed())
	return t
}

func eventuallyReady(g Gomega, name string) *tenancyv1.Tenant { return eventuallyReadyOn(g, k8s, name) }

// eventuallyReadyOn waits until the Tenant is Ready for its generation on
// the API server c talks to.
func eventuallyReadyOn(g Gomega, c client.Client, name string) *tenancyv1.Tenant {
	t := &tenancyv1.Tenant{}
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(context.Background(), client.ObjectKey{Name: name}, t)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(t.Status.Conditions, conditions.Ready)).To(BeTrue(), "status: %+v", t.Status)
		g.Expect(t.Status.ObservedGeneration).To(Equal(t.Generation))
	}, timeout, interval).Should(Succeed())
	return t
}

func getNamespace(g Gomega, name string) *corev1.Namespace {
	ns := &corev1.Namespace{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Name: name}, ns)).To(Succeed())
	return ns
}

// canI asks the API server whether the group member may do verb on resource.
func canI(g Gomega, group, verb, res, apiGroup, namespace, name string) bool {
	return canIOn(g, k8s, group, verb, res, apiGroup, namespace, name)
}

func canIOn(g Gomega, c client.Client, group, verb, res, apiGroup, namespace, name string) bool {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   "someone",
		Groups: []string{group},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: verb, Resource: res, Group: apiGroup, Namespace: namespace, Name: name,
		},
	}}
	g.Expect(c.Create(context.Background(), sar)).To(Succeed())
	return sar.Status.Allowed
}

// tenantEventReasons lists the reasons of the Events about a Tenant.
func tenantEventReasons(g Gomega, name string) []string { return tenantEventReasonsOn(g, k8s, name) }

func tenantEventReasonsOn(g Gomega, c client.Client, name string) []string {
	events := &corev1.EventList{}
	g.Expect(c.List(context.Background(), events, client.InNamespace("default"))).To(Succeed())
	var reasons []string
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "Tenant" && e.InvolvedObject.Name == name {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}

func deleteTenant(g Gomega, name string) {
	t := &tenancyv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name}}
	g.Expect(client.IgnoreNotFound(k8s.Delete(context.Background(), t))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(context.Background(), client.ObjectKey{Name: name}, &tenancyv1.Tenant{}))
	}, timeout, interval).Should(BeTrue())
}

func TestTenantCreatesNamespacesAndRBAC(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, newTenant("alpha", "alpha-", "dev", "prod"))).To(Succeed())
	tenant := eventuallyReady(g, "alpha")

	g.Expect(tenant.Finalizers).To(ContainElement(Finalizer))
	g.Expect(tenant.Status.Namespaces).To(Equal([]tenancyv1.TenantNamespaceStatus{
		{Name: "alpha-dev", State: tenancyv1.NamespaceReady}, {Name: "alpha-prod", State: tenancyv1.NamespaceReady},
	}))
	for _, name := range []string{"alpha-dev", "alpha-prod"} {
		ns := getNamespace(g, name)
		g.Expect(ns.Labels).To(HaveKeyWithValue(TenantLabel, "alpha"))
		g.Expect(ns.Annotations).To(HaveKeyWithValue(TenantUIDAnnotation, string(tenant.UID)))
		// No owner reference: the garbage collector must never delete a namespace.
		g.Expect(ns.OwnerReferences).To(BeEmpty())

		rb := &rbacv1.RoleBinding{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: name, Name: adminRoleBindingName}, rb)).To(Succeed())
		g.Expect(rb.RoleRef.Name).To(Equal("admin"))
		g.Expect(rb.Subjects).To(ConsistOf(rbacv1.Subject{Kind: "Group", Name: "alpha-admins", APIGroup: rbacv1.GroupName}))
		// Marks, not an owner reference: deleting the Tenant (or its CRD)
		// must not let the garbage collector take the team's rights away.
		g.Expect(rb.Labels).To(HaveKeyWithValue(TenantLabel, "alpha"))
		g.Expect(rb.OwnerReferences).To(BeEmpty())
		// No viewers, no guardrails: nothing else in the namespace.
		err := k8s.Get(ctx, client.ObjectKey{Namespace: name, Name: viewerRoleBindingName}, &rbacv1.RoleBinding{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		quotas := &corev1.ResourceQuotaList{}
		g.Expect(k8s.List(ctx, quotas, client.InNamespace(name))).To(Succeed())
		g.Expect(quotas.Items).To(BeEmpty())
	}

	// The admin's effective rights, as the API server's authorizer sees them.
	// (envtest runs no ClusterRole aggregation, so the built-in admin role is
	// empty here: what it grants in the namespaces is checked by the e2e suite.)
	g.Eventually(func(g Gomega) {
		g.Expect(canI(g, "alpha-admins", "get", "tenants", "tenancy.trellis.dev", "", "alpha")).To(BeTrue())
		g.Expect(canI(g, "alpha-admins", "get", "namespaces", "", "", "alpha-dev")).To(BeTrue())
	}, timeout, interval).Should(Succeed())
	g.Expect(canI(g, "alpha-admins", "create", "deployments", "apps", "default", "")).To(BeFalse())
	g.Expect(canI(g, "alpha-admins", "list", "secrets", "", "", "")).To(BeFalse())
	g.Expect(canI(g, "alpha-admins", "update", "tenants", "tenancy.trellis.dev", "", "alpha")).To(BeFalse())
	g.Expect(canI(g, "alpha-admins", "get", "tenants", "tenancy.trellis.dev", "", "other")).To(BeFalse())
	g.Expect(canI(g, "alpha-admins", "delete", "namespaces", "", "", "alpha-dev")).To(BeFalse())
	g.Expect(canI(g, "alpha-admins", "get", "namespaces", "", "", "default")).To(BeFalse())

	// Ready is announced; creating namespaces is routine and stays out of
	// the event stream (a log line and trellis_tenant_namespaces_added_total).
	g.Eventually(func(g Gomega) {
		g.Expect(tenantEventReasons(g, "alpha")).To(ContainElement(conditions.ReasonReady))
	}, timeout, interval).Should(Succeed())
	g.Expect(tenantEventReasons(g, "alpha")).NotTo(ContainElement("NamespaceCreated"))
	deleteTenant(g, "alpha")
}

func TestTenantAdminsAreIsolated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, newTenant("iso-a", "iso-a-", "app"))).To(Succeed())
	g.Expect(k8s.Create(ctx, newTenant("iso-b", "iso-b-", "app"))).To(Succeed())
	eventuallyReady(g, "iso-a")
	eventuallyReady(g, "iso-b")
	g.Eventually(func(g Gomega) {
		g.Expect(canI(g, "iso-a-admins", "get", "namespaces", "", "", "iso-a-app")).To(BeTrue())
	}, timeout, interval).Should(Succeed())
	g.Expect(canI(g, "iso-a-admins", "get", "secrets", "", "iso-b-app", "")).To(BeFalse())
	g.Expect(canI(g, "iso-a-admins", "get", "tenants", "tenancy.trellis.dev", "", "iso-b")).To(BeFalse())
	g.Expect(canI(g, "iso-b-admins", "get", "namespaces", "", "", "iso-a-app")).To(BeFalse())
	deleteTenant(g, "iso-a")
	deleteTenant(g, "iso-b")
}

func TestTenantShrinkRetainKeepsNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, newTenant("keep", "keep-", "a", "b"))).To(Succeed())
	eventuallyReady(g, "keep")
	// Something the team put in keep-b.
	g.Expect(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "keep-b", Name: "data"}})).To(Succeed())

	tenant := getTenant(g, "keep")
	tenant.Spec.Namespaces = []string{"a"}
	g.Expect(k8s.Update(ctx, tenant)).To(Succeed())
	eventuallyReady(g, "keep")

	g.Eventually(func(g Gomega) {
		ns := getNamespace(g, "keep-b")
		g.Expect(ns.DeletionTimestamp).To(BeNil())
		g.Expect(ns.Labels).NotTo(HaveKey(TenantLabel))
		g.Expect(ns.Annotations).NotTo(HaveKey(TenantUIDAnnotation))
		err := k8s.Get(ctx, client.ObjectKey{Namespace: "keep-b", Name: adminRoleBindingName}, &rbacv1.RoleBinding{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}, timeout, interval).Should(Succeed())
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "keep-b", Name: "data"}, &corev1.ConfigMap{})).To(Succeed())
	// The admin lost the rights there, and its ClusterRole no longer names it.
	g.Eventually(func(g Gomega) {
		g.Expect(canI(g, "keep-admins", "get", "configmaps", "", "keep-b", "")).To(BeFalse())
		g.Expect(canI(g, "keep-admins", "get", "namespaces", "", "", "keep-b")).To(BeFalse())
	}, timeout, interval).Should(Succeed())

	// Growing again: keep-b now exists without our marks, so it is a
	// conflict, untouched (releasing was the user's act; only a cluster
	// admin's hand-over gives it back).
	tenant = getTenant(g, "keep")
	tenant.Spec.Namespaces = []string{"a", "b"}
	g.Expect(k8s.Update(ctx, tenant)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(getTenant(g, "keep").Status.Conditions, conditions.Ready)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(ReasonNamespaceConflict))
	}, timeout, interval).Should(Succeed())
	g.Expect(getNamespace(g, "keep-b").Labels).NotTo(HaveKey(TenantLabel))
	deleteTenant(g, "keep")
}

func TestTenantShrinkDeleteDeletesOnlyItsNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tenant := newTenant("drop", "drop-", "a", "b")
	tenant.Spec.NamespaceDeletionPolicy = tenancyv1.NamespaceDelete
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	eventuallyReady(g, "drop")

	tenant = getTenant(g, "drop")
	tenant.Spec.Namespaces = []string{"a"}
	g.Expect(k8s.Update(ctx, tenant)).To(Succeed())
	// envtest runs no namespace controller, so a deleted namespace stays Terminating.
	g.Eventually(func(g Gomega) {
		g.Expect(getNamespace(g, "drop-b").DeletionTimestamp).NotTo(BeNil())
	}, timeout, interval).Should(Succeed())
	g.Expect(getNamespace(g, "drop-a").DeletionTimestamp).To(BeNil())
	eventuallyReady(g, "drop")
	deleteTenant(g, "drop")
}

func TestTenantNeverTakesForeignOrProtectedNamespaces(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	foreign := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "clash-dev", Labels: map[string]string{"owner": "someone"}}}
	g.Expect(k8s.Create(ctx, foreign)).To(Succeed())

	tenant := newTenant("clash", "clash-", "dev", "ok")
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	// The manager's own namespace and the operator's extra pattern are refused too.
	protected := newTenant("grabby", "", "trellis-system", "protected-x", "fine-grabby")
	g.Expect(k8s.Create(ctx, protected)).To(Succeed())

	g.Eventually(func(g Gomega) {
		st := getTenant(g, "clash").Status
		c := meta.FindStatusCondition(st.Conditions, conditions.Ready)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(ReasonNamespaceConflict))
		g.Expect(st.Namespaces).To(ContainElement(tenancyv1.TenantNamespaceStatus{
			Name: "clash-dev", State: tenancyv1.NamespaceConflict,
			Message: "namespace clash-dev already exists and was not created by this Tenant; it is left untouched " +
				"(a cluster admin can hand it over with the annotation tenancy.trellis.dev/hand-over-to=<tenant>)",
		}))
		g.Expect(st.Namespaces).To(ContainElement(tenancyv1.TenantNamespaceStatus{Name: "clash-ok", State: tenancyv1.NamespaceReady}))
	}, timeout, interval).Should(Succeed())
	got := getNamespace(g, "clash-dev")
	g.Expect(got.Labels).To(Equal(map[string]string{"owner": "someone", "kubernetes.io/metadata.name": "clash-dev"}))
	g.Expect(got.Annotations).NotTo(HaveKey(TenantUIDAnnotation))
	err := k8s.Get(ctx, client.ObjectKey{Namespace: "clash-dev", Name: adminRoleBindingName}, &rbacv1.RoleBinding{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no RoleBinding in a foreign namespace")

	g.Eventually(func(g Gomega) {
		st := getTenant(g, "grabby").Status
		g.Expect(st.Namespaces).To(HaveLen(3))
		g.Expect(st.Namespaces[0].State).To(Equal(tenancyv1.NamespaceProtected))
		g.Expect(st.Namespaces[0].Message).To(ContainSubstring("namespace Trellis runs in"))
		g.Expect(st.Namespaces[1].State).To(Equal(tenancyv1.NamespaceProtected))
		g.Expect(st.Namespaces[1].Message).To(ContainSubstring("protected pattern"))
		g.Expect(st.Namespaces[2].State).To(Equal(tenancyv1.NamespaceReady))
	}, timeout, interval).Should(Succeed())
	g.Expect(getNamespace(g, testManagerNamespace()).Labels).NotTo(HaveKey(TenantLabel))

	// A second Tenant claiming a name the first holds: the first keeps it.
	g.Expect(k8s.Create(ctx, newTenant("second", "clash-", "ok"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		st := getTenant(g, "second").Status
		g.Expect(st.Namespaces).To(ConsistOf(tenancyv1.TenantNamespaceStatus{
			Name: "clash-ok", State: tenancyv1.NamespaceConflict,
			Message: `namespace clash-ok belongs to Tenant "clash"; it is left untouched`,
		}))
	}, timeout, interval).Should(Succeed())
	g.Expect(getNamespace(g, "clash-ok").Labels).To(HaveKeyWithValue(TenantLabel, "clash"))
	g.Expect(canI(g, "second-admins", "get", "secrets", "", "clash-ok", "")).To(BeFalse())

	deleteTenant(g, "second")
	deleteTenant(g, "grabby")
	deleteTenant(g, "clash")
	// Deleting "clash" (Retain) left the foreign namespace exactly as it was.
	g.Expect(getNamespace(g, "clash-dev").Labels).To(HaveKeyWithValue("owner", "someone"))
	g.Expect(getNamespace(g, "clash-dev").DeletionTimestamp).To(BeNil())
}

func testManagerNamespace() string { return "trellis-system" }

func TestTenantDeletionFollowsPolicy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	retain := newTenant("bye-retain", "bye-r-", "x")
	del := newTenant("bye-delete", "bye-d-", "x")
	del.Spec.NamespaceDeletionPolicy = tenancyv1.NamespaceDelete
	g.Expect(k8s.Create(ctx, retain)).To(Succeed())
	g.Expect(k8s.Create(ctx, del)).To(Succeed())
	eventuallyReady(g, "bye-retain")
	eventuallyReady(g, "bye-delete")

	deleteTenant(g, "bye-retain")
	deleteTenant(g, "bye-delete")
	ns := getNamespace(g, "bye-r-x")
	g.Expect(ns.DeletionTimestamp).To(BeNil())
	g.Expect(ns.Labels).NotTo(HaveKey(TenantLabel))
	g.Expect(getNamespace(g, "bye-d-x").DeletionTimestamp).NotTo(BeNil())
	err := k8s.Get(ctx, client.ObjectKey{Namespace: "bye-r-x", Name: adminRoleBindingName}, &rbacv1.RoleBinding{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the retained namespace no longer grants the team anything")
	// The per-tenant ClusterRole and its binding go with their Tenant: the
	// finalizer deletes them (there is no owner reference for the garbage
	// collector to follow).
	for _, name := range []string{"trellis:tenant:bye-retain", "trellis:tenant:bye-delete"} {
		err := k8s.Get(ctx, client.ObjectKey{Name: name}, &rbacv1.ClusterRole{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "ClusterRole %s", name)
		err = k8s.Get(ctx, client.ObjectKey{Name: name}, &rbacv1.ClusterRoleBinding{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "ClusterRoleBinding %s", name)
	}
}

func TestUnchangedTenantMakesZeroWrites(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	quiet := newGuardedTenant("quiet", "quiet-", "a", "b", "c")
	quiet.Spec.Admins = append(quiet.Spec.Admins, tenancyv1.Subject{Kind: "ServiceAccount", Name: "ci", Namespace: "quiet-a"})
	quiet.Spec.Viewers = []tenancyv1.Subject{{Kind: "Group", Name: "auditors", APIGroup: rbacv1.GroupName}}
	g.Expect(k8s.Create(ctx, quiet)).To(Succeed())
	eventuallyReady(g, "quiet")
	waitForQuiet(g)

	// Direct reconciles, and the periodic re-verification (every 2s here)
	// for a few rounds: nothing may be written.
	mgrWrites.Reset()
	lists := podListsIn("quiet-")
	for range 5 {
		res, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: "quiet"}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.RequeueAfter).To(BeNumerically("~", 2*time.Second, 200*time.Millisecond), "a Ready tenant is looked at again after the re-verify interval, jittered")
	}
	time.Sleep(5 * time.Second)
	g.Expect(writesFor("quiet")).To(BeEmpty())
	g.Expect(podListsIn("quiet-")).To(Equal(lists), "its pods met its Pod Security level: none is listed again")
	deleteTenant(g, "quiet")
}

// waitForQuiet waits until the manager has written nothing for half a second.
func waitForQuiet(g Gomega) { waitForQuietOf(g, &mgrWrites) }

func waitForQuietOf(g Gomega, writes *testenv.WriteCounter) {
	g.Eventually(func() error {
		before, _ := writes.Writes()
		time.Sleep(500 * time.Millisecond)
		if after, paths := writes.Writes(); after != before {
			return fmt.Errorf("still writing: %v", paths[before:])
		}
		return nil
	}, timeout, interval).Should(Succeed())
}

// writesFor lists the writes counted since the last Reset whose path names the tenant.
func writesFor(tenant string) []string {
	_, paths := mgrWrites.Writes()
	var mine []string
	for _, p := range paths {
		if strings.Contains(p, tenant) {
			mine = append(mine, p)
		}
	}
	return mine
}

// TestCreationWritesAreTheDesignMinimum pins the writes a new Tenant costs:
// one create per object, one status patch; no confirming read turned into a
// write, nothing applied twice, and no finalizer patch where config/admission
// sets it at creation (Kubernetes 1.36 and later). Below 1.36 (make test runs
// this on 1.33 too) the controller's own finalizer patch is the one write
// more. (Events are left out: the recorder sends them, and only the Ready one
// is expected.)
func TestCreationWritesAreTheDesignMinimum(t *testing.T) {
	mutating, err := testenv.ServesMutatingPolicies(k8s)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		tenant *tenancyv1.Tenant
		want   []string
	}{
		"no guardrails": {
			tenant: newTenant("wmin", "wmin-", "a", "b", "c"),
			want: []string{
				"POST namespaces", "POST namespaces", "POST namespaces",
				"POST rolebindings", "POST rolebindings", "POST rolebindings",
				"POST clusterroles", "POST clusterrolebindings",
				"PATCH tenants/wmin/status",
			},
		},
		"every guardrail": {
			tenant: func() *tenancyv1.Tenant {
				t := newGuardedTenant("wmax", "wmax-", "a", "b", "c")
				t.Spec.Viewers = []tenancyv1.Subject{{Kind: "Group", Name: "auditors", APIGroup: rbacv1.GroupName}}
				return t
			}(),
			want: append(repeat(3,
				"POST namespaces", "POST rolebindings", "POST rolebindings", "POST resourcequotas", "POST limitranges", "POST networkpolicies"),
				"POST clusterroles", "POST clusterrolebindings", "PATCH tenants/wmax/status"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			if !mutating {
				tc.want = append(tc.want, "PATCH tenants/"+tc.tenant.Name)
			}
			waitForQuiet(g)
			mgrWrites.Reset()
			lists := podListsIn(tc.tenant.Name + "-")
			g.Expect(k8s.Create(context.Background(), tc.tenant)).To(Succeed())
			eventuallyReady(g, tc.tenant.Name)
			waitForQuiet(g)
			g.Expect(podListsIn(tc.tenant.Name+"-")).To(Equal(lists), "new namespaces hold no pod from before their Pod Security level")
			_, paths := mgrWrites.Writes()
			var got []string
			for _, p := range paths {
				if !strings.Contains(p, "/events") { // Events: the one Ready, through the recorder
					got = append(got, shortWrite(p))
				}
			}
			g.Expect(got).To(ConsistOf(tc.want), "writes: %v", paths)
			deleteTenant(g, tc.tenant.Name)
		})
	}
}

func repeat(n int, items ...string) []string {
	var out []string
	for range n {
		out = append(out, items...)
	}
	return out
}

// shortWrite turns "POST /api/v1/namespaces/x/resourcequotas" into
// "POST resourcequotas", and a write to a Tenant into "PATCH tenants/<name>[/status]".
func shortWrite(p string) string {
	verb, path, _ := strings.Cut(p, " ")
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i, part := range parts {
		if part == "tenants" {
			return verb + " " + strings.Join(parts[i:], "/")
		}
	}
	if verb == "POST" {
		return verb + " " + parts[len(parts)-1]
	}
	return p
}

func TestDriftIsRepaired(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, newTenant("drift", "drift-", "a"))).To(Succeed())
	eventuallyReady(g, "drift")

	// Strip our labels from the namespace: it leaves the label-selected
	// cache, which the controller sees as a deletion mapped back to its
	// tenant; the uncached read finds it still there, marked by the tenant's
	// UID, and the labels are put back.
	ns := getNamespace(g, "drift-a")
	delete(ns.Labels, TenantLabel)
	delete(ns.Labels, "app.kubernetes.io/managed-by")
	g.Expect(k8s.Update(ctx, ns)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getNamespace(g, "drift-a").Labels).To(HaveKeyWithValue(TenantLabel, "drift"))
	}, timeout, interval).Should(Succeed())

	// A hand-edited RoleBinding is restored.
	rb := &rbacv1.RoleBinding{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "drift-a", Name: adminRoleBindingName}, rb)).To(Succeed())
	rb.Subjects = append(rb.Subjects, rbacv1.Subject{Kind: "User", Name: "intruder", APIGroup: rbacv1.GroupName})
	g.Expect(k8s.Update(ctx, rb)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &rbacv1.RoleBinding{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "drift-a", Name: adminRoleBindingName}, got)).To(Succeed())
		g.Expect(got.Subjects).To(HaveLen(1))
	}, timeout, interval).Should(Succeed())

	// A deleted RoleBinding is created again.
	g.Expect(k8s.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "drift-a", Name: adminRoleBindingName}})).To(Succeed())
	g.Eventually(func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: "drift-a", Name: adminRoleBindingName}, &rbacv1.RoleBinding{})
	}, timeout, interval).Should(Succeed())
	deleteTenant(g, "drift")
}

// admTenant is a valid Tenant changed by mutate.
func admTenant(mutate func(*tenancyv1.Tenant)) *tenancyv1.Tenant {
	t := newTenant("adm", "", "a")
	mutate(t)
	return t
}

func subjectGroup(name string) tenancyv1.Subject {
	return tenancyv1.Subject{Kind: "Group", Name: name, APIGroup: rbacv1.GroupName}
}

// TestTenantAdmission: hostile and mistaken input is refused by the API
// server, with a message that says what is wrong.
func TestTenantAdmission(t *testing.T) {
	ctx := context.Background()
	q := resource.MustParse
	seventeen := make([]tenancyv1.Subject, 17)
	for i := range seventeen {
		seventeen[i] = subjectGroup(fmt.Sprintf("g%d", i))
	}
	cases := map[string]struct {
		tenant *tenancyv1.Tenant
		want   string
	}{
		"no namespaces":     {newTenant("adm", "adm-"), "spec.namespaces: Required value"},
		"kube- prefix":      {newTenant("adm", "kube-", "x"), "reserved"},
		"default":           {newTenant("adm", "", "default"), "reserved"},
		"too long":          {newTenant("adm", strings.Repeat("a", 60), "abcde"), "DNS label"},
		"upper case":        {newTenant("adm", "", "Dev"), "DNS label"},
		"trailing dash":     {newTenant("adm", "x-", "dev-"), "DNS label"},
		"duplicate":         {newTenant("adm", "", "a", "a"), "Duplicate value"},
		"bad tenant name":   {newTenant("Bad_Name", "", "a"), "a Tenant name must be a DNS label"},
		"bad policy":        {admTenant(func(t *tenancyv1.Tenant) { t.Spec.NamespaceDeletionPolicy = "Shred" }), "Unsupported value"},
		"no admin at all":   {admTenant(func(t *tenancyv1.Tenant) { t.Spec.Admins = nil }), "a Tenant needs at least one admin"},
		"17 admins":         {admTenant(func(t *tenancyv1.Tenant) { t.Spec.Admins = seventeen }), "Too many: 17: must have at most 16 items"},
		"16 admins + admin": {admTenant(func(t *tenancyv1.Tenant) { t.Spec.Admins = seventeen[:16]; t.Spec.Admin = subjectGroup("legacy") }), "at most 16 admins, the deprecated admin included"},
		"17 viewers":        {admTenant(func(t *tenancyv1.Tenant) { t.Spec.Viewers = seventeen }), "Too many: 17: must have at most 16 items"},
		"sa without ns": {admTenant(func(t *tenancyv1.Tenant) {
			t.Spec.Admins = []tenancyv1.Subject{{Kind: "ServiceAccount", Name: "ci"}}
		}), "a ServiceAccount needs a namespace"},
		"group with ns":    {admTenant(func(t *tenancyv1.Tenant) { t.Spec.Admins[0].Namespace = "x" }), "needs apiGroup rbac.authorization.k8s.io and no namespace"},
		"user no apiGroup": {admTenant(func(t *tenancyv1.Tenant) { t.Spec.Admins[0].APIGroup = "" }), "needs apiGroup rbac.authorization.k8s.io"},
		"unknown kind":     {admTenant(func(t *tenancyv1.Tenant) { t.Spec.Admins[0].Kind = "Robot" }), "Unsupported value"},
		"empty admin name": {admTenant(func(t *tenancyv1.Tenant) { t.Spec.Admins[0].Name = "" }), "spec.admins[0].name"},
		"deprecated admin, bad": {admTenant(func(t *tenancyv1.Tenant) {
			t.Spec.Admin = tenancyv1.Subject{Kind: "ServiceAccount", Name: "ci"}
		}), "spec.admin: Invalid value"},
		"negative quota (string)": {admTenant(func(t *tenancyv1.Tenant) {
			t.Spec.Quota.Hard = corev1.ResourceList{"requests.cpu": q("-1")}
		}), "quantities must not be negative"},
		"negative quota (milli)": {admTenant(func(t *tenancyv1.Tenant) {
			t.Spec.Quota.Hard = corev1.ResourceList{"pods": q("10"), "limits.memory": q("-512Mi")}
		}), "quantities must not be negative"},
		"quota resource name": {admTenant(func(t *tenancyv1.Tenant) {
			t.Spec.Quota.Hard = corev1.ResourceList{"no spaces allowed": q("1")}
		}), "resource names are qualified names"},
		"negative limit": {admTenant(func(t *tenancyv1.Tenant) {
			t.Spec.LimitRange.Limits = []tenancyv1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{"cpu": q("-2")}}}
		}), "quantities must not be negative"},
		"limit of an unknown type": {admTenant(func(t *tenancyv1.Tenant) {
			t.Spec.LimitRange.Limits = []tenancyv1.LimitRangeItem{{Type: "Node", Max: corev1.ResourceList{"cpu": q("2")}}}
		}), "Unsupported value: \"Node\""},
		"limit without bounds": {admTenant(func(t *tenancyv1.Tenant) {
			t.Spec.LimitRange.Limits = []tenancyv1.LimitRangeItem{{Type: corev1.LimitTypeContainer}}
		}), "spec.limitRange.limits[0]: Invalid value"},
		"unknown PSA level": {admTenant(func(t *tenancyv1.Tenant) {
			t.Spec.PodSecurity = tenancyv1.PodSecurity{Enforce: "strict"}
		}), "spec.podSecurity.enforce: Unsupported value: \"strict\""},
		"unknown PSA warn level": {admTenant(func(t *tenancyv1.Tenant) {
			t.Spec.PodSecurity = tenancyv1.PodSecurity{Enforce: "baseline", Warn: "Restricted"}
		}), "spec.podSecurity.warn: Unsupported value"},
		"PSA without enforce": {admTenant(func(t *tenancyv1.Tenant) {
			t.Spec.PodSecurity = tenancyv1.PodSecurity{Warn: "baseline"}
		}), "spec.podSecurity.enforce: Required value"},
		"Trellis' label": {admTenant(func(t *tenancyv1.Tenant) {
			t.Spec.NamespaceMetadata.Labels = map[string]tenancyv1.LabelValue{"tenancy.trellis.dev/tenant": "someone-else"}
		}), "labels of Trellis' own"},
		"managed-by label": {admTenant(func(t *tenancyv1.Tenant) {
			t.Spec.NamespaceMetadata.Labels = map[string]tenancyv1.LabelValue{"app.kubernetes.io/managed-by": "me"}
		}), "labels of Trellis' own"},
		"Trellis' annotation": {admTenant(func(t *tenancyv1.Tenant) {
			t.Spec.NamespaceMetadata.Annotations = map[string]tenancyv1.AnnotationValue{"tenancy.trellis.dev/hand-over-to": "other"}
		}), "annotations of Trellis' own"},
		"PSA label by metadata": {admTenant(func(t *tenancyv1.Tenant) {
			t.Spec.NamespaceMetadata.Labels = map[string]tenancyv1.LabelValue{"pod-security.kubernetes.io/enforce": "privileged"}
		}), "labels under kubernetes.io and k8s.io are reserved"},
		"kubernetes.io label": {admTenant(func(t *tenancyv1.Tenant) {
			t.Spec.NamespaceMetadata.Labels = map[string]tenancyv1.LabelValue{"kubernetes.io/metadata.name": "kube-system"}
		}), "labels under kubernetes.io and k8s.io are reserved"},
		"k8s.io subdomain annotation": {admTenant(func(t *tenancyv1.Tenant) {
			t.Spec.NamespaceMetadata.Annotations = map[string]tenancyv1.AnnotationValue{"scheduler.alpha.k8s.io/node-selector": "a=b"}
		}), "annotations under kubernetes.io and k8s.io are reserved"},
		"bad label key": {admTenant(func(t *tenancyv1.Tenant) {
			t.Spec.NamespaceMetadata.Labels = map[string]tenancyv1.LabelValue{"-bad": "x"}
		}), "label keys must be qualified names"},
		"bad label value": {admTenant(func(t *tenancyv1.Tenant) {
			t.Spec.NamespaceMetadata.Labels = map[string]tenancyv1.LabelValue{"team": "not a value"}
		}), "spec.namespaceMetadata.labels.team"},
		"isolation from a bad name": {admTenant(func(t *tenancyv1.Tenant) {
			t.Spec.NetworkIsolation = &tenancyv1.NetworkIsolation{AllowFromNamespaces: []string{"Ingress_NGINX"}}
		}), "spec.networkIsolation.allowFromNamespaces[0]"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			err := k8s.Create(ctx, tc.tenant)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
		})
	}

	t.Run("prefix is immutable", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(k8s.Create(ctx, newTenant("immut", "imm-", "a"))).To(Succeed())
		// A patch, so the controller's own writes (finalizer, status) cannot turn it into a conflict.
		err := k8s.Patch(ctx, getTenant(g, "immut"), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"namespacePrefix":"other-"}}`)))
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("namespacePrefix is immutable"))
		deleteTenant(g, "immut")
	})
	t.Run("a ServiceAccount admin is accepted", func(t *testing.T) {
		g := NewWithT(t)
		tenant := newTenant("sa-admin", "sa-", "a")
		tenant.Spec.Admins = []tenancyv1.Subject{{Kind: "ServiceAccount", Name: "ci", Namespace: "sa-a"}}
		g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
		eventuallyReady(g, "sa-admin")
		g.Eventually(func(g Gomega) {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:               "system:serviceaccount:sa-a:ci",
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "namespaces", Name: "sa-a"},
			}}
			g.Expect(k8s.Create(ctx, sar)).To(Succeed())
			g.Expect(sar.Status.Allowed).To(BeTrue())
		}, timeout, interval).Should(Succeed())
		deleteTenant(g, "sa-admin")
	})
	t.Run("the deprecated admin still works, alone", func(t *testing.T) {
		g := NewWithT(t)
		tenant := newTenant("legacy", "legacy-", "a")
		tenant.Spec.Admins = nil
		tenant.Spec.Admin = subjectGroup("legacy-team")
		g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
		eventuallyReady(g, "legacy")
		rb := &rbacv1.RoleBinding{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "legacy-a", Name: adminRoleBindingName}, rb)).To(Succeed())
		g.Expect(rb.Subjects).To(Equal([]rbacv1.Subject{{Kind: "Group", Name: "legacy-team", APIGroup: rbacv1.GroupName}}))
		deleteTenant(g, "legacy")
	})
}

// TestNewObjectsAreInProgressBeforeAnyReconcile: no controller of these
// kinds runs in this suite, so what kstatus reads is the API server's alone.
// status.observedGeneration defaults to 0, below the generation (1): a GitOps
// tool waits for a controller instead of calling a new object Current.
func TestNewObjectsAreInProgressBeforeAnyReconcile(t *testing.T) {
	ctx := context.Background()
	manifests := map[string]string{
		"MarkdownView": `{"apiVersion":"view.trellis.dev/v1","kind":"MarkdownView","metadata":{"name":"fresh","namespace":"default"},"spec":{"markdowns":{"a.md":"# A"}}}`,
		"ObjectStore": `{"apiVersion":"storage.trellis.dev/v1","kind":"ObjectStore","metadata":{"name":"fresh"},` +
			`"spec":{"endpoint":"http://127.0.0.1:1","credentialsSecretRef":{"namespace":"trellis-system","name":"x"}}}`,
		"StorageBucket": `{"apiVersion":"storage.trellis.dev/v1","kind":"StorageBucket","metadata":{"name":"fresh","namespace":"default"},"spec":{"storeRef":{"name":"fresh"}}}`,
	}
	for kind, manifest := range manifests {
		t.Run(kind, func(t *testing.T) {
			g := NewWithT(t)
			res, err := testenv.KStatusOfNew(ctx, k8s, manifest)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Status).To(Equal(kstatus.InProgressStatus), res.Message)
		})
	}
}

// TestEveryWriteIsTrellis: namespaces, RBAC objects and the Tenant's status
// name trellis alone as their field manager; the finalizer, set at admission,
// is no one's.
func TestEveryWriteIsTrellis(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	owned := newGuardedTenant("owned", "owned-", "a")
	owned.Spec.Viewers = []tenancyv1.Subject{subjectGroup("auditors")}
	g.Expect(k8s.Create(ctx, owned)).To(Succeed())
	eventuallyReady(g, "owned")

	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "owned-a"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "owned-a", Name: adminRoleBindingName}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "owned-a", Name: viewerRoleBindingName}},
		&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "owned-a", Name: quotaName}},
		&corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: "owned-a", Name: limitRangeName}},
		&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "owned-a", Name: networkPolicyName}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "trellis:tenant:owned"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "trellis:tenant:owned"}},
	} {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		managers := testenv.FieldManagers(obj)
		if _, isNamespace := obj.(*corev1.Namespace); isNamespace {
			delete(managers, "status") // the API server sets a namespace's phase itself
		}
		g.Expect(managers).To(Equal(map[string][]string{"": {"trellis"}}), "%T %s", obj, obj.GetName())
	}
	tenant := getTenant(g, "owned")
	managers := testenv.FieldManagers(tenant)
	g.Expect(managers["status"]).To(ConsistOf("trellis"))
	// The spec is the test's; the finalizer is there, owned by no one.
	g.Expect(tenant.Finalizers).To(ContainElement(Finalizer))
	for _, e := range tenant.ManagedFields {
		g.Expect(e.FieldsV1.GetRawString()).NotTo(ContainSubstring("finalizers"), "manager %s", e.Manager)
	}
	deleteTenant(g, "owned")
}
