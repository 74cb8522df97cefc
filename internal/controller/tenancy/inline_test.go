package tenancy

import (
	"context"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
)

// inlineRole, inlineBinding, inlinePolicy and inlineLimits are items of
// spec.copies given inline.
func inlineRole(name string, rules ...rbacv1.PolicyRule) tenancyv1.TenantCopy {
	return tenancyv1.TenantCopy{Kind: tenancyv1.CopyRole, Name: name, Inline: &tenancyv1.InlineObject{Rules: rules}}
}

func inlineBinding(name, roleKind, role string, subjects ...rbacv1.Subject) tenancyv1.TenantCopy {
	return tenancyv1.TenantCopy{Kind: tenancyv1.CopyRoleBinding, Name: name, Inline: &tenancyv1.InlineObject{
		RoleRef: &rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: roleKind, Name: role}, Subjects: subjects}}
}

func inlinePolicy(name string, spec networkingv1.NetworkPolicySpec) tenancyv1.TenantCopy {
	return tenancyv1.TenantCopy{Kind: tenancyv1.CopyNetworkPolicy, Name: name, Inline: &tenancyv1.InlineObject{NetworkPolicy: &spec}}
}

func inlineLimits(name, maxCPU string) tenancyv1.TenantCopy {
	return tenancyv1.TenantCopy{Kind: tenancyv1.CopyLimitRange, Name: name, Inline: &tenancyv1.InlineObject{LimitRange: &corev1.LimitRangeSpec{
		Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(maxCPU)}}}}}}
}

func readPods(verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: verbs}
}

// inlineAuthor is a client of a platform operator who holds
// tenant-editor-role and may write, in every namespace, what the inline
// copies of the tests hold: Roles (escalate included), RoleBindings to
// them and to view, NetworkPolicies and LimitRanges; and no more.
func inlineAuthor(g Gomega, user string, escalate bool) client.Client {
	ctx := context.Background()
	platformOperator(g, user)
	roleVerbs := []string{"create", "bind"}
	if escalate {
		roleVerbs = append(roleVerbs, "escalate")
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user + "-inline"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles"}, Verbs: roleVerbs},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"}, Verbs: []string{"create"}},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, ResourceNames: []string{"view"}, Verbs: []string{"bind"}},
		{APIGroups: []string{networkingv1.GroupName}, Resources: []string{"networkpolicies"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"limitranges"}, Verbs: []string{"create"}},
	}}
	g.Expect(k8s.Create(ctx, role)).To(Succeed())
	g.Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	})).To(Succeed())
	return clientAs(g, user)
}

// expectInline waits until every namespace holds the four inline copies
// of TestTenantInlineCopies, the Role with rules.
func expectInline(g Gomega, rules []rbacv1.PolicyRule, namespaces ...string) {
	ctx := context.Background()
	for _, ns := range namespaces {
		g.Eventually(func(g Gomega) {
			role := &rbacv1.Role{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ci"}, role)).To(Succeed())
			g.Expect(role.Rules).To(Equal(rules))
			g.Expect(role.Labels).To(HaveKeyWithValue(TenantLabel, "inl"))
			g.Expect(role.Annotations).To(HaveKeyWithValue(CopyOfAnnotation, "inline"))
			binding := &rbacv1.RoleBinding{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ci"}, binding)).To(Succeed())
			g.Expect(binding.RoleRef.Name).To(Equal("ci"))
			g.Expect(binding.Subjects).To(ConsistOf(HaveField("Name", "ci-bot")))
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "auditors"}, binding)).To(Succeed())
			g.Expect(binding.RoleRef.Name).To(Equal("view"))
			np := &networkingv1.NetworkPolicy{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "same-namespace"}, np)).To(Succeed())
			g.Expect(np.Spec.Ingress).To(HaveLen(1))
			lr := &corev1.LimitRange{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "small"}, lr)).To(Succeed())
			g.Expect(lr.Spec.Limits[0].Max.Cpu().String()).To(Equal("2"))
		}, timeout, interval).Should(Succeed(), ns)
	}
}

