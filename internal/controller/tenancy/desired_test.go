package tenancy

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/controller/setup"
)

// adminTenants are the three kinds of admin a Tenant may name.
func adminTenants() map[string]struct {
	tenant *tenancyv1.Tenant
	want   rbacv1.Subject
} {
	group := unitTenant("acme", "uid-acme", "acme-", "dev", "prod")
	user := unitTenant("acme", "uid-acme", "acme-", "dev", "prod")
	user.Spec.Admins = []tenancyv1.Subject{{Kind: rbacv1.UserKind, Name: "alice", APIGroup: rbacv1.GroupName}}
	sa := unitTenant("acme", "uid-acme", "acme-", "dev", "prod")
	sa.Spec.Admins = []tenancyv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "ci", Namespace: "acme-dev"}}
	return map[string]struct {
		tenant *tenancyv1.Tenant
		want   rbacv1.Subject
	}{
		"group":           {group, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "acme-admins"}},
		"user":            {user, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}},
		"service account": {sa, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "ci", Namespace: "acme-dev"}},
	}
}

// expectTenantChild: marked with the tenant's labels, and no owner
// reference, so that the garbage collector never deletes it (not even when
// the Tenant CRD goes away).
func expectTenantChild(g Gomega, om metav1.ObjectMeta, t *tenancyv1.Tenant) {
	g.Expect(om.Labels).To(HaveKeyWithValue(setup.ManagedByLabel, setup.ManagedByValue))
	g.Expect(om.Labels).To(HaveKeyWithValue("app.kubernetes.io/part-of", "trellis"))
	g.Expect(om.Labels).To(HaveKeyWithValue(TenantLabel, t.Name))
	g.Expect(om.OwnerReferences).To(BeEmpty())
}

func expectNoWildcards(g Gomega, rules []rbacv1.PolicyRule) {
	for _, r := range rules {
		g.Expect(r.Verbs).NotTo(ContainElement(rbacv1.VerbAll), "rule %+v", r)
		g.Expect(r.Resources).NotTo(ContainElement(rbacv1.ResourceAll), "rule %+v", r)
		g.Expect(r.APIGroups).NotTo(ContainElement(rbacv1.APIGroupAll), "rule %+v", r)
		g.Expect(r.NonResourceURLs).To(BeEmpty(), "rule %+v", r)
		g.Expect(r.ResourceNames).NotTo(BeEmpty(), "every rule is limited to named objects: %+v", r)
	}
}

func TestDesiredAdminRoleBinding(t *testing.T) {
	for name, tc := range adminTenants() {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			rb := desiredRoleBinding(tc.tenant, "acme-prod", adminRoleBindingName, builtinAdminRole, adminSubjects(tc.tenant))
			g.Expect(rb.Name).To(Equal("trellis-tenant-admin"))
			g.Expect(rb.Namespace).To(Equal("acme-prod"))
			g.Expect(rb.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"}))
			g.Expect(rb.Subjects).To(Equal([]rbacv1.Subject{tc.want}))
			expectTenantChild(g, rb.ObjectMeta, tc.tenant)
		})
	}
}

func TestAdminsJoinTheDeprecatedAdmin(t *testing.T) {
	g := NewWithT(t)
	tenant := unitTenant("acme", "uid-acme", "acme-", "dev")
	tenant.Spec.Admin = tenancyv1.Subject{Kind: rbacv1.UserKind, Name: "legacy", APIGroup: rbacv1.GroupName}
	tenant.Spec.Admins = append(tenant.Spec.Admins,
		tenancyv1.Subject{Kind: rbacv1.UserKind, Name: "legacy", APIGroup: rbacv1.GroupName}, // listed twice: bound once
		tenancyv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "ci", Namespace: "tools"})
	g.Expect(adminSubjects(tenant)).To(Equal([]rbacv1.Subject{
		{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "legacy"},
		{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "acme-admins"},
		{Kind: rbacv1.ServiceAccountKind, Name: "ci", Namespace: "tools"},
	}))
	g.Expect(describeAdmins(tenant)).To(Equal("User legacy and 2 more"))
}

