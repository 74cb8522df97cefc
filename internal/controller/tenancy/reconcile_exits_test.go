package tenancy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/apierr"
	"github.com/trellis-dev/trellis/internal/controller/children"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/controller/status"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// TestTenantReconcileExits drives the Tenant reconcile through every exit,
// on testenv.Fake, with the errors of a row injected by verb, kind and
// name. The cache the reconcile reads is modelled as the manager's: of the child kinds it holds only what carries
// managed-by=trellis (every NetworkPolicy), so a name someone else holds is
// found only by the uncached read after a create refused as existing. Each
// row names the exit and checks the result, the class of the error, the
// status written (Ready's reason, Reconciling or Stalled, observedGeneration,
// each namespace's state, and how many status writes) and the Events.
//
// The exits of Reconcile (tenant_controller.go), each taken by the rows named:
//
//   - reading the Tenant fails: returned, nothing written, its metrics kept
//     ("reading the Tenant fails").
//   - the Tenant is gone: its metrics forgotten ("not found").
//   - deleting, finalize (tenant_release.go) returns, never a status: without
//     our finalizer, nothing ("deleting, without our finalizer"); reading
//     the CRD fails ("deleting, reading the CRD fails"); the CRD gone or
//     going, nothing touched, let go ("deleting while the CRD is deleted",
//     "deleting, the CRD gone"); releaseAll fails, the finalizer stays
//     (listing the namespaces; deleting one, forbidden or not; one replaced
//     since it was listed, a race; a binding or the marks under Retain; the
//     ClusterRole: the "deleted ..., ... fails" rows); the finalizer removal
//     conflicts or fails; released or deleted, let go ("deleted (Delete)",
//     "deleted (Retain)").
//   - adding the finalizer conflicts: quiet; fails: ReconcileError.
//   - a write lost a race (409): no error, no status, again at once and
//     counted in trellis_reconcile_conflicts_total (the
//     "conflicts" and "replaced since it was listed" rows: a namespace, a
//     RoleBinding, the ClusterRole, a dropped namespace's delete or release).
//   - the status write fails: returned, joined to a step's error if any
//     ("the status write fails", "a step fails and the status write fails
//     too").
//   - a step failed: ReconcileError, the error returned (the "fails" rows:
//     reading a namespace from the cache or the API server, telling whose
//     it is, listing the tenant's namespaces, writing a child, removing one,
//     deleting or releasing a dropped namespace, checking a ServiceAccount
//     subject's namespace, listing NetworkPolicies, listing a namespace's
//     pods). With a person's problem
//     found besides, that is the reason ("blocked, and a step fails").
//   - a person must act: Stalled, looked at again after ForeignChildRetry
//     (NamespaceConflict: someone else's namespace, another Tenant's;
//     ProtectedNamespace; RBACConflict; GuardrailRefused: a namespace or a
//     child refused as Invalid or Forbidden; IsolationUndone).
//   - Ready: looked at again after the reverify interval (new, unchanged,
//     reclaimed, handed over, a dropped namespace deleted or released, a
//     ServiceAccount subject's namespace missing, a pod below the Pod
//     Security level).
//   - none of these: waiting for a namespace being deleted, no requeue ("a
//     namespace being deleted").
//
// One branch cannot be reached: checkIsolation returns ownsChild's error,
// but ownsChild reads nothing for an object in a namespace (only a
// cluster-wide one may name a Tenant to look up).
func TestTenantReconcileExits(t *testing.T) {
	withNamespaces := func(names ...string) func(*tenancyv1.Tenant) {
		return func(t *tenancyv1.Tenant) { t.Spec.Namespaces = names }
	}
	withPolicy := func(p tenancyv1.NamespaceDeletionPolicy) func(*tenancyv1.Tenant) {
		return func(t *tenancyv1.Tenant) { t.Spec.NamespaceDeletionPolicy = p }
	}
	withQuota := func(t *tenancyv1.Tenant) {
		t.Spec.Quota.Hard = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}
	}
	withIsolation := func(t *tenancyv1.Tenant) { t.Spec.NetworkIsolation = &tenancyv1.NetworkIsolation{} }
	withRestricted := func(t *tenancyv1.Tenant) {
		t.Spec.PodSecurity = tenancyv1.PodSecurity{Enforce: tenancyv1.PodSecurityRestricted}
	}
	withServiceAccountAdmin := func(t *tenancyv1.Tenant) {
		t.Spec.Admins = append(t.Spec.Admins, tenancyv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "ci", Name: "deployer"})
	}
	noFinalizer := func(t *tenancyv1.Tenant) { t.Finalizers = nil }
	// drift changes what a settled tenant keeps, so that the next reconcile writes it.
	drift := func(obj client.Object, change func(client.Object)) func(*exitFixture) {
		return func(f *exitFixture) {
			f.edit(obj, change)
		}
	}
	unlabel := func(o client.Object) { delete(o.GetLabels(), partOfLabel) }
	ready := func(names ...string) map[string]tenancyv1.NamespaceState {
		m := map[string]tenancyv1.NamespaceState{}
		for _, n := range names {
			m[n] = tenancyv1.NamespaceReady
		}
		return m
	}
	none := map[string]tenancyv1.NamespaceState{}
	// A tenant's world when it is deleted: its namespace, an admin binding
	// there, its ClusterRole and binding, and the Tenant CRD.
	held := func(mut ...func(*tenancyv1.Tenant)) []client.Object {
		t := exitTenant(mut...)
		return []client.Object{tenantCRD(false), ourNamespace(t, "acme-a"),
			desiredRoleBinding(t, "acme-a", adminRoleBindingName, builtinAdminRole, adminSubjects(t)),
			desiredTenantRole(t, []string{"acme-a"}, nil), desiredTenantRoleBinding(t)}
	}
	retained := func(g Gomega, f *exitFixture) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme-a"}}
		g.Expect(f.read(g, ns)).To(BeTrue(), "kept")
		g.Expect(ns.Labels).To(HaveKeyWithValue(TenantLabel, "acme"), "not released")
		g.Expect(ns.Annotations).To(HaveKeyWithValue(TenantUIDAnnotation, exitUID))
	}
	kept := func(g Gomega, f *exitFixture) {
		retained(g, f)
		g.Expect(f.read(g, desiredTenantRole(exitTenant(), nil, nil))).To(BeTrue())
	}
	writesNothing := func(g Gomega, f *exitFixture) { g.Expect(f.writes()).To(BeEmpty()) }

	cases := map[string]struct {
		tenant *tenancyv1.Tenant // nil: none
		world  []client.Object
		// settled: the tenant is reconciled once, without failures, before
		// prepare, the failures and the reconcile the row checks.
		settled bool
		prepare func(*exitFixture)
		fail    map[string]error
		want    tenantExit
		check   func(Gomega, *exitFixture)
	}{
		// Reading the Tenant.
		"not found: nothing to do, its metrics forgotten": {
			prepare: func(*exitFixture) { readyGauge.WithLabelValues("acme").Set(1) },
			want:    tenantExit{gone: true},
			check: func(g Gomega, f *exitFixture) {
				writesNothing(g, f)
				g.Expect(readySeries(g, "acme")).To(BeFalse())
			},
		},
		"reading the Tenant fails: returned, nothing written, its metrics kept": {
			tenant:  exitTenant(),
			prepare: func(*exitFixture) { readyGauge.WithLabelValues("acme").Set(1) },
			fail:    map[string]error{"get Tenant": errExitUnavailable},
			want:    tenantExit{err: apierr.Transient},
			check: func(g Gomega, f *exitFixture) {
				writesNothing(g, f)
				g.Expect(readySeries(g, "acme")).To(BeTrue(), "a read that failed is no deletion")
			},
		},

		// Its deletion.
		"deleting, without our finalizer: nothing to do": {
			tenant: deletingTenant(func(t *tenancyv1.Tenant) { t.Finalizers = []string{"someone.else/keep"} }),
			world:  held(),
			want:   tenantExit{}, check: writesNothing,
		},
		"deleting, reading the CRD fails: returned, nothing touched, the finalizer stays": {
			tenant: deletingTenant(), world: held(),
			fail: map[string]error{"apiget CustomResourceDefinition": errExitUnavailable},
			want: tenantExit{err: apierr.Transient},
			check: func(g Gomega, f *exitFixture) {
				writesNothing(g, f)
				kept(g, f)
			},
		},
		"deleting while the CRD is deleted: nothing touched, let go": {
			tenant: deletingTenant(withPolicy(tenancyv1.NamespaceDelete)),
			world:  append(held()[1:], tenantCRD(true)),
			want:   tenantExit{gone: true},
			check: func(g Gomega, f *exitFixture) {
				g.Expect(f.writes()).To(Equal([]string{"patch Tenant acme"}))
				kept(g, f)
			},
		},
		"deleting, the CRD gone: nothing touched, let go": {
			tenant: deletingTenant(withPolicy(tenancyv1.NamespaceDelete)),
			world:  held()[1:],
			want:   tenantExit{gone: true},
			check: func(g Gomega, f *exitFixture) {
				g.Expect(f.writes()).To(Equal([]string{"patch Tenant acme"}))
				kept(g, f)
			},
		},
		"deleted (Delete): its namespaces deleted, a protected one untouched, its role removed, let go": {
			tenant: deletingTenant(withPolicy(tenancyv1.NamespaceDelete)),
			world:  append(held(), ourNamespace(exitTenant(), "acme-protected")),
			want:   tenantExit{gone: true, events: []string{"Normal NamespaceDeleted"}},
			check: func(g Gomega, f *exitFixture) {
				g.Expect(f.writes()).To(ConsistOf("delete Namespace acme-a", "delete ClusterRole trellis:tenant:acme",
					"delete ClusterRoleBinding trellis:tenant:acme", "patch Tenant acme"))
				g.Expect(f.writes()[len(f.writes())-1]).To(Equal("patch Tenant acme"), "let go last")
				g.Expect(f.read(g, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme-protected"}})).To(BeTrue())
			},
		},
		"deleted (Retain): its bindings removed, its namespaces released, let go": {
			tenant: deletingTenant(), world: held(),
			want: tenantExit{gone: true, events: []string{"Normal NamespaceReleased"}},
			check: func(g Gomega, f *exitFixture) {
				g.Expect(f.writes()).To(ConsistOf("delete RoleBinding acme-a/trellis-tenant-admin", "patch Namespace acme-a",
					"delete ClusterRole trellis:tenant:acme", "delete ClusterRoleBinding trellis:tenant:acme", "patch Tenant acme"))
				ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme-a"}}
				g.Expect(f.read(g, ns)).To(BeTrue())
				g.Expect(ns.Labels).NotTo(HaveKey(TenantLabel))
				g.Expect(ns.Labels).To(HaveKeyWithValue(ReleasedFromLabel, "acme"))
			},
		},
		"deleted, listing its namespaces fails: returned, the finalizer stays": {
			tenant: deletingTenant(), world: held(),
			fail: map[string]error{"list Namespace": errExitUnavailable},
			want: tenantExit{err: apierr.Transient},
			check: func(g Gomega, f *exitFixture) {
				writesNothing(g, f)
				kept(g, f)
			},
		},
		"deleted (Delete), deleting a namespace fails: returned, the finalizer stays": {
			tenant: deletingTenant(withPolicy(tenancyv1.NamespaceDelete)), world: held(),
			fail: map[string]error{"delete Namespace": errExitUnavailable},
			want: tenantExit{err: apierr.Transient},
			check: func(g Gomega, f *exitFixture) {
				g.Expect(f.writes()).NotTo(ContainElement("patch Tenant acme"))
				retained(g, f)
			},
		},
		"deleted (Delete), the namespace was replaced since it was listed: retried at once, the finalizer stays": {
			tenant: deletingTenant(withPolicy(tenancyv1.NamespaceDelete)), world: held(),
			fail: map[string]error{"delete Namespace": errExitConflict},
			want: tenantExit{err: apierr.Conflict},
			check: func(g Gomega, f *exitFixture) {
				g.Expect(f.writes()).NotTo(ContainElement("patch Tenant acme"))
				retained(g, f)
			},
		},
		"deleted (Delete), deleting a namespace is forbidden: returned, the finalizer stays": {
			tenant: deletingTenant(withPolicy(tenancyv1.NamespaceDelete)), world: held(),
			fail: map[string]error{"delete Namespace": errExitForbidden},
			want: tenantExit{err: apierr.Refused},
			check: func(g Gomega, f *exitFixture) {
				g.Expect(f.writes()).NotTo(ContainElement("patch Tenant acme"))
				retained(g, f)
			},
		},
		"deleted (Retain), removing a binding fails: returned, the finalizer stays": {
			tenant: deletingTenant(), world: held(),
			fail: map[string]error{"delete RoleBinding": errExitUnavailable},
			want: tenantExit{err: apierr.Transient},
			check: func(g Gomega, f *exitFixture) {
				g.Expect(f.writes()).NotTo(ContainElement("patch Tenant acme"))
				retained(g, f)
			},
		},
		"deleted (Retain), releasing a namespace fails: returned, the finalizer stays": {
			tenant: deletingTenant(), world: held(),
			fail: map[string]error{"patch Namespace": errExitUnavailable},
			want: tenantExit{err: apierr.Transient},
			check: func(g Gomega, f *exitFixture) {
				g.Expect(f.writes()).NotTo(ContainElement("patch Tenant acme"))
				retained(g, f)
			},
		},
		"deleted, removing its ClusterRole fails: returned, the finalizer stays": {
			tenant: deletingTenant(), world: held(),
			fail: map[string]error{"delete ClusterRole": errExitUnavailable},
			want: tenantExit{err: apierr.Transient, events: []string{"Normal NamespaceReleased"}},
			check: func(g Gomega, f *exitFixture) {
				g.Expect(f.writes()).NotTo(ContainElement("patch Tenant acme"))
			},
		},
		"deleted, the finalizer removal conflicts: retried at once": {
			tenant: deletingTenant(), world: held(),
			fail: map[string]error{"patch Tenant": errExitConflict},
			want: tenantExit{err: apierr.Conflict, events: []string{"Normal NamespaceReleased"}},
		},
		"deleted, the finalizer removal fails: returned": {
			tenant: deletingTenant(), world: held(),
			fail: map[string]error{"patch Tenant": errExitUnavailable},
			want: tenantExit{err: apierr.Transient, events: []string{"Normal NamespaceReleased"}},
		},

		// The finalizer.
		"new: the finalizer, then its namespace, binding and role; Ready": {
			tenant: exitTenant(noFinalizer),
			want: tenantExit{requeue: exitReverify, ready: conditions.ReasonReady, statusWrites: 1, namespaces: ready("acme-a"),
				events: []string{"Normal Ready"}},
			check: func(g Gomega, f *exitFixture) {
				g.Expect(f.writes()[0]).To(Equal("patch Tenant acme"), "the finalizer first")
				g.Expect(f.writes()).To(ConsistOf("patch Tenant acme", "create Namespace acme-a", "create RoleBinding acme-a/trellis-tenant-admin",
					"create ClusterRole trellis:tenant:acme", "create ClusterRoleBinding trellis:tenant:acme", "status Tenant acme"))
				g.Expect(f.APIReads()).To(BeEmpty(), "a new tenant costs no read of the API server")
			},
		},
		"adding the finalizer conflicts: retried at once, no status, nothing made": {
			tenant: exitTenant(noFinalizer),
			fail:   map[string]error{"patch Tenant": errExitConflict},
			want:   tenantExit{err: apierr.Conflict}, check: writesNothing,
		},
		"adding the finalizer fails: ReconcileError, nothing made": {
			tenant: exitTenant(noFinalizer),
			fail:   map[string]error{"patch Tenant": errExitUnavailable},
			want: tenantExit{err: apierr.Transient, ready: conditions.ReasonReconcileError, also: conditions.Reconciling, statusWrites: 1,
				namespaces: none},
			check: func(g Gomega, f *exitFixture) { g.Expect(f.writes()).To(Equal([]string{"status Tenant acme"})) },
		},

		// Settled.
		"unchanged: nothing read from the API server, nothing written": {
			tenant: exitTenant(withQuota, withIsolation), settled: true,
			want: tenantExit{requeue: exitReverify, ready: conditions.ReasonReady, namespaces: ready("acme-a")},
			check: func(g Gomega, f *exitFixture) {
				writesNothing(g, f)
				g.Expect(f.APIReads()).To(BeEmpty())
			},
		},

		// Its namespaces.
		"a namespace someone else created: NamespaceConflict, not adopted": {
			tenant: exitTenant(), world: []client.Object{foreignNamespace(nil, nil)},
			want: tenantExit{requeue: setup.ForeignChildRetry, ready: ReasonNamespaceConflict, also: conditions.Stalled, statusWrites: 1,
				namespaces: map[string]tenancyv1.NamespaceState{"acme-a": tenancyv1.NamespaceConflict},
				events:     []string{"Warning NamespaceConflict"}},
			check: func(g Gomega, f *exitFixture) {
				ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme-a"}}
				g.Expect(f.read(g, ns)).To(BeTrue())
				g.Expect(ns.Labels).To(BeEmpty(), "left as it was")
				g.Expect(ns.Annotations).To(BeEmpty())
				g.Expect(f.message()).To(ContainSubstring("not created by this Tenant"))
			},
		},
		"a namespace another Tenant holds: NamespaceConflict naming it": {
			tenant: exitTenant(),
			world:  []client.Object{otherTenant(), markedAcmeNamespace("other", "uid-other")},
			want: tenantExit{requeue: setup.ForeignChildRetry, ready: ReasonNamespaceConflict, also: conditions.Stalled, statusWrites: 1,
				namespaces: map[string]tenancyv1.NamespaceState{"acme-a": tenancyv1.NamespaceConflict},
				events:     []string{"Warning NamespaceConflict"}},
			check: func(g Gomega, f *exitFixture) {
				g.Expect(f.message()).To(ContainSubstring(`belongs to Tenant "other"`))
				g.Expect(f.writes()).NotTo(ContainElement(HavePrefix("patch Namespace")))
			},
		},
		"a protected namespace: ProtectedNamespace, never read nor written": {
			tenant: exitTenant(withNamespaces("protected")),
			want: tenantExit{requeue: setup.ForeignChildRetry, ready: ReasonProtectedNamespace, also: conditions.Stalled, statusWrites: 1,
				namespaces: map[string]tenancyv1.NamespaceState{"acme-protected": tenancyv1.NamespaceProtected},
				events:     []string{"Warning ProtectedNamespace"}},
			check: func(g Gomega, f *exitFixture) {
				g.Expect(f.writes()).To(ConsistOf("create ClusterRole trellis:tenant:acme", "create ClusterRoleBinding trellis:tenant:acme",
					"status Tenant acme"))
			},
		},
		"a namespace of another Tenant, and the lookup of that Tenant fails: ReconcileError, not a conflict": {
			tenant: exitTenant(),
			world:  []client.Object{otherTenant(), markedAcmeNamespace("acme", "uid-other")},
			fail:   map[string]error{"list Tenant": errExitUnavailable},
			want: tenantExit{err: apierr.Transient, ready: conditions.ReasonReconcileError, also: conditions.Reconciling, statusWrites: 1,
				namespaces: none},
			check: func(g Gomega, f *exitFixture) {
				ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme-a"}}
				g.Expect(f.read(g, ns)).To(BeTrue())
				g.Expect(ns.Annotations).To(HaveKeyWithValue(TenantUIDAnnotation, "uid-other"), "not taken")
			},
		},
		"reading a namespace from the cache fails: ReconcileError, nothing made there": {
			tenant: exitTenant(),
			fail:   map[string]error{"get Namespace": errExitUnavailable},
			want: tenantExit{err: apierr.Transient, ready: conditions.ReasonReconcileError, also: conditions.Reconciling, statusWrites: 1,
				namespaces: none},
			check: func(g Gomega, f *exitFixture) { g.Expect(f.writes()).To(Equal([]string{"status Tenant acme"})) },
		},
		"the API server does not answer the read of a namespace that exists: ReconcileError, not a conflict": {
			tenant: exitTenant(), world: []client.Object{foreignNamespace(nil, nil)},
			fail: map[string]error{"apiget Namespace": errExitUnavailable},
			want: tenantExit{err: apierr.Transient, ready: conditions.ReasonReconcileError, also: conditions.Reconciling, statusWrites: 1,
				namespaces: none},
			check: func(g Gomega, f *exitFixture) {
				g.Expect(f.message()).NotTo(ContainSubstring("not created by this Tenant"))
			},
		},
		"a Ready namespace missing from the cache, and the API server does not answer: ReconcileError, nothing created": {
			tenant: exitTenant(), settled: true,
			fail: map[string]error{"get Namespace acme-a": apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "acme-a"),
				"apiget Namespace": errExitUnavailable},
			want: tenantExit{err: apierr.Transient, ready: conditions.ReasonReconcileError, also: conditions.Reconciling, statusWrites: 1,
				namespaces: ready("acme-a")},
			check: func(g Gomega, f *exitFixture) {
				g.Expect(f.writes()).To(Equal([]string{"status Tenant acme"}), "no create on a guess")
			},
		},
		"a namespace refused as Forbidden: GuardrailRefused, Stalled": {
			tenant: exitTenant(),
			fail:   map[string]error{"create Namespace": errExitForbidden},
			want: tenantExit{requeue: setup.ForeignChildRetry, ready: ReasonGuardrailRefused, also: conditions.Stalled, statusWrites: 1,
				namespaces: none, events: []string{"Warning GuardrailRefused"}},
			check: func(g Gomega, f *exitFixture) {
				g.Expect(f.message()).To(ContainSubstring("refused Namespace acme-a"))
				g.Expect(f.message()).To(ContainSubstring("denied by a policy"))
			},
		},
		"a namespace's labels conflict: retried at once, no status": {
			tenant: exitTenant(), settled: true,
			prepare: drift(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme-a"}}, unlabel),
			fail:    map[string]error{"patch Namespace": errExitConflict},
			want:    tenantExit{err: apierr.Conflict, ready: conditions.ReasonReady, namespaces: ready("acme-a")},
			check:   writesNothing,
		},
		"reclaimed, held for a Tenant of the name that no longer exists: Ready, NamespaceReclaimed": {
			tenant: exitTenant(), world: []client.Object{withUID(markedAcmeNamespace("acme", "uid-gone"), "uid-ns-a"), leftTenantRole("uid-ns-a")},
			want: tenantExit{requeue: exitReverify, ready: conditions.ReasonReady, statusWrites: 1, namespaces: ready("acme-a"),
				events: []string{"Normal NamespaceReclaimed", "Normal Ready"}},
			check: func(g Gomega, f *exitFixture) { g.Expect(f.writes()).To(ContainElement("patch Namespace acme-a")) },
		},
		"marked by a Tenant that no longer exists, but not recorded as held for it: NamespaceConflict, untouched": {
			tenant: exitTenant(), world: []client.Object{withUID(markedAcmeNamespace("acme", "uid-gone"), "uid-ns-made-later"), leftTenantRole("uid-ns-a")},
			want: tenantExit{requeue: setup.ForeignChildRetry, ready: ReasonNamespaceConflict, also: conditions.Stalled, statusWrites: 1,
				namespaces: map[string]tenancyv1.NamespaceState{"acme-a": tenancyv1.NamespaceConflict}, events: []string{"Warning NamespaceConflict"}},
			check: func(g Gomega, f *exitFixture) {
				g.Expect(f.message()).To(ContainSubstring("namespace acme-a is labelled tenancy.trellis.dev/tenant=acme, but Trellis did not make it"))
				g.Expect(f.writes()).NotTo(ContainElement("patch Namespace acme-a"))
			},
		},
		"labelled with the Tenant's name alone: NamespaceConflict, untouched": {
			tenant: exitTenant(), world: []client.Object{foreignNamespace(map[string]string{TenantLabel: "acme"}, nil)},
			want: tenantExit{requeue: setup.ForeignChildRetry, ready: ReasonNamespaceConflict, also: conditions.Stalled, statusWrites: 1,
				namespaces: map[string]tenancyv1.NamespaceState{"acme-a": tenancyv1.NamespaceConflict}, events: []string{"Warning NamespaceConflict"}},
			check: func(g Gomega, f *exitFixture) {
				g.Expect(f.message()).To(ContainSubstring("a label is not a claim"))
				g.Expect(f.writes()).NotTo(ContainElement("patch Namespace acme-a"))
			},
		},
		"handed over by a cluster admin: Ready, NamespaceHandedOver": {
			tenant: exitTenant(), world: []client.Object{foreignNamespace(nil, map[string]string{HandOverAnnotation: "acme"})},
			want: tenantExit{requeue: exitReverify, ready: conditions.ReasonReady, statusWrites: 1, namespaces: ready("acme-a"),
				events: []string{"Normal NamespaceHandedOver", "Normal Ready"}},
			check: func(g Gomega, f *exitFixture) {
				ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme-a"}}
				g.Expect(f.read(g, ns)).To(BeTrue())
				g.Expect(ns.Annotations).To(HaveKeyWithValue(TenantUIDAnnotation, exitUID))
				g.Expect(ns.Annotations).NotTo(HaveKey(HandOverAnnotation))
			},
		},
		"a namespace being deleted: NamespaceTerminating, no requeue": {
			tenant: exitTenant(), world: []client.Object{terminating(ourNamespace(exitTenant(), "acme-a"))},
			want: tenantExit{ready: ReasonTerminating, also: conditions.Reconciling, statusWrites: 1,
				namespaces: map[string]tenancyv1.NamespaceState{"acme-a": tenancyv1.NamespaceTerminating}},
		},

		// What the namespaces hold, the tenant's role, dropped namespaces.
		"a RoleBinding refused as Invalid: GuardrailRefused, Stalled": {
			tenant: exitTenant(),
			fail:   map[string]error{"create RoleBinding": errExitInvalid},
			want: tenantExit{requeue: setup.ForeignChildRetry, ready: ReasonGuardrailRefused, also: conditions.Stalled, statusWrites: 1,
				namespaces: ready("acme-a"), events: []string{"Warning GuardrailRefused"}},
			check: func(g Gomega, f *exitFixture) {
				g.Expect(f.message()).To(ContainSubstring("refused RoleBinding acme-a/trellis-tenant-admin"))
			},
		},
		"a quota refused as Forbidden: GuardrailRefused, Stalled": {
			tenant: exitTenant(withQuota),
			fail:   map[string]error{"create ResourceQuota": errExitForbidden},
			want: tenantExit{requeue: setup.ForeignChildRetry, ready: ReasonGuardrailRefused, also: conditions.Stalled, statusWrites: 1,
				namespaces: ready("acme-a"), events: []string{"Warning GuardrailRefused"}},
			check: func(g Gomega, f *exitFixture) {
				g.Expect(f.message()).To(ContainSubstring("refused ResourceQuota acme-a/trellis-tenant-quota"))
			},
		},
		"a RoleBinding forbidden while its namespace terminates: ReconcileError, not Stalled": {
			tenant: exitTenant(),
			fail:   map[string]error{"create RoleBinding": namespaceTerminatingError()},
			want: tenantExit{err: apierr.Transient, ready: conditions.ReasonReconcileError, also: conditions.Reconciling, statusWrites: 1,
				namespaces: ready("acme-a")},
		},
		"writing a RoleBinding fails: ReconcileError": {
			tenant: exitTenant(),
			fail:   map[string]error{"create RoleBinding": errExitUnavailable},
			want: tenantExit{err: apierr.Transient, ready: conditions.ReasonReconcileError, also: conditions.Reconciling, statusWrites: 1,
				namespaces: ready("acme-a")},
			check: func(g Gomega, f *exitFixture) {
				g.Expect(f.writes()).To(ContainElement("create ClusterRoleBinding trellis:tenant:acme"), "the round's other writes are done")
			},
		},
		"a RoleBinding write conflicts: retried at once, no status": {
			tenant: exitTenant(), settled: true,
			prepare: drift(&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "acme-a", Name: adminRoleBindingName}},
				func(o client.Object) { o.(*rbacv1.RoleBinding).Subjects = nil }),
			fail:  map[string]error{"patch RoleBinding": errExitConflict},
			want:  tenantExit{err: apierr.Conflict, ready: conditions.ReasonReady, namespaces: ready("acme-a")},
			check: writesNothing,
		},
		"the ClusterRole write conflicts: its binding waits, retried at once, no status": {
			tenant: exitTenant(), settled: true,
			prepare: drift(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "trellis:tenant:acme"}},
				func(o client.Object) { o.(*rbacv1.ClusterRole).Rules = nil }),
			fail: map[string]error{"patch ClusterRole": errExitConflict, "get ClusterRoleBinding": errors.New("not to be read")},
			want: tenantExit{err: apierr.Conflict, ready: conditions.ReasonReady, namespaces: ready("acme-a")},
		},
		"a ClusterRole someone else made: RBACConflict, not adopted": {
			tenant: exitTenant(), world: []client.Object{&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "trellis:tenant:acme"}}},
			want: tenantExit{requeue: setup.ForeignChildRetry, ready: ReasonRBACConflict, also: conditions.Stalled, statusWrites: 1,
				namespaces: ready("acme-a"), events: []string{"Warning RBACConflict"}},
			check: func(g Gomega, f *exitFixture) {
				g.Expect(f.writes()).NotTo(ContainElement(HavePrefix("patch ClusterRole ")))
			},
		},
		"a ClusterRole labelled for another Tenant, and reading that Tenant fails: ReconcileError, not a conflict": {
			tenant: exitTenant(), world: []client.Object{func() client.Object {
				r := desiredTenantRole(exitTenant(), nil, nil)
				r.Labels[TenantLabel] = "other"
				return r
			}()},
			fail: map[string]error{"get Tenant other": errExitUnavailable},
			want: tenantExit{err: apierr.Transient, ready: conditions.ReasonReconcileError, also: conditions.Reconciling, statusWrites: 1,
				namespaces: ready("acme-a")},
		},
		// The first read of a reconcile (the requests in the tenant's
		// namespaces): no namespace was looked at, and a status with none
		// is what the last one said.
		"listing the tenant's namespaces fails: ReconcileError": {
			tenant: exitTenant(),
			fail:   map[string]error{"list Namespace": errExitUnavailable},
			want: tenantExit{err: apierr.Transient, ready: conditions.ReasonReconcileError, also: conditions.Reconciling, statusWrites: 1,
				namespaces: map[string]tenancyv1.NamespaceState{}},
		},
		"removing a guardrail the spec dropped fails: ReconcileError": {
			tenant: exitTenant(), world: []client.Object{ourNamespace(exitTenant(), "acme-a"), desiredQuota(exitTenant(withQuota), "acme-a")},
			fail: map[string]error{"delete ResourceQuota": errExitUnavailable},
			want: tenantExit{err: apierr.Transient, ready: conditions.ReasonReconcileError, also: conditions.Reconciling, statusWrites: 1,
				namespaces: ready("acme-a")},
		},
		"a namespace the spec dropped (Delete): deleted, Ready": {
			tenant: exitTenant(withPolicy(tenancyv1.NamespaceDelete)), world: []client.Object{ourNamespace(exitTenant(), "acme-b")},
			want: tenantExit{requeue: exitReverify, ready: conditions.ReasonReady, statusWrites: 1, namespaces: ready("acme-a"),
				events: []string{"Normal NamespaceDeleted", "Normal Ready"}},
			check: func(g Gomega, f *exitFixture) {
				g.Expect(f.read(g, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme-b"}})).To(BeFalse())
			},
		},
		"a namespace the spec dropped (Retain): released, Ready": {
			tenant: exitTenant(), world: []client.Object{ourNamespace(exitTenant(), "acme-b")},
			want: tenantExit{requeue: exitReverify, ready: conditions.ReasonReady, statusWrites: 1, namespaces: ready("acme-a"),
				events: []string{"Normal NamespaceReleased", "Normal Ready"}},
			check: func(g Gomega, f *exitFixture) {
				ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme-b"}}
				g.Expect(f.read(g, ns)).To(BeTrue())
				g.Expect(ns.Labels).To(HaveKeyWithValue(ReleasedFromLabel, "acme"))
			},
		},
		"deleting a namespace the spec dropped fails: ReconcileError": {
			tenant: exitTenant(withPolicy(tenancyv1.NamespaceDelete)), world: []client.Object{ourNamespace(exitTenant(), "acme-b")},
			fail: map[string]error{"delete Namespace": errExitUnavailable},
			want: tenantExit{err: apierr.Transient, ready: conditions.ReasonReconcileError, also: conditions.Reconciling, statusWrites: 1,
				namespaces: ready("acme-a")},
		},
		// Refused, yet not Stalled: release serves the Tenant's deletion too,
		// where a refusal must keep the finalizer, so it returns the error.
		"deleting a namespace the spec dropped is forbidden: ReconcileError, the refusal returned": {
			tenant: exitTenant(withPolicy(tenancyv1.NamespaceDelete)), world: []client.Object{ourNamespace(exitTenant(), "acme-b")},
			fail: map[string]error{"delete Namespace": errExitForbidden},
			want: tenantExit{err: apierr.Refused, ready: conditions.ReasonReconcileError, also: conditions.Reconciling, statusWrites: 1,
				namespaces: ready("acme-a")},
		},
		"a namespace the spec dropped was replaced since it was listed: retried at once, no status": {
			tenant: exitTenant(withPolicy(tenancyv1.NamespaceDelete)), world: []client.Object{ourNamespace(exitTenant(), "acme-b")},
			fail: map[string]error{"delete Namespace": errExitConflict},
			want: tenantExit{err: apierr.Conflict},
		},
		"releasing a namespace the spec dropped conflicts: retried at once, no status": {
			tenant: exitTenant(), world: []client.Object{ourNamespace(exitTenant(), "acme-b")},
			fail: map[string]error{"patch Namespace acme-b": errExitConflict},
			want: tenantExit{err: apierr.Conflict},
		},

		// ServiceAccount subjects; network isolation; Pod Security.
		"a ServiceAccount admin's namespace is missing: Ready, a Warning": {
			tenant: exitTenant(withServiceAccountAdmin),
			want: tenantExit{requeue: exitReverify, ready: conditions.ReasonReady, statusWrites: 1, namespaces: ready("acme-a"),
				events: []string{"Normal Ready", "Warning " + ReasonSubjectNamespaceMissing}},
		},
		"checking a ServiceAccount admin's namespace fails: ReconcileError": {
			tenant: exitTenant(withServiceAccountAdmin),
			fail:   map[string]error{"apiget Namespace ci": errExitUnavailable},
			want: tenantExit{err: apierr.Transient, ready: conditions.ReasonReconcileError, also: conditions.Reconciling, statusWrites: 1,
				namespaces: ready("acme-a")},
			check: func(g Gomega, f *exitFixture) {
				g.Expect(f.condition(ConditionSubjectsFound)).To(BeNil(), "not checked")
			},
		},
		"a team's policy undoes the isolation: IsolationUndone, the policy untouched": {
			tenant: exitTenant(withIsolation),
			world: []client.Object{&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "acme-a", Name: "allow-all"},
				Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{}}}}},
			want: tenantExit{requeue: setup.ForeignChildRetry, ready: ReasonIsolationUndone, also: conditions.Stalled, statusWrites: 1,
				namespaces: map[string]tenancyv1.NamespaceState{"acme-a": tenancyv1.NamespaceConflict},
				events:     []string{"Warning IsolationUndone"}},
			check: func(g Gomega, f *exitFixture) {
				g.Expect(f.writes()).NotTo(ContainElement(ContainSubstring("allow-all")))
				g.Expect(f.message()).To(ContainSubstring("acme-a/allow-all"))
			},
		},
		"listing the NetworkPolicies fails: ReconcileError": {
			tenant: exitTenant(withIsolation),
			fail:   map[string]error{"list NetworkPolicy": errExitUnavailable},
			want: tenantExit{err: apierr.Transient, ready: conditions.ReasonReconcileError, also: conditions.Reconciling, statusWrites: 1,
				namespaces: ready("acme-a")},
		},
		"a pod from before the Pod Security level: Ready, a Warning, the pod untouched": {
			tenant: exitTenant(withRestricted),
			world:  []client.Object{ourNamespace(exitTenant(withRestricted), "acme-a"), restrictedPod("acme-a", "root", true)},
			want: tenantExit{requeue: exitReverify, ready: conditions.ReasonReady, statusWrites: 1, namespaces: ready("acme-a"),
				events: []string{"Normal Ready", "Warning " + ReasonPodsViolateLevel}},
			check: func(g Gomega, f *exitFixture) {
				g.Expect(f.writes()).NotTo(ContainElement(ContainSubstring("root")))
				c := f.condition(ConditionPodsMeetPodSecurity)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Message).To(HavePrefix("pod acme-a/root (privileged, "))
			},
		},
		"listing a namespace's pods fails: ReconcileError": {
			tenant: exitTenant(withRestricted),
			world:  []client.Object{ourNamespace(exitTenant(withRestricted), "acme-a")},
			fail:   map[string]error{"apilist Pod": errExitUnavailable},
			want: tenantExit{err: apierr.Transient, ready: conditions.ReasonReconcileError, also: conditions.Reconciling, statusWrites: 1,
				namespaces: ready("acme-a")},
			check: func(g Gomega, f *exitFixture) {
				g.Expect(f.condition(ConditionPodsMeetPodSecurity)).To(BeNil(), "not judged")
			},
		},

		// The status.
		"blocked, and a step fails: the person's problem is the reason, the error returned": {
			tenant: exitTenant(withNamespaces("a", "protected")),
			fail:   map[string]error{"create RoleBinding": errExitUnavailable},
			want: tenantExit{err: apierr.Transient, ready: ReasonProtectedNamespace, also: conditions.Stalled, statusWrites: 1,
				namespaces: map[string]tenancyv1.NamespaceState{"acme-a": tenancyv1.NamespaceReady, "acme-protected": tenancyv1.NamespaceProtected},
				events:     []string{"Warning ProtectedNamespace"}},
		},
		"the status write fails: returned": {
			tenant: exitTenant(),
			fail:   map[string]error{"status Tenant": errExitUnavailable},
			want:   tenantExit{err: apierr.Transient},
			check: func(g Gomega, f *exitFixture) {
				g.Expect(f.writes()).To(ContainElement("create Namespace acme-a"))
			},
		},
		"a step fails and the status write fails too: both returned": {
			tenant: exitTenant(),
			fail:   map[string]error{"get Namespace": errExitUnavailable, "status Tenant": errExitUnavailable},
			want:   tenantExit{err: apierr.Transient},
			check: func(g Gomega, f *exitFixture) {
				g.Expect(f.err).To(MatchError(ContainSubstring("reading Namespace")))
				g.Expect(f.err).To(MatchError(ContainSubstring("writing status")))
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			world := tc.world
			if tc.tenant != nil {
				world = append([]client.Object{tc.tenant}, world...)
			}
			f := newExitFixture(world...)
			if tc.settled {
				f.reconcile()
				g.Expect(f.err).NotTo(HaveOccurred())
				g.Expect(f.condition(conditions.Ready)).NotTo(BeNil())
				g.Expect(f.condition(conditions.Ready).Reason).To(Equal(conditions.ReasonReady), "settled")
				f.reset()
			}
			if tc.prepare != nil {
				tc.prepare(f)
			}
			f.FailRequests(tc.fail)
			f.reconcile()
			tc.want.check(g, f)
			if tc.check != nil {
				tc.check(g, f)
			}
		})
	}
}

