package tenancy

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/controller/setup"
)

// What a tenant's objects should look like, and how a live object is brought
// back to it. Every object carries marks (labels), not owner references: an
// owner reference would let the garbage collector delete it whenever the
// Tenant goes away, which is also what happens when the Tenant CRD is deleted.

// childLabels go on every object Trellis creates for a tenant; managed-by also
// scopes the manager's cache, the tenant label maps the object to its Tenant.
func childLabels(t *tenancyv1.Tenant) map[string]string {
	return map[string]string{
		setup.ManagedByLabel: setup.ManagedByValue,
		partOfLabel:          "trellis",
		TenantLabel:          t.Name,
	}
}

func childMeta(t *tenancyv1.Tenant, namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: childLabels(t)}
}

func rbacSubjects(in []tenancyv1.Subject) []rbacv1.Subject {
	out := make([]rbacv1.Subject, 0, len(in))
	for _, s := range in {
		sub := rbacv1.Subject{Kind: s.Kind, Name: s.Name}
		if s.Kind == rbacv1.ServiceAccountKind {
			sub.Namespace = s.Namespace
		} else {
			sub.APIGroup = rbacv1.GroupName
		}
		if !slices.Contains(out, sub) {
			out = append(out, sub)
		}
	}
	return out
}

// admins are the deprecated spec.admin, if set, then spec.admins, without duplicates.
func admins(t *tenancyv1.Tenant) []tenancyv1.Subject {
	var all []tenancyv1.Subject
	if t.Spec.Admin.Kind != "" {
		all = append(all, t.Spec.Admin)
	}
	return append(all, t.Spec.Admins...)
}

func adminSubjects(t *tenancyv1.Tenant) []rbacv1.Subject  { return rbacSubjects(admins(t)) }
func viewerSubjects(t *tenancyv1.Tenant) []rbacv1.Subject { return rbacSubjects(t.Spec.Viewers) }

// namespaceMetadata is every label and annotation Trellis wants on a tenant
// namespace: the marks (with the request it was made for, if any: none for a
// namespace of the spec), the Pod Security levels, the isolation label, the
// spec's namespaceMetadata and the annotations of its allowances.
func namespaceMetadata(t *tenancyv1.Tenant, requestedBy requestMark) (labels, annotations map[string]string) {
	labels, annotations = map[string]string{}, map[string]string{}
	for k, v := range t.Spec.NamespaceMetadata.Labels {
		labels[k] = string(v)
	}
	for k, v := range t.Spec.NamespaceMetadata.Annotations {
		annotations[k] = string(v)
	}
	if ps := t.Spec.PodSecurity; ps.Enforce != "" {
		labels[podSecurityEnforceLabel] = string(ps.Enforce)
		if ps.Warn != "" {
			labels[podSecurityWarnLabel] = string(ps.Warn)
		}
		if ps.Audit != "" {
			labels[podSecurityAuditLabel] = string(ps.Audit)
		}
	}
	if t.Spec.NetworkIsolation != nil {
		labels[NetworkIsolationLabel] = "true"
	}
	maps.Copy(annotations, allowanceAnnotations(t.Spec.Allowances))
	maps.Copy(labels, childLabels(t))
	annotations[TenantUIDAnnotation] = string(t.UID)
	if requestedBy.key != "" {
		annotations[RequestedByAnnotation] = requestedBy.key
	}
	if requestedBy.uid != "" {
		annotations[RequestedByUIDAnnotation] = string(requestedBy.uid)
	}
	return labels, annotations
}

