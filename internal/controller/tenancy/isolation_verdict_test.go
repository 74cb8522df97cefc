package tenancy

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/outcome"
	"github.com/trellis-dev/trellis/internal/controller/setup"
)

// isolationCase is a NetworkPolicy spec in a namespace of tenant own, and
// whether it admits ingress from outside that tenant.
type isolationCase struct {
	name    string
	spec    networkingv1.NetworkPolicySpec
	outside bool
}

func tenantPeer(tenant string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{TenantLabel: tenant}}}
}

func podPeer(labels map[string]string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: labels}}
}

func rules(rs ...[]networkingv1.NetworkPolicyPeer) networkingv1.NetworkPolicySpec {
	spec := networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}
	for _, peers := range rs {
		spec.Ingress = append(spec.Ingress, networkingv1.NetworkPolicyIngressRule{From: peers})
	}
	return spec
}

func peers(ps ...networkingv1.NetworkPolicyPeer) []networkingv1.NetworkPolicyPeer { return ps }

// isolationCases are the verdicts of config/admission/tenant_guardrails.yaml
// on NetworkPolicies in a namespace of tenant own; other is another tenant.
// TestIsolationVerdict checks admitsFromOutside against them, and
// TestIsolationVerdictAgreesWithTheAdmissionPolicy the admission policy, in
// a real API server.
func isolationCases(own, other string) []isolationCase {
	port := intstr.FromInt32(80)
	return []isolationCase{
		// Inside the tenant.
		{"egress only", networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{}}}, false},
		{"deny all ingress", rules(), false},
		{"pods of the namespace", rules(peers(podPeer(map[string]string{"app": "web"}))), false},
		{"every pod of the namespace", rules(peers(podPeer(nil))), false},
		{"pods by expression", rules(peers(networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpExists}}}})), false},
		{"the tenant's namespaces", rules(peers(tenantPeer(own))), false},
		{"pods of the tenant's namespaces", rules(peers(networkingv1.NetworkPolicyPeer{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{TenantLabel: own}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}})), false},
		{"some of the tenant's namespaces", rules(peers(networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{
			MatchLabels:      map[string]string{TenantLabel: own, "stage": "prod"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "zone", Operator: metav1.LabelSelectorOpIn, Values: []string{"a"}}}}})), false},
		{"several rules, each inside", rules(peers(podPeer(nil)), peers(tenantPeer(own), podPeer(map[string]string{"a": "b"}))), false},
		{"a port, from the tenant", networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
			Ports: []networkingv1.NetworkPolicyPort{{Port: &port}}, From: peers(tenantPeer(own))}}}, false},
		// Outside it.
		{"a rule without peers (allow-all)", networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{}}}, true},
		{"a port from anywhere", networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
			Ports: []networkingv1.NetworkPolicyPort{{Port: &port}}}}}, true},
		{"every namespace", rules(peers(networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}})), true},
		{"every pod of every namespace", rules(peers(networkingv1.NetworkPolicyPeer{
			NamespaceSelector: &metav1.LabelSelector{}, PodSelector: &metav1.LabelSelector{}})), true},
		{"another tenant", rules(peers(tenantPeer(other))), true},
		{"the tenant label's empty value", rules(peers(tenantPeer(""))), true},
		{"the tenant by expression", rules(peers(networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: TenantLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{own}}}}})), true},
		{"a namespace by name", rules(peers(networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{corev1.LabelMetadataName: own + "-a"}}})), true},
		{"an IP block", rules(peers(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}})), true},
		{"the whole internet but one range", rules(peers(networkingv1.NetworkPolicyPeer{
			IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: []string{"10.0.0.0/8"}}})), true},
		{"one outside peer among inside ones", rules(peers(podPeer(nil), tenantPeer(own), tenantPeer(other))), true},
		{"an inside rule, then an allow-all", rules(peers(tenantPeer(own)), nil), true},
		// The admission policy judges ingress rules whatever policyTypes say.
		{"an allow-all under policyTypes Egress", networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{}}}, true},
	}
}