const (
	exitUID      = "uid-acme"
	exitReverify = 10 * time.Minute
)

var (
	exitScheme = func() *runtime.Scheme {
		s := runtime.NewScheme()
		utilruntime.Must(clientgoscheme.AddToScheme(s))
		utilruntime.Must(tenancyv1.AddToScheme(s))
		utilruntime.Must(apiextensionsv1.AddToScheme(s))
		return s
	}()
	// Errors the fake API server answers with.
	errExitConflict    = apierrors.NewConflict(schema.GroupResource{Resource: "objects"}, "x", errors.New("the object has been modified"))
	errExitUnavailable = apierrors.NewServiceUnavailable("the API server did not answer")
	errExitForbidden   = apierrors.NewForbidden(schema.GroupResource{Resource: "objects"}, "x", errors.New("denied by a policy"))
	errExitInvalid     = apierrors.NewInvalid(schema.GroupKind{Kind: "Object"}, "x",
		field.ErrorList{field.Invalid(field.NewPath("metadata", "labels"), "x", "refused by policy")})
	// scopedKinds are the child kinds the manager caches only when labelled
	// managed-by=trellis (NetworkPolicies are all cached).
	scopedKinds = map[string]bool{"Namespace": true, "RoleBinding": true, "ClusterRole": true, "ClusterRoleBinding": true,
		"ResourceQuota": true, "LimitRange": true}
)