// allowanceAnnotations are the tenancy.trellis.dev/allowed-* annotations of
// spec.allowances: one per allowance that is set, its entries joined with
// commas (the schema admits no comma in an entry).
func allowanceAnnotations(a tenancyv1.TenantAllowances) map[string]string {
	out := map[string]string{}
	set := func(key string, values []string) {
		if len(values) > 0 {
			out[key] = strings.Join(values, ",")
		}
	}
	set(AllowedHostnamesAnnotation, stringsOf(a.Hostnames))
	set(AllowedIngressClassesAnnotation, stringsOf(a.IngressClasses))
	gateways := make([]string, 0, len(a.Gateways))
	for _, g := range a.Gateways {
		gateways = append(gateways, g.Namespace+"/"+string(g.Name))
	}
	set(AllowedGatewaysAnnotation, gateways)
	set(AllowedRegistriesAnnotation, stringsOf(a.Registries))
	set(AllowedStorageClassesAnnotation, stringsOf(a.StorageClasses))
	set(AllowedPriorityClassesAnnotation, stringsOf(a.PriorityClasses))
	set(AllowedRuntimeClassesAnnotation, stringsOf(a.RuntimeClasses))
	set(AllowedServiceTypesAnnotation, stringsOf(a.ServiceTypes))
	selector := make([]string, 0, len(a.NodeSelector))
	for _, k := range slices.Sorted(maps.Keys(a.NodeSelector)) {
		selector = append(selector, k+"="+string(a.NodeSelector[k]))
	}
	set(ForcedNodeSelectorAnnotation, selector)
	return out
}

func stringsOf[S ~string](in []S) []string {
	out := make([]string, 0, len(in))
	for _, s := range in {
		out = append(out, string(s))
	}
	return out
}

// desiredNamespace is a tenant namespace as it is created.
func desiredNamespace(t *tenancyv1.Tenant, name string, requestedBy requestMark) *corev1.Namespace {
	labels, annotations := namespaceMetadata(t, requestedBy)
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}}
}

// syncNamespace brings a namespace the tenant holds to the labels and
// annotations it wants. A key Trellis set earlier (it manages that field, as
// managedFields say) that the spec no longer asks for is taken off; keys of
// anyone else are left alone. A hand-over annotation naming this Tenant has
// done its work and goes, and so does the mark of an earlier release: the
// namespace is a Tenant's again.
func syncNamespace(live *corev1.Namespace, t *tenancyv1.Tenant, requestedBy requestMark) bool {
	labels, annotations := namespaceMetadata(t, requestedBy)
	ownLabels, ownAnnotations := metadataKeysOf(live.ManagedFields, setup.FieldManager)
	changed := syncStringMap(&live.Labels, labels, ownLabels)
	if _, released := live.Labels[ReleasedFromLabel]; released {
		delete(live.Labels, ReleasedFromLabel)
		changed = true
	}
	if _, released := live.Annotations[ReleasedFromUIDAnnotation]; released {
		delete(live.Annotations, ReleasedFromUIDAnnotation)
		changed = true
	}
	if live.Annotations[HandOverAnnotation] == t.Name {
		delete(live.Annotations, HandOverAnnotation)
		changed = true
	}
	return syncStringMap(&live.Annotations, annotations, ownAnnotations) || changed
}

// releaseNamespace takes off a namespace the Tenant gives up what gave the
// tenant access to it, and keeps what restricts it. The marks go (the tenant
// label is itself access: the tenant's isolation policies admit traffic from
// namespaces carrying it), and so do the labels and annotations Trellis set
// from namespaceMetadata. The Pod Security labels, the network-isolation
// label and the allowances' annotations stay, and the namespace is labelled
// released-from=<tenant>, by which the admission policies keep protecting the
// guardrails that stayed in it and enforcing the allowances, and annotated
// with the Tenant's UID, by which that Tenant's quota keeps counting what
// stayed (leftQuotas).
func releaseNamespace(live *corev1.Namespace, t *tenancyv1.Tenant) bool {
	tenant := t.Name
	ownLabels, ownAnnotations := metadataKeysOf(live.ManagedFields, setup.FieldManager)
	changed := false
	for k := range live.Labels {
		if markKey(k) || (ownLabels[k] && guardrailMetadataKey(k) && !restrictionKey(k)) {
			delete(live.Labels, k)
			changed = true
		}
	}
	for k := range live.Annotations {
		if markKey(k) || (ownAnnotations[k] && guardrailMetadataKey(k) && !restrictionKey(k)) {
			delete(live.Annotations, k)
			changed = true
		}
	}
	if live.Labels[ReleasedFromLabel] != tenant {
		if live.Labels == nil {
			live.Labels = map[string]string{}
		}
		live.Labels[ReleasedFromLabel] = tenant
		changed = true
	}
	if live.Annotations[ReleasedFromUIDAnnotation] != string(t.UID) {
		if live.Annotations == nil {
			live.Annotations = map[string]string{}
		}
		live.Annotations[ReleasedFromUIDAnnotation] = string(t.UID)
		changed = true
	}
	return changed
}