func TestIsolationVerdict(t *testing.T) {
	for _, tc := range isolationCases("acme", "bolt") {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(admitsFromOutside(&tc.spec, "acme")).To(Equal(tc.outside))
		})
	}
}

// reduced runs the cache transform on a copy of np.
func reduced(g Gomega, np *networkingv1.NetworkPolicy) *networkingv1.NetworkPolicy {
	out, err := reduceNetworkPolicy(np.DeepCopy())
	g.Expect(err).NotTo(HaveOccurred())
	return out.(*networkingv1.NetworkPolicy)
}

// TestReducedPolicyKeepsTheVerdict: the cache's form of a policy is judged
// as the policy itself, for the tenant whose namespace it is in and for any
// other: on every case of the table, and on every spec of up to two rules
// of up to two peers drawn from a set that covers each kind of peer.
func TestReducedPolicyKeepsTheVerdict(t *testing.T) {
	tenants := []string{"acme", "bolt", "crux", ""}
	check := func(g Gomega, spec networkingv1.NetworkPolicySpec) {
		np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "acme-a", Name: "p"}, Spec: spec}
		r := reduced(g, np)
		g.Expect(len(r.Spec.Ingress)).To(BeNumerically("<=", 1))
		for _, rule := range r.Spec.Ingress {
			g.Expect(len(rule.From)).To(BeNumerically("<=", 1))
		}
		for _, tenant := range tenants {
			g.Expect(admitsFromOutside(&r.Spec, tenant)).To(Equal(admitsFromOutside(&spec, tenant)),
				"tenant %q: %+v reduced to %+v", tenant, spec.Ingress, r.Spec.Ingress)
		}
	}
	for _, tc := range isolationCases("acme", "bolt") {
		t.Run(tc.name, func(t *testing.T) { check(NewWithT(t), tc.spec) })
	}

	kinds := []networkingv1.NetworkPolicyPeer{
		podPeer(nil), tenantPeer("acme"), tenantPeer("bolt"), tenantPeer(""),
		{NamespaceSelector: &metav1.LabelSelector{}},
		{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "acme"}}},
		{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}},
	}
	// Each rule: no peers, or one or two peers of the kinds above.
	ruleChoices := make([][]networkingv1.NetworkPolicyPeer, 0, 1+len(kinds)*(1+len(kinds)))
	ruleChoices = append(ruleChoices, nil)
	for i := range kinds {
		ruleChoices = append(ruleChoices, peers(kinds[i]))
		for j := range kinds {
			ruleChoices = append(ruleChoices, peers(kinds[i], kinds[j]))
		}
	}
	g := NewWithT(t)
	n := 0
	check(g, rules())
	for _, a := range ruleChoices {
		check(g, rules(a))
		for _, b := range ruleChoices {
			check(g, rules(a, b))
			n++
		}
	}
	t.Logf("%d two-rule specs", n)
}