// namespaceTerminatingError is what the API server answers a create in a
// namespace being deleted.
func namespaceTerminatingError() error {
	err := apierrors.NewForbidden(schema.GroupResource{Resource: "rolebindings"}, adminRoleBindingName,
		errors.New("unable to create new content in namespace acme-a because it is being terminated"))
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Message: "namespace acme-a is being terminated"}}
	return err
}

// exitFixture is the rows' fake API server (testenv.Fake), whose cache
// holds only labelled children, and the Tenant reconciler on it.
type exitFixture struct {
	*testenv.Fake
	// base is the API server as the test, another actor, reads and writes it.
	base client.Client
	rec  *events.FakeRecorder
	r    *Reconciler

	res ctrl.Result
	err error
	// conflicts is how many conflicts the last reconcile counted (at least:
	// the manager of the envtest suite counts under the same name).
	conflicts float64
}

func newExitFixture(objs ...client.Object) *exitFixture {
	f := &exitFixture{rec: events.NewFakeRecorder(50)}
	b := fake.NewClientBuilder().WithScheme(exitScheme).WithObjects(objs...).WithReturnManagedFields().
		WithStatusSubresource(&tenancyv1.Tenant{}, &tenancyv1.NamespaceRequest{})
	for _, ix := range indexes {
		b = b.WithIndex(ix.obj, ix.field, ix.value)
	}
	f.Fake = testenv.NewFake(b)
	f.Cache = func(obj client.Object) (bool, error) { return cachedHere(obj), nil }
	f.base = f.Others()
	cached := client.WithFieldOwner(f.Client, setup.FieldManager)
	extra, err := CompileProtectedPattern(".*-protected")
	utilruntime.Must(err)
	f.r = &Reconciler{
		client: cached, apiReader: f.APIReader, children: children.Clients{Cached: cached, Uncached: f.APIReader}, recorder: f.rec,
		status: status.NewPatcher(cached, f.rec, func(t *tenancyv1.Tenant) *tenancyv1.TenantStatus { return &t.Status }, statusEvents...),
		requests: status.NewPatcher(cached, f.rec,
			func(r *tenancyv1.NamespaceRequest) *tenancyv1.NamespaceRequestStatus { return &r.Status }, requestEvents...),
		protection: Protection{ManagerNamespace: "trellis-system", Extra: extra},
		reverify:   exitReverify,
	}
	return f
}