// syncStringMap sets every wanted key, and deletes keys Trellis owns that are
// no longer wanted; it reports whether it changed m.
func syncStringMap(m *map[string]string, want map[string]string, owned map[string]bool) bool {
	changed := false
	for k, v := range want {
		if cur, ok := (*m)[k]; !ok || cur != v {
			if *m == nil {
				*m = map[string]string{}
			}
			(*m)[k] = v
			changed = true
		}
	}
	for k := range *m {
		if _, wanted := want[k]; !wanted && owned[k] && guardrailMetadataKey(k) {
			delete(*m, k)
			changed = true
		}
	}
	return changed
}

// metadataKeysOf lists the labels and annotations the field manager owns,
// from an object's managedFields (whatever the operation: namespaces are
// created and patched, not applied).
func metadataKeysOf(entries []metav1.ManagedFieldsEntry, manager string) (labels, annotations map[string]bool) {
	labels, annotations = map[string]bool{}, map[string]bool{}
	for _, e := range entries {
		if e.Manager != manager || e.FieldsV1 == nil || e.Subresource != "" {
			continue
		}
		var fields struct {
			Metadata struct {
				Labels      map[string]json.RawMessage `json:"f:labels"`
				Annotations map[string]json.RawMessage `json:"f:annotations"`
			} `json:"f:metadata"`
		}
		if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields); err != nil {
			continue // not a field set we understand: own nothing from it
		}
		for k := range fields.Metadata.Labels {
			if name, ok := cutFieldKey(k); ok {
				labels[name] = true
			}
		}
		for k := range fields.Metadata.Annotations {
			if name, ok := cutFieldKey(k); ok {
				annotations[name] = true
			}
		}
	}
	return labels, annotations
}

// cutFieldKey turns "f:<key>" of a managedFields set into the key.
func cutFieldKey(k string) (string, bool) {
	if len(k) > 2 && k[:2] == "f:" {
		return k[2:], true
	}
	return "", false
}

// syncMarks puts the tenant's labels back on a child; it reports whether it
// changed anything.
func syncMarks(live metav1.Object, t *tenancyv1.Tenant) bool {
	changed := false
	labels := live.GetLabels()
	for k, v := range childLabels(t) {
		if labels[k] != v {
			if labels == nil {
				labels = map[string]string{}
			}
			labels[k] = v
			changed = true
		}
	}
	live.SetLabels(labels)
	return changed
}

// keep makes the function that brings a live child of a tenant back to what
// Trellis wants of it: the tenant's marks, and the one part of the object
// Trellis keeps (part points to it), set whole from the desired object when
// it differs. The rest (a quota's status, what the API server defaults) is
// not Trellis' and is left alone. The function reports whether it changed
// the live object.
func keep[T metav1.Object, P any](part func(T) *P) func(live, desired T, t *tenancyv1.Tenant) bool {
	return func(live, desired T, t *tenancyv1.Tenant) bool {
		changed := syncMarks(live, t)
		if l, d := part(live), part(desired); !equality.Semantic.DeepEqual(*l, *d) {
			*l = *d
			changed = true
		}
		return changed
	}
}