// TestTenantInlineCopies: a Role, RoleBindings (to it and to view), a
// NetworkPolicy and a LimitRange given inline, by a platform operator who
// may write them everywhere, are in every namespace of the tenant, a
// requested one too (before its admins are bound there); an edit of an
// item reaches every copy; a team's own Role of an item's name is left
// untouched and reported; a namespace given up loses the Role and
// RoleBindings and keeps the NetworkPolicy and LimitRange (restrictions);
// removing an item removes its copies.
func TestTenantInlineCopies(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	operator := inlineAuthor(g, "inl-operator", true)
	bot := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "inl-a", Name: "ci-bot"}
	sameNamespace := networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{
		{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}}}}
	tenant := newTenant("inl", "inl-", "a", "b")
	tenant.Spec.SelfService = tenancyv1.SelfService{MaxNamespaces: 1}
	rules := []rbacv1.PolicyRule{readPods("get", "list")}
	tenant.Spec.Copies = []tenancyv1.TenantCopy{
		inlineRole("ci", rules...),
		inlineBinding("ci", "Role", "ci", bot),
		inlineBinding("auditors", "ClusterRole", "view", rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "auditors"}),
		inlinePolicy("same-namespace", sameNamespace),
		inlineLimits("small", "2"),
	}
	g.Expect(operator.Create(ctx, tenant)).To(Succeed())
	eventuallyReady(g, "inl")
	expectInline(g, rules, "inl-a", "inl-b")

	t.Run("a requested namespace holds them before its admins are bound", func(t *testing.T) {
		g := NewWithT(t)
		letRequest(g, "inl-admins", "inl-a")
		admin := clientAs(g, "ines", "inl-admins")
		g.Eventually(func() error { return admin.Create(ctx, newRequest("inl-a", "extra")) }, timeout, interval).Should(Succeed())
		expectInline(g, rules, "inl-extra")
		role, binding := &rbacv1.Role{}, &rbacv1.RoleBinding{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "inl-extra", Name: "ci"}, role)).To(Succeed())
		g.Eventually(func() error {
			return k8s.Get(ctx, client.ObjectKey{Namespace: "inl-extra", Name: adminRoleBindingName}, binding)
		}, timeout, interval).Should(Succeed())
		g.Expect(revisionOf(g, role)).To(BeNumerically("<", revisionOf(g, binding)))
	})

	t.Run("an edit of an item reaches every copy", func(t *testing.T) {
		g := NewWithT(t)
		rules = []rbacv1.PolicyRule{readPods("get", "list", "watch")}
		editInlineTenant(g, operator, func(t *tenancyv1.Tenant) { t.Spec.Copies[0] = inlineRole("ci", rules...) })
		expectInline(g, rules, "inl-a", "inl-b", "inl-extra")
	})

	t.Run("a team's own Role of an item's name is left untouched, and reported", func(t *testing.T) {
		g := NewWithT(t)
		own := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "inl-b", Name: "deployer"}, Rules: []rbacv1.PolicyRule{readPods("get")}}
		g.Expect(k8s.Create(ctx, own)).To(Succeed())
		editInlineTenant(g, operator, func(t *tenancyv1.Tenant) {
			t.Spec.Copies = append(t.Spec.Copies, inlineRole("deployer", readPods("get", "list")))
		})
		g.Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "inl-a", Name: "deployer"}, &rbacv1.Role{})).To(Succeed())
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "inl"}, tenant)).To(Succeed())
			g.Expect(conditions.Get(tenant.Status.Conditions, conditions.Ready).Reason).To(Equal(ReasonNamespaceConflict))
			g.Expect(nsState(g, "inl", "inl-b").Message).To(ContainSubstring("Role inl-b/deployer exists and was not created by this Tenant"))
		}, timeout, interval).Should(Succeed())
		got := &rbacv1.Role{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(own), got)).To(Succeed())
		g.Expect(got.ResourceVersion).To(Equal(own.ResourceVersion), "never written")
	})

	t.Run("a namespace given up loses the Role and RoleBindings, and keeps the restrictions", func(t *testing.T) {
		g := NewWithT(t)
		editInlineTenant(g, operator, func(t *tenancyv1.Tenant) { t.Spec.Namespaces = []string{"a"} }) // b is released (Retain)
		g.Eventually(func(g Gomega) {
			g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: "inl-b", Name: "ci"}, &rbacv1.Role{}))).To(BeTrue())
			g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: "inl-b", Name: "ci"}, &rbacv1.RoleBinding{}))).To(BeTrue())
			g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: "inl-b", Name: "auditors"}, &rbacv1.RoleBinding{}))).To(BeTrue())
		}, timeout, interval).Should(Succeed())
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "inl-b", Name: "same-namespace"}, &networkingv1.NetworkPolicy{})).To(Succeed())
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "inl-b", Name: "small"}, &corev1.LimitRange{})).To(Succeed())
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "inl-b", Name: "deployer"}, &rbacv1.Role{})).To(Succeed(), "the team's own stays")
	})

	t.Run("removing an item removes its copies, and nothing else", func(t *testing.T) {
		g := NewWithT(t)
		editInlineTenant(g, operator, func(t *tenancyv1.Tenant) { t.Spec.Copies = t.Spec.Copies[:4] }) // the LimitRange and deployer go
		for _, ns := range []string{"inl-a", "inl-extra"} {
			g.Eventually(func() bool {
				return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "small"}, &corev1.LimitRange{}))
			}, timeout, interval).Should(BeTrue(), ns)
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ci"}, &rbacv1.Role{})).To(Succeed())
		}
		g.Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: "inl-a", Name: "deployer"}, &rbacv1.Role{}))
		}, timeout, interval).Should(BeTrue())
		eventuallyReady(g, "inl")
	})
	deleteTenant(g, "inl")
}