// TestReducedPolicyIsSmall: whatever a user writes in a policy of their own,
// the cache keeps a few hundred bytes of it.
func TestReducedPolicyIsSmall(t *testing.T) {
	g := NewWithT(t)
	long := strings.Repeat("x", 63)
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "acme-a", Name: strings.Repeat("n", 253), UID: "8f0b9c2e-0000-4000-8000-000000000000", ResourceVersion: "123456789",
			Labels: map[string]string{
				setup.ManagedByLabel: long, partOfLabel: long, TenantLabel: long, "team": long,
			},
			Annotations: map[string]string{"blob": strings.Repeat("a", 256<<10)},
			Finalizers:  []string{"example.com/hold"},
		},
	}
	for i := 0; np.Size() < 1<<20; i++ {
		ml := map[string]string{}
		for j := range 8 {
			ml[fmt.Sprintf("k%d-%d", i, j)] = long
		}
		np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{From: peers(
			podPeer(ml), tenantPeer("acme"),
			networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{TenantLabel: "acme"}}, PodSelector: &metav1.LabelSelector{MatchLabels: ml}},
		)})
		np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{To: peers(podPeer(ml))})
	}
	before := np.Size()
	r := reduced(g, np)
	t.Logf("a policy of %d bytes (protobuf) is cached as %d bytes", before, r.Size())
	g.Expect(before).To(BeNumerically(">=", 1<<20))
	g.Expect(r.Size()).To(BeNumerically("<", 1024))
	g.Expect(r.Labels).To(Equal(map[string]string{setup.ManagedByLabel: long, partOfLabel: long, TenantLabel: long}), "Trellis' keys only")
	g.Expect(r.Annotations).To(BeNil())
	g.Expect(r.Finalizers).To(BeNil())
	g.Expect(r.Spec.Egress).To(BeNil())
	g.Expect(r.Spec.Ingress).To(Equal([]networkingv1.NetworkPolicyIngressRule{{From: peers(tenantPeer("acme"))}}))
	g.Expect(admitsFromOutside(&r.Spec, "acme")).To(Equal(admitsFromOutside(&np.Spec, "acme")))
	g.Expect(admitsFromOutside(&r.Spec, "bolt")).To(Equal(admitsFromOutside(&np.Spec, "bolt")))
	g.Expect(r.Name).To(Equal(np.Name))
	g.Expect(r.Namespace).To(Equal("acme-a"))
	g.Expect(r.UID).To(Equal(np.UID))
	g.Expect(r.ResourceVersion).To(Equal("123456789"))
}

// TestReduceKeepsTrellisIsolationPolicyWhole: the controller compares the
// spec of its own policy with the desired one, and restores its marks.
func TestReduceKeepsTrellisIsolationPolicyWhole(t *testing.T) {
	g := NewWithT(t)
	tenant := unitTenant("acme", "uid-acme", "acme-", "a")
	tenant.Spec.NetworkIsolation = &tenancyv1.NetworkIsolation{AllowFromNamespaces: []string{"ingress"}}
	own := desiredNetworkPolicy(tenant, "acme-a")
	own.Annotations = map[string]string{"note": "kept"}
	own.OwnerReferences = []metav1.OwnerReference{{APIVersion: tenancyv1.GroupVersion.String(), Kind: "Tenant", Name: "acme", UID: "uid-acme"}}
	g.Expect(reduced(g, own)).To(Equal(own))

	// The name alone, or the marks on another name, are not Trellis' policy.
	forged := own.DeepCopy()
	delete(forged.Labels, setup.ManagedByLabel)
	g.Expect(reduced(g, forged).Spec.Ingress).To(Equal([]networkingv1.NetworkPolicyIngressRule{{}}))
	other := own.DeepCopy()
	other.Name = "extra"
	g.Expect(reduced(g, other).Annotations).To(BeNil())

	// Other types pass untouched.
	cm := &corev1.ConfigMap{Data: map[string]string{"a": "b"}}
	out, err := reduceNetworkPolicy(cm)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(BeIdenticalTo(cm))
}

func TestNetworkPolicyToTenant(t *testing.T) {
	g := NewWithT(t)
	namespaces := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme-a", Labels: map[string]string{TenantLabel: "acme"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "free"}},
	).Build()
	toTenant := networkPolicyToTenant(namespaces)
	req := func(names ...string) []reconcile.Request {
		var out []reconcile.Request
		for _, n := range names {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Name: n}})
		}
		return out
	}
	policy := func(ns string, labels map[string]string) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", Labels: labels}}
	}
	marks := func(tenant string) map[string]string {
		return map[string]string{setup.ManagedByLabel: setup.ManagedByValue, TenantLabel: tenant}
	}
	ctx := context.Background()
	g.Expect(toTenant(ctx, policy("acme-a", nil))).To(Equal(req("acme")), "a team's policy: the tenant of its namespace")
	g.Expect(toTenant(ctx, policy("acme-a", marks("acme")))).To(Equal(req("acme")), "Trellis' own: once")
	g.Expect(toTenant(ctx, policy("acme-a", marks("gone")))).To(Equal(req("gone", "acme")), "a leftover: its tenant and the namespace's")
	g.Expect(toTenant(ctx, policy("free", marks("acme")))).To(Equal(req("acme")), "Trellis' own anywhere, by its label, as before")
	g.Expect(toTenant(ctx, policy("free", nil))).To(BeEmpty(), "outside the tenant namespaces")
	g.Expect(toTenant(ctx, policy("free", map[string]string{TenantLabel: "acme"}))).To(BeEmpty(), "a tenant label without Trellis' mark")
	g.Expect(toTenant(ctx, policy("missing", nil))).To(BeEmpty())
}