// What Trellis keeps of each kind of child. A binding's role is not among
// it: it is immutable, and a live binding naming another role is not the
// tenant's (roleRefOf). A guardrail's spec is kept exactly as declared:
// limits someone added by hand go, as do a quota's scopes (a scope narrows
// what the quota counts).
var (
	syncRoleBinding        = keep(func(b *rbacv1.RoleBinding) *[]rbacv1.Subject { return &b.Subjects })
	syncClusterRoleBinding = keep(func(b *rbacv1.ClusterRoleBinding) *[]rbacv1.Subject { return &b.Subjects })
	syncClusterRole        = keep(func(r *rbacv1.ClusterRole) *[]rbacv1.PolicyRule { return &r.Rules })
	syncQuota              = keep(func(q *corev1.ResourceQuota) *corev1.ResourceQuotaSpec { return &q.Spec })
	syncLimitRange         = keep(func(l *corev1.LimitRange) *corev1.LimitRangeSpec { return &l.Spec })
	syncNetworkPolicy      = keep(func(p *networkingv1.NetworkPolicy) *networkingv1.NetworkPolicySpec { return &p.Spec })
)

// desiredRoleBinding binds subjects to a built-in ClusterRole in one namespace.
func desiredRoleBinding(t *tenancyv1.Tenant, namespace, name, role string, subjects []rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: childMeta(t, namespace, name),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   subjects,
	}
}

// desiredQuota is the ResourceQuota of one tenant namespace.
func desiredQuota(t *tenancyv1.Tenant, namespace string) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{
		ObjectMeta: childMeta(t, namespace, quotaName),
		Spec:       corev1.ResourceQuotaSpec{Hard: t.Spec.Quota.Hard.DeepCopy()},
	}
}

// desiredLimitRange is the LimitRange of one tenant namespace.
func desiredLimitRange(t *tenancyv1.Tenant, namespace string) *corev1.LimitRange {
	items := make([]corev1.LimitRangeItem, 0, len(t.Spec.LimitRange.Limits))
	for _, l := range t.Spec.LimitRange.Limits {
		item := corev1.LimitRangeItem{
			Type:                 l.Type,
			Max:                  l.Max.DeepCopy(),
			Min:                  l.Min.DeepCopy(),
			Default:              l.Default.DeepCopy(),
			DefaultRequest:       l.DefaultRequest.DeepCopy(),
			MaxLimitRequestRatio: l.MaxLimitRequestRatio.DeepCopy(),
		}
		defaultLimitRangeItem(&item)
		items = append(items, item)
	}
	return &corev1.LimitRange{ObjectMeta: childMeta(t, namespace, limitRangeName), Spec: corev1.LimitRangeSpec{Limits: items}}
}

// defaultLimitRangeItem fills in what the API server's defaulting fills in
// for a Container item (k8s.io/kubernetes pkg/apis/core/v1
// SetDefaults_LimitRangeItem), so that the LimitRange Trellis wants compares
// equal to the one stored: default limit from max, default request from the
// default limit, then from min.
func defaultLimitRangeItem(item *corev1.LimitRangeItem) {
	if item.Type != corev1.LimitTypeContainer {
		return
	}
	if item.Default == nil {
		item.Default = corev1.ResourceList{}
	}
	if item.DefaultRequest == nil {
		item.DefaultRequest = corev1.ResourceList{}
	}
	for k, v := range item.Max {
		if _, ok := item.Default[k]; !ok {
			item.Default[k] = v.DeepCopy()
		}
	}
	for k, v := range item.Default {
		if _, ok := item.DefaultRequest[k]; !ok {
			item.DefaultRequest[k] = v.DeepCopy()
		}
	}
	for k, v := range item.Min {
		if _, ok := item.DefaultRequest[k]; !ok {
			item.DefaultRequest[k] = v.DeepCopy()
		}
	}
}

// desiredNetworkPolicy admits traffic into every pod of one tenant namespace
// from the tenant's own namespaces (by the tenant label, which only Trellis
// sets: tenant admins cannot label namespaces, and namespaceMetadata refuses
// Trellis' keys) and from the namespaces the spec lists (by the name label
// the API server sets); everything else, other tenants included, is refused.
func desiredNetworkPolicy(t *tenancyv1.Tenant, namespace string) *networkingv1.NetworkPolicy {
	from := []networkingv1.NetworkPolicyPeer{{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{TenantLabel: t.Name}},
	}}
	if extra := t.Spec.NetworkIsolation.AllowFromNamespaces; len(extra) > 0 {
		from = append(from, networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: slices.Clone(extra),
			}},
		}})
	}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: childMeta(t, namespace, networkPolicyName),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: from}},
		},
	}
}