func TestDesiredTenantRoleBindingBindsAdminsAndViewers(t *testing.T) {
	g := NewWithT(t)
	tenant := unitTenant("acme", "uid-acme", "acme-", "dev")
	tenant.Spec.Viewers = []tenancyv1.Subject{
		{Kind: rbacv1.GroupKind, Name: "auditors", APIGroup: rbacv1.GroupName},
		{Kind: rbacv1.GroupKind, Name: "acme-admins", APIGroup: rbacv1.GroupName}, // also an admin: bound once
	}
	crb := desiredTenantRoleBinding(tenant)
	g.Expect(crb.Name).To(Equal("trellis:tenant:acme"))
	g.Expect(crb.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "trellis:tenant:acme"}))
	g.Expect(crb.Subjects).To(Equal([]rbacv1.Subject{
		{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "acme-admins"},
		{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "auditors"},
	}))
	expectTenantChild(g, crb.ObjectMeta, tenant)
	viewers := desiredRoleBinding(tenant, "acme-dev", viewerRoleBindingName, builtinViewRole, viewerSubjects(tenant))
	g.Expect(viewers.RoleRef.Name).To(Equal("view"))
	g.Expect(viewers.Subjects).To(HaveLen(2))
}

func TestDesiredTenantRole(t *testing.T) {
	g := NewWithT(t)
	tenant := unitTenant("acme", "uid-acme", "acme-", "dev", "prod")
	cr := desiredTenantRole(tenant, []string{"acme-dev", "acme-prod"}, []types.UID{"uid-prod", "uid-dev"})
	g.Expect(cr.Name).To(Equal("trellis:tenant:acme"))
	g.Expect(cr.Namespace).To(BeEmpty())
	g.Expect(cr.AggregationRule).To(BeNil())
	expectTenantChild(g, cr.ObjectMeta, tenant)
	g.Expect(cr.Rules).To(Equal([]rbacv1.PolicyRule{
		{APIGroups: []string{"tenancy.trellis.dev"}, Resources: []string{"tenants"}, ResourceNames: []string{"acme"}, Verbs: []string{"get", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, ResourceNames: []string{"acme-dev", "acme-prod"}, Verbs: []string{"get", "watch"}},
	}))
	expectNoWildcards(g, cr.Rules)
	// Only reads.
	for _, r := range cr.Rules {
		g.Expect(r.Verbs).To(ConsistOf("get", "watch"), "rule %+v", r)
	}
	g.Expect(cr.Annotations).To(Equal(map[string]string{NamespaceUIDsAnnotation: "uid-dev,uid-prod"}), "sorted, so the same namespaces write the same value")
	g.Expect(recordedUIDs(cr)).To(Equal([]types.UID{"uid-dev", "uid-prod"}))
}

// TestTenantRoleKeepsRecordingWhatWaits: the ClusterRole records the UIDs of
// the namespaces the Tenant holds; of those it recorded before, it keeps
// the ones still waiting to be taken back (labelled with the name, held by
// no Tenant), and forgets the rest. A namespace it never recorded is not
// recorded by waiting.
func TestTenantRoleKeepsRecordingWhatWaits(t *testing.T) {
	tenant := unitTenant("acme", "uid-acme", "acme-", "dev")
	role := func(uids ...types.UID) *rbacv1.ClusterRole {
		return desiredTenantRole(tenant, []string{"acme-dev"}, uids)
	}
	for name, tc := range map[string]struct {
		live, desired *rbacv1.ClusterRole
		waiting       []types.UID
		want          string
		changed       bool
	}{
		"unchanged":                       {live: role("dev"), desired: role("dev"), want: "dev"},
		"a namespace added":               {live: role("dev"), desired: role("dev", "prod"), want: "dev,prod", changed: true},
		"the old Tenant's, still waiting": {live: role("old-a", "old-b"), desired: role("dev"), waiting: []types.UID{"old-b"}, want: "dev,old-b", changed: true},
		"taken back meanwhile":            {live: role("dev", "old-b"), desired: role("dev", "old-b"), waiting: []types.UID{"old-b"}, want: "dev,old-b"},
		"never recorded, waiting":         {live: role("dev"), desired: role("dev"), waiting: []types.UID{"forged"}, want: "dev"},
		"no namespace left":               {live: role("dev"), desired: role(), want: "", changed: true},
		"an older role without a record":  {live: role(), desired: role("dev"), want: "dev", changed: true},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			live := tc.live.DeepCopy()
			g.Expect(syncTenantRole(tc.waiting)(live, tc.desired, tenant)).To(Equal(tc.changed))
			if tc.want == "" {
				g.Expect(live.Annotations).NotTo(HaveKey(NamespaceUIDsAnnotation))
			} else {
				g.Expect(live.Annotations).To(HaveKeyWithValue(NamespaceUIDsAnnotation, tc.want))
			}
		})
	}
}