func TestNetworkPolicyChanged(t *testing.T) {
	base := func() *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "acme-a", Name: "p", ResourceVersion: "1"},
			Spec:       rules(peers(podPeer(nil))),
		}
	}
	cases := map[string]struct {
		change func(*networkingv1.NetworkPolicy)
		own    bool
		want   bool
	}{
		"a resync":                     {change: func(*networkingv1.NetworkPolicy) {}, want: false},
		"a change the cache drops":     {change: func(np *networkingv1.NetworkPolicy) { np.ResourceVersion = "2" }, want: false},
		"its ingress":                  {change: func(np *networkingv1.NetworkPolicy) { np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{}} }, want: true},
		"a label":                      {change: func(np *networkingv1.NetworkPolicy) { np.Labels = map[string]string{TenantLabel: "acme"} }, want: true},
		"Trellis' own, any change":     {change: func(np *networkingv1.NetworkPolicy) { np.ResourceVersion = "2" }, own: true, want: true},
		"Trellis' own, even a resync":  {change: func(*networkingv1.NetworkPolicy) {}, own: true, want: true},
		"a policy that takes the mark": {change: func(np *networkingv1.NetworkPolicy) { np.Labels = marksOf("acme") }, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old := base()
			if tc.own {
				old.Labels = marksOf("acme")
			}
			updated := old.DeepCopy()
			tc.change(updated)
			NewWithT(t).Expect(networkPolicyChanged.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: updated})).To(Equal(tc.want))
		})
	}
}

func marksOf(tenant string) map[string]string {
	return map[string]string{setup.ManagedByLabel: setup.ManagedByValue, TenantLabel: tenant}
}