// desiredTenantRole lets the tenant's admins and viewers read their own
// Tenant and namespaces, and nothing else cluster-wide (both are
// cluster-scoped, so a Role cannot do it).
func desiredTenantRole(t *tenancyv1.Tenant, namespaces []string, uids []types.UID) *rbacv1.ClusterRole {
	rules := []rbacv1.PolicyRule{{
		APIGroups:     []string{tenancyv1.GroupVersion.Group},
		Resources:     []string{"tenants"},
		ResourceNames: []string{t.Name},
		Verbs:         []string{"get", "watch"},
	}}
	if len(namespaces) > 0 {
		rules = append(rules, rbacv1.PolicyRule{
			APIGroups:     []string{""},
			Resources:     []string{"namespaces"},
			ResourceNames: slices.Clone(namespaces),
			Verbs:         []string{"get", "watch"},
		})
	}
	role := &rbacv1.ClusterRole{ObjectMeta: childMeta(t, "", tenantRoleName(t)), Rules: rules}
	if len(uids) > 0 {
		role.Annotations = map[string]string{NamespaceUIDsAnnotation: joinUIDs(uids)}
	}
	return role
}

// joinUIDs is the value of NamespaceUIDsAnnotation: the UIDs sorted, each
// once, so that the same namespaces always write the same value.
func joinUIDs(uids []types.UID) string {
	out := make([]string, 0, len(uids))
	for _, uid := range uids {
		out = append(out, string(uid))
	}
	slices.Sort(out)
	return strings.Join(slices.Compact(out), ",")
}

// recordedUIDs are the namespace UIDs a Tenant's ClusterRole records.
func recordedUIDs(role *rbacv1.ClusterRole) []types.UID {
	var out []types.UID
	for uid := range strings.SplitSeq(role.Annotations[NamespaceUIDsAnnotation], ",") {
		if uid != "" {
			out = append(out, types.UID(uid))
		}
	}
	return out
}

// syncTenantRole brings a live per-tenant ClusterRole back to desired: the
// rules, and the namespace UIDs it records, which keep, beside desired's,
// those the live role records of namespaces still waiting for a Tenant of
// this name to take them back (an uninstall left them; their requests, say,
// are not made again yet).
func syncTenantRole(waiting []types.UID) func(live, desired *rbacv1.ClusterRole, t *tenancyv1.Tenant) bool {
	return func(live, desired *rbacv1.ClusterRole, t *tenancyv1.Tenant) bool {
		uids := recordedUIDs(desired)
		for _, uid := range recordedUIDs(live) {
			if slices.Contains(waiting, uid) {
				uids = append(uids, uid)
			}
		}
		changed := syncClusterRole(live, desired, t)
		want := ""
		if len(uids) > 0 {
			want = joinUIDs(uids)
		}
		if have, ok := live.Annotations[NamespaceUIDsAnnotation]; have != want || ok != (want != "") {
			if want == "" {
				delete(live.Annotations, NamespaceUIDsAnnotation)
			} else {
				if live.Annotations == nil {
					live.Annotations = map[string]string{}
				}
				live.Annotations[NamespaceUIDsAnnotation] = want
			}
			changed = true
		}
		return changed
	}
}

// desiredTenantRoleBinding binds the admins and viewers to the per-tenant ClusterRole.
func desiredTenantRoleBinding(t *tenancyv1.Tenant) *rbacv1.ClusterRoleBinding {
	subjects := adminSubjects(t)
	for _, s := range viewerSubjects(t) {
		if !slices.Contains(subjects, s) {
			subjects = append(subjects, s)
		}
	}
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: childMeta(t, "", tenantRoleName(t)),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: tenantRoleName(t)},
		Subjects:   subjects,
	}
}