func (f *exitFixture) reconcile() {
	before := conflictsCounted()
	f.res, f.err = f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Name: "acme"}})
	f.conflicts = conflictsCounted() - before
}

// conflictsCounted is trellis_reconcile_conflicts_total of the controller.
func conflictsCounted() float64 {
	n, err := testenv.Counter("trellis_reconcile_conflicts_total", "controller", ControllerName)
	utilruntime.Must(err)
	return n
}

// reset forgets the requests and Events so far.
func (f *exitFixture) reset() {
	f.ForgetWrites()
	f.events()
}

// writes are the writes the API server carried out, "<verb> <Kind> <name>".
func (f *exitFixture) writes() []string { return f.NamedWrites() }

func exitKind(obj runtime.Object) string {
	gvk, err := apiutil.GVKForObject(obj, exitScheme)
	if err != nil {
		return "?"
	}
	return strings.TrimSuffix(gvk.Kind, "List")
}

// cachedHere says whether the manager's cache holds obj.
func cachedHere(obj client.Object) bool {
	return !scopedKinds[exitKind(obj)] || obj.GetLabels()[setup.ManagedByLabel] == setup.ManagedByValue
}

// edit changes an object on the API server, as someone else would.
func (f *exitFixture) edit(obj client.Object, change func(client.Object)) {
	utilruntime.Must(f.base.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
	change(obj)
	utilruntime.Must(f.base.Update(context.Background(), obj))
}

// events returns "<type> <reason>" of each Event raised, in order.
func (f *exitFixture) events() []string { return testenv.EventReasons(f.rec) }

func (f *exitFixture) statusWrites() int { return testenv.StatusWrites(f.Writes()) }

// read reads obj back from the API server; false when it is gone.
func (f *exitFixture) read(g Gomega, obj client.Object) bool {
	err := f.base.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
	if apierrors.IsNotFound(err) {
		return false
	}
	g.Expect(err).NotTo(HaveOccurred())
	return true
}

// tenant is the Tenant as stored (nil when gone).
func (f *exitFixture) tenant() *tenancyv1.Tenant {
	t := &tenancyv1.Tenant{}
	if err := f.base.Get(context.Background(), client.ObjectKey{Name: "acme"}, t); err != nil {
		return nil
	}
	return t
}

func (f *exitFixture) condition(typ string) *metav1.Condition {
	if t := f.tenant(); t != nil {
		return conditions.Get(t.Status.Conditions, typ)
	}
	return nil
}

// message is Ready's message.
func (f *exitFixture) message() string {
	if c := f.condition(conditions.Ready); c != nil {
		return c.Message
	}
	return ""
}

// readySeries says whether the tenant's trellis_tenant_ready series exists.
func readySeries(g Gomega, tenant string) bool {
	families, err := metrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != "trellis_tenant_ready" {
			continue
		}
		for _, m := range f.Metric {
			if label(m, "tenant") == tenant {
				return true
			}
		}
	}
	return false
}