func TestDesiredTenantRoleWithoutNamespaces(t *testing.T) {
	for name, namespaces := range map[string][]string{"nil": nil, "empty": {}} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			cr := desiredTenantRole(unitTenant("acme", "uid-acme", "acme-", "dev"), namespaces, nil)
			g.Expect(cr.Rules).To(Equal([]rbacv1.PolicyRule{
				{APIGroups: []string{"tenancy.trellis.dev"}, Resources: []string{"tenants"}, ResourceNames: []string{"acme"}, Verbs: []string{"get", "watch"}},
			}))
			expectNoWildcards(g, cr.Rules)
		})
	}
}

// guardedTenant has every guardrail.
func guardedTenant() *tenancyv1.Tenant {
	t := unitTenant("acme", "uid-acme", "acme-", "dev", "prod")
	t.Spec.Quota = tenancyv1.TenantQuota{Hard: corev1.ResourceList{"pods": resource.MustParse("10"), "requests.cpu": resource.MustParse("2")}}
	t.Spec.LimitRange = tenancyv1.TenantLimitRange{Limits: []tenancyv1.LimitRangeItem{{
		Type: corev1.LimitTypeContainer,
		Max:  corev1.ResourceList{"cpu": resource.MustParse("2"), "memory": resource.MustParse("1Gi")},
		Min:  corev1.ResourceList{"cpu": resource.MustParse("10m")},
	}}}
	t.Spec.NetworkIsolation = &tenancyv1.NetworkIsolation{AllowFromNamespaces: []string{"ingress-nginx", "monitoring"}}
	t.Spec.PodSecurity = tenancyv1.PodSecurity{Enforce: tenancyv1.PodSecurityRestricted, Warn: tenancyv1.PodSecurityRestricted}
	t.Spec.NamespaceMetadata = tenancyv1.NamespaceMetadata{
		Labels:      map[string]tenancyv1.LabelValue{"cost-center": "42"},
		Annotations: map[string]tenancyv1.AnnotationValue{"example.com/owner": "acme team"},
	}
	return t
}

func TestDesiredNamespaceCarriesMarksAndGuardrails(t *testing.T) {
	g := NewWithT(t)
	ns := desiredNamespace(guardedTenant(), "acme-dev", requestMark{})
	g.Expect(ns.Labels).To(Equal(map[string]string{
		TenantLabel: "acme", setup.ManagedByLabel: "trellis", "app.kubernetes.io/part-of": "trellis",
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted",
		NetworkIsolationLabel: "true", "cost-center": "42",
	}))
	g.Expect(ns.Annotations).To(Equal(map[string]string{TenantUIDAnnotation: "uid-acme", "example.com/owner": "acme team"}))
	g.Expect(ns.OwnerReferences).To(BeEmpty())

	plain := desiredNamespace(unitTenant("acme", "uid-acme", "acme-", "dev"), "acme-dev", requestMark{})
	g.Expect(plain.Labels).To(HaveLen(3), "only the marks: %v", plain.Labels)
	g.Expect(plain.Annotations).To(Equal(map[string]string{TenantUIDAnnotation: "uid-acme"}))
}

// managedBy builds the managedFields entry a manager gets for the labels and annotations it wrote.
func managedBy(manager string, labels, annotations []string) metav1.ManagedFieldsEntry {
	set := map[string]any{}
	l, a := map[string]any{}, map[string]any{}
	for _, k := range labels {
		l["f:"+k] = map[string]any{}
	}
	for _, k := range annotations {
		a["f:"+k] = map[string]any{}
	}
	set["f:metadata"] = map[string]any{"f:labels": l, "f:annotations": a}
	raw, _ := json.Marshal(set)
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: raw}}
}