// TestIsolationUndoneStatus: the Tenant is Stalled, reason IsolationUndone,
// naming the policies (the first five, then a count); each namespace says
// so in its state; a conflict found in a namespace keeps its own message.
func TestIsolationUndoneStatus(t *testing.T) {
	g := NewWithT(t)
	tenant := unitTenant("acme", "uid-acme", "acme-", "a", "b", "c")
	tenant.Generation = 2
	obs := newObservation(namespaceNames(tenant), nil)
	obs.set("acme-a", tenancyv1.NamespaceReady, "")
	obs.set("acme-b", tenancyv1.NamespaceReady, "")
	obs.set("acme-c", tenancyv1.NamespaceReady, "")
	obs.undoIsolation("acme-b", []string{"b1", "b2", "b3", "b4"})
	obs.undoIsolation("acme-a", []string{"allow-all"})
	obs.undoIsolation("acme-c", []string{"c1", "c2"})
	obs.conflict("acme-c", "RoleBinding acme-c/trellis-tenant-admin exists and was not created by this Tenant; it is left untouched")

	st := computeStatus(tenant, obs, outcome.Outcome{})
	stalled := conditions.Get(st.Conditions, conditions.Stalled)
	g.Expect(stalled).NotTo(BeNil())
	g.Expect(stalled.Reason).To(Equal(ReasonIsolationUndone), "named before the conflict")
	g.Expect(stalled.Message).To(HavePrefix("0 of 3 namespaces ready: NetworkPolicies acme-a/allow-all, acme-b/b1, acme-b/b2, acme-b/b3, acme-b/b4 and 2 more admit ingress from outside the tenant"))
	g.Expect(stalled.Message).To(ContainSubstring("RoleBinding acme-c/trellis-tenant-admin exists"))
	g.Expect(stalled.Message).To(ContainSubstring("Trellis leaves them untouched: delete them, or let them admit only pods of their own namespace"))
	g.Expect(conditions.Get(st.Conditions, conditions.Ready).Status).To(Equal(metav1.ConditionFalse))
	g.Expect(st.Namespaces).To(Equal([]tenancyv1.TenantNamespaceStatus{
		{Name: "acme-a", State: tenancyv1.NamespaceConflict,
			Message: "NetworkPolicy allow-all admits ingress from outside the tenant, which undoes its network isolation; it is left untouched"},
		{Name: "acme-b", State: tenancyv1.NamespaceConflict,
			Message: "NetworkPolicies b1, b2, b3 and 1 more admit ingress from outside the tenant, which undoes its network isolation; they are left untouched"},
		{Name: "acme-c", State: tenancyv1.NamespaceConflict,
			Message: "RoleBinding acme-c/trellis-tenant-admin exists and was not created by this Tenant; it is left untouched"},
	}))
	g.Expect(obs.blocked()).To(BeTrue())

	// The longest names fit a namespace's message.
	long := strings.Repeat("p", 253)
	g.Expect(len(isolationNamespaceMessage([]string{long, long, long, long, long}))).To(BeNumerically("<=", 1024))

	// One policy, one namespace.
	one := newObservation([]string{"acme-a"}, nil)
	one.set("acme-a", tenancyv1.NamespaceReady, "")
	one.undoIsolation("acme-a", []string{"cidr"})
	msg := conditions.Get(computeStatus(tenant, one, outcome.Outcome{}).Conditions, conditions.Ready).Message
	g.Expect(msg).To(HavePrefix("0 of 1 namespaces ready: NetworkPolicy acme-a/cidr admits ingress from outside the tenant"))
	g.Expect(msg).To(ContainSubstring("Trellis leaves it untouched: delete it, or let it admit only pods of its own namespace"))
}

// TestCheckIsolationSkipsTrellisOwnPolicy: every policy of a namespace is
// judged but Trellis' own (which admits the allowFromNamespaces by design)
// and a leftover of a Tenant that no longer exists (rewritten to this
// tenant's spec). A fake client stands for the cache.
func TestCheckIsolationSkipsTrellisOwnPolicy(t *testing.T) {
	g := NewWithT(t)
	tenant := unitTenant("acme", "uid-acme", "acme-", "a")
	tenant.Spec.NetworkIsolation = &tenancyv1.NetworkIsolation{AllowFromNamespaces: []string{"ingress"}}
	own := desiredNetworkPolicy(tenant, "acme-a")
	gone := unitTenant("gone", "uid-gone", "acme-", "a")
	gone.Spec.NetworkIsolation = &tenancyv1.NetworkIsolation{}
	leftover := desiredNetworkPolicy(gone, "acme-a")
	leftover.Namespace = "acme-b"
	foreignNamed := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "acme-c", Name: networkPolicyName},
		Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{}}}}
	team := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "acme-a", Name: "web"}, Spec: rules(peers(tenantPeer("acme")))}
	open := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "acme-a", Name: "open"}, Spec: rules(nil)}
	elsewhere := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "free", Name: "open"}, Spec: rules(nil)}
	c := fake.NewClientBuilder().WithScheme(k8s.Scheme()).
		WithObjects(tenant, own, leftover, foreignNamed, team, open, elsewhere).Build()
	r := &Reconciler{client: c}

	s := &scope{t: tenant, obs: newObservation([]string{"acme-a", "acme-b", "acme-c"}, nil)}
	for _, ns := range []string{"acme-a", "acme-b", "acme-c"} {
		g.Expect(r.checkIsolation(context.Background(), s, ns)).To(Succeed())
	}
	g.Expect(s.obs.undone).To(Equal(map[string][]string{
		"acme-a": {"open"},
		// A policy with Trellis' name it did not make is judged as any other.
		"acme-c": {networkPolicyName},
	}), "Trellis' own and a gone tenant's leftover (rewritten to this tenant's) are not judged")
}