// tenantExit is what a row expects of one reconcile.
type tenantExit struct {
	// err is the class of what the reconcile ended with: the error returned
	// (None: no error), or Conflict: no error, again after about
	// apierr.ConflictRetry, counted in trellis_reconcile_conflicts_total.
	err apierr.Class
	// requeue is the RequeueAfter expected, ±10% (0: none).
	requeue time.Duration
	// ready is Ready's reason afterwards; "" when none was ever written.
	ready string
	// also is a condition besides Ready expected True (Reconciling, Stalled).
	also string
	// statusWrites is how many status writes reached the API server.
	statusWrites int
	// namespaces are the states in status.namespaces (nil: not checked).
	namespaces map[string]tenancyv1.NamespaceState
	// events are "<type> <reason>" of the Events raised, in order.
	events []string
	// gone: the Tenant was let go, and is gone.
	gone bool
}

func (w tenantExit) check(g Gomega, f *exitFixture) {
	if w.err == apierr.Conflict {
		g.Expect(f.err).NotTo(HaveOccurred(), "a conflict is no error")
		g.Expect(f.res.RequeueAfter).To(BeNumerically("~", apierr.ConflictRetry, apierr.ConflictRetry/10), "again at once")
		g.Expect(f.conflicts).To(BeNumerically(">=", 1), "counted")
	} else {
		g.Expect(apierr.Classify(f.err)).To(Equal(w.err), "error %v", f.err)
	}
	switch {
	case w.err == apierr.Conflict:
	case w.requeue > 0:
		g.Expect(f.res.RequeueAfter).To(BeNumerically("~", w.requeue, w.requeue/10+time.Millisecond), "RequeueAfter")
	default:
		g.Expect(f.res).To(Equal(ctrl.Result{}))
	}
	g.Expect(f.statusWrites()).To(Equal(w.statusWrites), "status writes %v", f.writes())
	g.Expect(f.events()).To(Equal(w.events))
	t := f.tenant()
	if w.gone {
		g.Expect(t).To(BeNil(), "let go")
		return
	}
	g.Expect(t).NotTo(BeNil())
	for _, ns := range t.Status.Namespaces {
		// The API server refuses a status whose namespace has no state
		// (the field is required): the whole status write would fail.
		g.Expect(ns.State).To(BeElementOf(tenancyv1.NamespaceReady, tenancyv1.NamespaceConflict,
			tenancyv1.NamespaceProtected, tenancyv1.NamespaceTerminating), "state of %s", ns.Name)
	}
	ready := conditions.Get(t.Status.Conditions, conditions.Ready)
	if w.ready == "" {
		g.Expect(ready).To(BeNil(), "no status written")
		return
	}
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Reason).To(Equal(w.ready), ready.Message)
	g.Expect(t.Status.ObservedGeneration).To(Equal(t.Generation))
	g.Expect(ready.ObservedGeneration).To(Equal(t.Generation))
	for _, typ := range []string{conditions.Reconciling, conditions.Stalled} {
		g.Expect(conditions.IsTrue(t.Status.Conditions, typ)).To(Equal(typ == w.also), typ)
	}
	if w.namespaces != nil {
		got := map[string]tenancyv1.NamespaceState{}
		for _, ns := range t.Status.Namespaces {
			got[ns.Name] = ns.State
		}
		g.Expect(got).To(Equal(w.namespaces))
	}
}