func TestSyncNamespace(t *testing.T) {
	g := NewWithT(t)
	tenant := guardedTenant()
	tenant.Spec.PodSecurity.Warn = ""                 // dropped from the spec
	delete(tenant.Spec.NamespaceMetadata.Labels, "x") // never there
	live := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: "acme-dev",
		Labels: map[string]string{
			TenantLabel: "acme", setup.ManagedByLabel: "trellis", "app.kubernetes.io/part-of": "trellis",
			"kubernetes.io/metadata.name":        "acme-dev",
			"pod-security.kubernetes.io/enforce": "privileged", // drifted: a cluster admin loosened it
			"pod-security.kubernetes.io/warn":    "restricted", // ours, no longer asked for
			"old-label":                          "x",          // ours, no longer asked for
			"team-label":                         "y",          // someone else's
		},
		Annotations: map[string]string{TenantUIDAnnotation: "uid-acme", "note": "someone else's", HandOverAnnotation: "acme"},
		ManagedFields: []metav1.ManagedFieldsEntry{
			managedBy("trellis", []string{TenantLabel, setup.ManagedByLabel, "app.kubernetes.io/part-of",
				"pod-security.kubernetes.io/warn", "old-label", "kubernetes.io/metadata.name"}, []string{TenantUIDAnnotation}),
			managedBy("kubectl", []string{"team-label", "pod-security.kubernetes.io/enforce"}, []string{"note", HandOverAnnotation}),
		},
	}}
	g.Expect(syncNamespace(live, tenant, requestMark{})).To(BeTrue())
	g.Expect(live.Labels).To(Equal(map[string]string{
		TenantLabel: "acme", setup.ManagedByLabel: "trellis", "app.kubernetes.io/part-of": "trellis",
		"kubernetes.io/metadata.name":        "acme-dev",
		"pod-security.kubernetes.io/enforce": "restricted",
		NetworkIsolationLabel:                "true",
		"cost-center":                        "42",
		"team-label":                         "y",
	}))
	g.Expect(live.Annotations).To(Equal(map[string]string{
		TenantUIDAnnotation: "uid-acme", "note": "someone else's", "example.com/owner": "acme team",
	}), "the hand-over annotation naming this Tenant has done its work")
	g.Expect(syncNamespace(live, tenant, requestMark{})).To(BeFalse(), "a second sync changes nothing")

	// A hand-over naming another Tenant is not ours to remove.
	live.Annotations[HandOverAnnotation] = "bolt"
	g.Expect(syncNamespace(live, tenant, requestMark{})).To(BeFalse())
}

// TestReleaseNamespaceTakesAccessKeepsRestrictions: releasing takes off the
// marks and the tenant's namespaceMetadata, keeps the Pod Security and
// network-isolation labels and the allowances' annotations, and marks the
// namespace released; a Tenant taking it again takes that mark off.
func TestReleaseNamespaceTakesAccessKeepsRestrictions(t *testing.T) {
	g := NewWithT(t)
	tenant := guardedTenant()
	tenant.Spec.Allowances = tenancyv1.TenantAllowances{Registries: []tenancyv1.RegistryPrefix{"registry.example.com"}}
	live := desiredNamespace(tenant, "acme-dev", requestMark{})
	live.Labels["kubernetes.io/metadata.name"] = "acme-dev"
	live.Labels["team-label"] = "y"
	live.Annotations["note"] = "kept"
	ownLabels := make([]string, 0, len(live.Labels))
	ownAnnotations := make([]string, 0, len(live.Annotations))
	for k := range desiredNamespace(tenant, "acme-dev", requestMark{}).Labels {
		ownLabels = append(ownLabels, k)
	}
	for k := range desiredNamespace(tenant, "acme-dev", requestMark{}).Annotations {
		ownAnnotations = append(ownAnnotations, k)
	}
	live.ManagedFields = []metav1.ManagedFieldsEntry{managedBy("trellis", ownLabels, ownAnnotations)}

	g.Expect(releaseNamespace(live, tenant)).To(BeTrue())
	g.Expect(live.Labels).To(Equal(map[string]string{
		"kubernetes.io/metadata.name": "acme-dev", "team-label": "y",
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted",
		NetworkIsolationLabel: "true", ReleasedFromLabel: "acme",
	}))
	g.Expect(live.Annotations).To(Equal(map[string]string{
		"note": "kept", AllowedRegistriesAnnotation: "registry.example.com", ReleasedFromUIDAnnotation: "uid-acme",
	}))
	g.Expect(releasedBy(live, tenant)).To(BeTrue())
	// The release patch makes Trellis the manager of the released-from marks:
	// releasing again changes nothing all the same.
	live.ManagedFields = append(live.ManagedFields, managedBy("trellis", []string{ReleasedFromLabel}, []string{ReleasedFromUIDAnnotation}))
	g.Expect(releaseNamespace(live, tenant)).To(BeFalse())

	// Handed over to another Tenant: the release mark goes, the restrictions
	// are that Tenant's to keep or take off.
	bolt := unitTenant("bolt", "uid-bolt", "acme-", "dev")
	g.Expect(syncNamespace(live, bolt, requestMark{})).To(BeTrue())
	g.Expect(live.Labels).NotTo(HaveKey(ReleasedFromLabel))
	g.Expect(live.Annotations).NotTo(HaveKey(ReleasedFromUIDAnnotation))
	g.Expect(live.Labels).NotTo(HaveKey("pod-security.kubernetes.io/enforce"), "bolt declares no Pod Security level")
	g.Expect(live.Annotations).NotTo(HaveKey(AllowedRegistriesAnnotation), "bolt declares no allowances")
	g.Expect(live.Labels).To(HaveKeyWithValue(TenantLabel, "bolt"))
}