// editInlineTenant changes the spec of TestTenantInlineCopies' Tenant as
// c, read afresh until no status write comes in between.
func editInlineTenant(g Gomega, c client.Client, edit func(*tenancyv1.Tenant)) {
	g.Eventually(func() error {
		t := &tenancyv1.Tenant{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Name: "inl"}, t); err != nil {
			return err
		}
		edit(t)
		return c.Update(context.Background(), t)
	}, timeout, interval).Should(Succeed())
}

// revisionOf is the etcd revision an object was last written at: the
// order of the writes.
func revisionOf(g Gomega, o client.Object) int64 {
	n, err := strconv.ParseInt(o.GetResourceVersion(), 10, 64)
	g.Expect(err).NotTo(HaveOccurred())
	return n
}

// TestInlineCopyAttacks: what an inline copy could give someone, each
// tried as the actor. A platform operator who may not escalate roles cannot
// have a Role made for them; nobody, a cluster admin included, gets an
// inline RoleBinding to cluster-admin, a Role that grants more than it
// lists or writes its own namespace (a Role reaches the Namespace of its
// namespace's name: the team would relabel or detach it) or a status (a
// record the guardrails trust), or a NetworkPolicy that admits traffic from outside the tenant;
// a tenant admin can neither change nor delete an inline copy; an inline
// RoleBinding's roleRef does not change in place.
func TestInlineCopyAttacks(t *testing.T) {
	ctx := context.Background()
	refused := func(g Gomega, err error, says ...string) {
		g.Expect(err).To(HaveOccurred(), "allowed")
		g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "not a refusal: %v", err)
		for _, s := range says {
			g.Expect(err.Error()).To(ContainSubstring(s))
		}
	}
	same := &metav1.LabelSelector{}
	cases := 0
	for name, c := range map[string]struct {
		actor func(g Gomega) client.Client
		item  tenancyv1.TenantCopy
		says  []string
	}{
		"platform operator without escalate: a Role wider than themselves": {
			actor: func(g Gomega) client.Client { return inlineAuthor(g, "ina-noesc", false) },
			item:  inlineRole("secrets", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list"}}),
			says: []string{"ValidatingAdmissionPolicy 'tenant-copy-rights'",
				"spec.copies Role secrets: an inline Role may hold any rule", "you may not create and escalate roles"},
		},
		"cluster admin: a RoleBinding to cluster-admin": {
			item: inlineBinding("root", "ClusterRole", "cluster-admin", rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "ina-admins"}),
			says: []string{"never cluster-admin"},
		},
		"cluster admin: a RoleBinding to a Role not given inline": {
			item: inlineBinding("other", "Role", "someone-elses", rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "ina-admins"}),
			says: []string{"may bind only a Role given inline in this list"},
		},
		"cluster admin: a Role that lets the team escalate": {
			item: inlineRole("rbac", rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles"}, Verbs: []string{"create", "escalate"}}),
			says: []string{"spec.copies Role rbac: an inline Role lists its verbs", "escalate, bind and impersonate are refused"},
		},
		"cluster admin: a Role of every verb": {
			item: inlineRole("all", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"*"}}),
			says: []string{"an inline Role lists its verbs"},
		},
		"cluster admin: a Role of every resource, verb by verb, writes the namespace itself": {
			item: inlineRole("owner", rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"},
				Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}),
			says: []string{"spec.copies Role owner: an inline Role may not write namespaces", "Pod Security level and the tenant's marks"},
		},
		"cluster admin: a Role that relabels the namespace": {
			item: inlineRole("relabel", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"patch"}}),
			says: []string{"spec.copies Role relabel: an inline Role may not write namespaces"},
		},
		"cluster admin: a Role that finalizes the namespace": {
			item: inlineRole("finalize", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"*/finalize"}, Verbs: []string{"update"}}),
			says: []string{"spec.copies Role finalize: an inline Role may not write namespaces"},
		},
		"cluster admin: a Role that resets what the quota counts": {
			item: inlineRole("quota", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"resourcequotas/status"}, Verbs: []string{"update"}}),
			says: []string{"spec.copies Role quota: an inline Role may not write namespaces, a status"},
		},
		"cluster admin: a Role that writes which namespace a request holds": {
			item: inlineRole("requests", rbacv1.PolicyRule{APIGroups: []string{tenancyv1.GroupVersion.Group},
				Resources: []string{"namespacerequests/status"}, Verbs: []string{"patch"}}),
			says: []string{"spec.copies Role requests: an inline Role may not write namespaces, a status"},
		},
		"cluster admin: a Role of every resource of a group, verb by verb": {
			item: inlineRole("trellis", rbacv1.PolicyRule{APIGroups: []string{tenancyv1.GroupVersion.Group},
				Resources: []string{"*"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}),
			says: []string{"spec.copies Role trellis: an inline Role may not write namespaces, a status"},
		},
		"cluster admin: a NetworkPolicy admitting every address": {
			item: inlinePolicy("open", networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{
				{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}}}}}}),
			says: []string{"spec.copies NetworkPolicy open: an inline NetworkPolicy may admit traffic only from", "undo the tenant's isolation"},
		},
		"cluster admin: a NetworkPolicy admitting every namespace": {
			item: inlinePolicy("all-namespaces", networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{
				{From: []networkingv1.NetworkPolicyPeer{{PodSelector: same, NamespaceSelector: &metav1.LabelSelector{}}}}}}),
			says: []string{"spec.copies NetworkPolicy all-namespaces"},
		},
		"cluster admin: a NetworkPolicy rule without from": {
			item: inlinePolicy("anyone", networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{}}}),
			says: []string{"spec.copies NetworkPolicy anyone"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			actor := k8s
			if c.actor != nil {
				actor = c.actor(g)
			}
			// A Tenant of its own per case: one let through fails its case alone.
			refusedName := "ina-refused-" + strconv.Itoa(cases)
			cases++
			tenant := newTenant(refusedName, refusedName+"-", "a")
			tenant.Spec.Copies = []tenancyv1.TenantCopy{c.item}
			refused(g, actor.Create(ctx, tenant), c.says...)
			g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: refusedName}, &tenancyv1.Tenant{}))).To(BeTrue())
		})
	}

	g := NewWithT(t)
	tenant := newTenant("ina", "ina-", "a")
	tenant.Spec.Copies = []tenancyv1.TenantCopy{
		inlineRole("ci", readPods("get")),
		inlineBinding("ci", "Role", "ci", rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "ina-ci"}),
		inlinePolicy("same-namespace", networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{
			{From: []networkingv1.NetworkPolicyPeer{{PodSelector: same}}}}}),
		inlineLimits("small", "2"),
		// Reading the namespace and its quota writes nothing: allowed.
		inlineRole("reads-namespace", rbacv1.PolicyRule{APIGroups: []string{""},
			Resources: []string{"namespaces", "resourcequotas/status"}, Verbs: []string{"get", "list", "watch"}}),
	}
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	eventuallyReady(g, "ina")
	emulateBuiltinRoles(g, "ina-a")
	admin := clientAs(g, "mallory", "ina-admins")
	g.Eventually(func() error {
		return admin.List(ctx, &rbacv1.RoleList{}, client.InNamespace("ina-a"))
	}, timeout, interval).Should(Succeed())
	key := func(name string) client.ObjectKey { return client.ObjectKey{Namespace: "ina-a", Name: name} }
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: "ina-a", Name: name} }
	for name, try := range map[string]func() error{
		"widen the Role": func() error {
			return mergePatch(admin, &rbacv1.Role{ObjectMeta: meta("ci")}, `{"rules":[{"apiGroups":[""],"resources":["secrets"],"verbs":["get"]}]}`)
		},
		"take the Role's labels off": func() error {
			return mergePatch(admin, &rbacv1.Role{ObjectMeta: meta("ci")}, `{"metadata":{"labels":{"tenancy.trellis.dev/tenant":null}}}`)
		},
		"delete the Role":   func() error { return admin.Delete(ctx, &rbacv1.Role{ObjectMeta: meta("ci")}) },
		"delete every Role": func() error { return admin.DeleteAllOf(ctx, &rbacv1.Role{}, client.InNamespace("ina-a")) },
		"add to the RoleBinding": func() error {
			return mergePatch(admin, &rbacv1.RoleBinding{ObjectMeta: meta("ci")}, `{"subjects":[{"kind":"User","name":"mallory","apiGroup":"rbac.authorization.k8s.io"}]}`)
		},
		"delete the RoleBinding": func() error { return admin.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: meta("ci")}) },
		"open the NetworkPolicy": func() error {
			return mergePatch(admin, &networkingv1.NetworkPolicy{ObjectMeta: meta("same-namespace")}, `{"spec":{"ingress":[{}]}}`)
		},
		"delete the LimitRange": func() error { return admin.Delete(ctx, &corev1.LimitRange{ObjectMeta: meta("small")}) },
	} {
		t.Run("tenant admin: "+name, func(t *testing.T) {
			g := NewWithT(t)
			refused(g, try(), "ValidatingAdmissionPolicy", "only those who may change Tenants")
		})
	}
	role := &rbacv1.Role{}
	g.Expect(k8s.Get(ctx, key("ci"), role)).To(Succeed())
	g.Expect(role.Rules).To(Equal([]rbacv1.PolicyRule{readPods("get")}))
	g.Expect(role.Labels).To(HaveKeyWithValue(TenantLabel, "ina"))
	for _, obj := range []client.Object{&rbacv1.RoleBinding{}, &networkingv1.NetworkPolicy{}, &corev1.LimitRange{}} {
		name := "ci"
		switch obj.(type) {
		case *networkingv1.NetworkPolicy:
			name = "same-namespace"
		case *corev1.LimitRange:
			name = "small"
		}
		g.Expect(k8s.Get(ctx, key(name), obj)).To(Succeed())
		g.Expect(obj.GetDeletionTimestamp()).To(BeNil())
	}

	t.Run("cluster admin: an inline RoleBinding's roleRef changed in place", func(t *testing.T) {
		g := NewWithT(t)
		var err error
		g.Eventually(func() bool {
			tn := &tenancyv1.Tenant{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "ina"}, tn)).To(Succeed())
			tn.Spec.Copies[1].Inline.RoleRef = &rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}
			err = k8s.Update(ctx, tn)
			return !apierrors.IsConflict(err)
		}, timeout, interval).Should(BeTrue())
		refused(g, err, "an inline RoleBinding's roleRef is immutable")
	})
	deleteTenant(g, "ina")
}