// The world of the rows.

// exitTenant is Tenant acme (namespace acme-a, a group of admins), with
// its finalizer.
func exitTenant(mut ...func(*tenancyv1.Tenant)) *tenancyv1.Tenant {
	t := unitTenant("acme", exitUID, "acme-", "a")
	t.Finalizers = []string{Finalizer}
	for _, m := range mut {
		m(t)
	}
	return t
}

// deletingTenant is exitTenant being deleted.
func deletingTenant(mut ...func(*tenancyv1.Tenant)) *tenancyv1.Tenant {
	t := exitTenant(mut...)
	t.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	return t
}

func otherTenant() *tenancyv1.Tenant { return unitTenant("other", "uid-other", "other-", "a") }

// ourNamespace is a namespace as t created it.
func ourNamespace(t *tenancyv1.Tenant, name string) *corev1.Namespace {
	return desiredNamespace(t, name, requestMark{})
}

// markedAcmeNamespace is namespace acme-a marked with a tenant's name and a
// Tenant's UID.
func markedAcmeNamespace(tenant, uid string) *corev1.Namespace {
	return foreignNamespace(map[string]string{setup.ManagedByLabel: setup.ManagedByValue, TenantLabel: tenant},
		map[string]string{TenantUIDAnnotation: uid})
}

// withUID gives a namespace the UID the API server would have.
func withUID(ns *corev1.Namespace, uid types.UID) *corev1.Namespace {
	ns.UID = uid
	return ns
}

// leftTenantRole is the ClusterRole a Tenant "acme" deleted with its CRD
// left, recording the UIDs of the namespaces Trellis held for it.
func leftTenantRole(uids ...types.UID) *rbacv1.ClusterRole {
	return desiredTenantRole(exitTenant(), []string{"acme-a"}, uids)
}

// foreignNamespace is namespace acme-a as someone else made it.
func foreignNamespace(labels, annotations map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme-a", Labels: labels, Annotations: annotations}}
}

func terminating(ns *corev1.Namespace) *corev1.Namespace {
	ns.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	ns.Finalizers = []string{"test.trellis.dev/hold"}
	return ns
}

// tenantCRD is the Tenant CRD; deleted says it is being deleted.
func tenantCRD(deleted bool) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: tenantCRDName}}
	if deleted {
		crd.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		crd.Finalizers = []string{"customresourcecleanup.apiextensions.k8s.io"}
	}
	return crd
}