func TestMetadataKeysOf(t *testing.T) {
	g := NewWithT(t)
	entries := []metav1.ManagedFieldsEntry{
		managedBy("trellis", []string{"a", "example.com/b"}, []string{"c"}),
		managedBy("other", []string{"d"}, nil),
		{Manager: "trellis", FieldsV1: &metav1.FieldsV1{Raw: []byte(`not json`)}},
		{Manager: "trellis", Subresource: "status", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{"f:s":{}}}}`)}},
		{Manager: "trellis"},
	}
	labels, annotations := metadataKeysOf(entries, "trellis")
	g.Expect(labels).To(Equal(map[string]bool{"a": true, "example.com/b": true}))
	g.Expect(annotations).To(Equal(map[string]bool{"c": true}))
}

func TestGuardrailMetadataKey(t *testing.T) {
	g := NewWithT(t)
	for key, want := range map[string]bool{
		"team": true, "example.com/x": true, "pod-security.kubernetes.io/enforce": true,
		"pod-security.kubernetes.io/enforce-version": false, "kubernetes.io/metadata.name": false, "x.k8s.io/y": false,
		TenantLabel: false, TenantUIDAnnotation: false, setup.ManagedByLabel: false, HandOverAnnotation: false,
		ReleasedFromLabel: false, ReleasedFromUIDAnnotation: false,
	} {
		g.Expect(guardrailMetadataKey(key)).To(Equal(want), key)
	}
}

func TestDesiredGuardrails(t *testing.T) {
	g := NewWithT(t)
	tenant := guardedTenant()

	q := desiredQuota(tenant, "acme-dev")
	g.Expect(q.Name).To(Equal(quotaName))
	g.Expect(q.Spec.Hard).To(Equal(tenant.Spec.Quota.Hard))
	expectTenantChild(g, q.ObjectMeta, tenant)

	lr := desiredLimitRange(tenant, "acme-dev")
	g.Expect(lr.Name).To(Equal(limitRangeName))
	g.Expect(lr.Spec.Limits).To(HaveLen(1))
	item := lr.Spec.Limits[0]
	// As the API server defaults it: default limit from max, default request from the default limit.
	g.Expect(item.Default).To(Equal(corev1.ResourceList{"cpu": resource.MustParse("2"), "memory": resource.MustParse("1Gi")}))
	g.Expect(item.DefaultRequest).To(Equal(corev1.ResourceList{"cpu": resource.MustParse("2"), "memory": resource.MustParse("1Gi")}))
	expectTenantChild(g, lr.ObjectMeta, tenant)

	np := desiredNetworkPolicy(tenant, "acme-dev")
	g.Expect(np.Name).To(Equal(networkPolicyName))
	g.Expect(np.Spec.PodSelector).To(Equal(metav1.LabelSelector{}), "every pod")
	g.Expect(np.Spec.PolicyTypes).To(Equal([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress}))
	g.Expect(np.Spec.Egress).To(BeEmpty())
	g.Expect(np.Spec.Ingress).To(Equal([]networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
		{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{TenantLabel: "acme"}}},
		{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{"ingress-nginx", "monitoring"},
		}}}},
	}}}))
	expectTenantChild(g, np.ObjectMeta, tenant)

	tenant.Spec.NetworkIsolation.AllowFromNamespaces = nil
	g.Expect(desiredNetworkPolicy(tenant, "acme-dev").Spec.Ingress[0].From).To(HaveLen(1), "own namespaces only")
}

func TestDefaultLimitRangeItemLeavesPodItemsAlone(t *testing.T) {
	g := NewWithT(t)
	item := corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: corev1.ResourceList{"cpu": resource.MustParse("4")}}
	defaultLimitRangeItem(&item)
	g.Expect(item.Default).To(BeNil())
	g.Expect(item.DefaultRequest).To(BeNil())

	explicit := corev1.LimitRangeItem{Type: corev1.LimitTypeContainer,
		Max: corev1.ResourceList{"cpu": resource.MustParse("4")}, Default: corev1.ResourceList{"cpu": resource.MustParse("1")},
		Min: corev1.ResourceList{"memory": resource.MustParse("64Mi")}}
	defaultLimitRangeItem(&explicit)
	g.Expect(explicit.Default).To(Equal(corev1.ResourceList{"cpu": resource.MustParse("1")}), "an explicit default stays")
	g.Expect(explicit.DefaultRequest).To(Equal(corev1.ResourceList{"cpu": resource.MustParse("1"), "memory": resource.MustParse("64Mi")}))
}

func TestSyncKeepsGuardrailsExactlyAsDeclared(t *testing.T) {
	g := NewWithT(t)
	tenant := guardedTenant()
	want := desiredQuota(tenant, "acme-dev")

	live := want.DeepCopy()
	g.Expect(syncQuota(live, want, tenant)).To(BeFalse(), "as declared: nothing to do")

	live.Spec.Hard["pods"] = resource.MustParse("1000")   // loosened
	live.Spec.Hard["services"] = resource.MustParse("50") // added by hand
	live.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}
	delete(live.Labels, TenantLabel)
	g.Expect(syncQuota(live, want, tenant)).To(BeTrue())
	g.Expect(equality.Semantic.DeepEqual(live.Spec, want.Spec)).To(BeTrue(), "%+v", live.Spec)
	g.Expect(live.Labels).To(HaveKeyWithValue(TenantLabel, "acme"))

	// Quantities are compared by value, not spelling.
	live.Spec.Hard["requests.cpu"] = resource.MustParse("2000m")
	g.Expect(syncQuota(live, want, tenant)).To(BeFalse())
}

func TestSyncMarksRestoresTheMarksOnly(t *testing.T) {
	g := NewWithT(t)
	tenant := unitTenant("acme", "uid-acme", "acme-", "dev")
	rb := desiredRoleBinding(tenant, "acme-dev", adminRoleBindingName, builtinAdminRole, adminSubjects(tenant))
	rb.Labels = map[string]string{TenantLabel: "other", "team": "x"}
	g.Expect(syncMarks(rb, tenant)).To(BeTrue())
	want := childLabels(tenant)
	want["team"] = "x"
	g.Expect(rb.Labels).To(Equal(want), "the marks come back; anyone else's labels stay")
	g.Expect(syncMarks(rb, tenant)).To(BeFalse())
}

func TestDesiredIsDeterministic(t *testing.T) {
	g := NewWithT(t)
	build := func() []any {
		tenant := guardedTenant()
		return []any{
			desiredNamespace(tenant, "acme-dev", requestMark{}),
			desiredRoleBinding(tenant, "acme-dev", adminRoleBindingName, builtinAdminRole, adminSubjects(tenant)),
			desiredQuota(tenant, "acme-dev"),
			desiredLimitRange(tenant, "acme-dev"),
			desiredNetworkPolicy(tenant, "acme-dev"),
			desiredTenantRole(tenant, namespaceNames(tenant), nil),
			desiredTenantRoleBinding(tenant),
		}
	}
	first, second := build(), build()
	for i := range first {
		g.Expect(equality.Semantic.DeepEqual(first[i], second[i])).To(BeTrue(), "object %d differs:\n%#v\n%#v", i, first[i], second[i])
		a, err := json.Marshal(first[i])
		g.Expect(err).NotTo(HaveOccurred())
		b, err := json.Marshal(second[i])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(a)).To(Equal(string(b)))
	}
}

func TestDesiredDiffersPerTenant(t *testing.T) {
	g := NewWithT(t)
	a := unitTenant("acme", "uid-acme", "acme-", "dev")
	b := unitTenant("bolt", "uid-bolt", "bolt-", "dev")
	crA := desiredTenantRole(a, namespaceNames(a), nil)
	crB := desiredTenantRole(b, namespaceNames(b), nil)
	g.Expect(crA.Name).NotTo(Equal(crB.Name))
	g.Expect(crB.Rules[0].ResourceNames).To(Equal([]string{"bolt"}))
	g.Expect(crB.Rules[1].ResourceNames).To(Equal([]string{"bolt-dev"}))
	g.Expect(crB.Labels).To(HaveKeyWithValue(TenantLabel, "bolt"))
}
