package tenancy

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/operate"
	"github.com/trellis-dev/trellis/internal/controller/outcome"
)

// Condition reasons of a Tenant, as documented in docs/tenant.md (Ready and
// ReconcileError are every kind's: conditions.ReasonReady and
// conditions.ReasonReconcileError).
const (
	ReasonNamespaceConflict  = "NamespaceConflict"
	ReasonProtectedNamespace = "ProtectedNamespace"
	ReasonRBACConflict       = "RBACConflict"
	ReasonGuardrailRefused   = "GuardrailRefused"
	ReasonTerminating        = "NamespaceTerminating"

	// ReasonIsolationUndone: a NetworkPolicy in a network-isolated tenant's
	// namespace admits ingress from outside the tenant (isolation.go).
	ReasonIsolationUndone = "IsolationUndone"
)

// ConditionSubjectsFound is True when every ServiceAccount admin or viewer
// is in a namespace that exists. It does not hold Ready back: the bindings
// are in place as declared, they just grant nothing until the namespace
// exists (and then to whoever creates that ServiceAccount).
const ConditionSubjectsFound = "SubjectsFound"

// Reasons of SubjectsFound.
const (
	ReasonSubjectsFound           = "AllFound"
	ReasonSubjectNamespaceMissing = "ServiceAccountNamespaceMissing"
)

// observation is what one reconcile found, recorded by its own goroutine:
// the writes of a round report what they found (found), and the round
// records it here in order (record).
type observation struct {
	// namespaces is the state of every namespace of the spec, in spec order.
	namespaces []tenancyv1.TenantNamespaceStatus
	// uids are the UIDs of the namespaces found the tenant's.
	uids         map[string]types.UID
	rbacConflict string
	// refused lists guardrails the API server refused to store.
	refused []string
	// subjectsChecked says whether ServiceAccount subjects were checked this
	// time; missingSubjects lists those whose namespace does not exist.
	subjectsChecked bool
	missingSubjects []string
	// quotaHard and quotaUsed are the tenant's quota summed over its ready
	// namespaces (nil without a quota).
	quotaHard, quotaUsed corev1.ResourceList
	// tenantQuota says quota.tenant was planned; quotaPending lists the
	// namespaces whose quota is not counted yet, quotaOver says usage is
	// over the tenant's limit (tenant_quota.go).
	tenantQuota  bool
	quotaPending []string
	quotaOver    string
	// quotaFrozen says why no quota goes up: a namespace of the tenant is
	// being deleted (tenant_quota.go).
	quotaFrozen string
	// undone lists, per namespace of the tenant, the NetworkPolicies that
	// admit ingress from outside the tenant while it is network-isolated.
	undone map[string][]string
	// pods is what was found of the pods and their Pod Security level
	// (podsecurity.go).
	pods podsObservation
	// held says, of each namespace whose write told, whether it is the
	// tenant's once the write is done (and so, for a granted request's,
	// marked for that request).
	held map[string]bool
	// unrecorded lists the namespaces labelled released by a Tenant of this
	// name, without its UID, that hold a quota labelled as the tenant's
	// (tenant_quota.go).
	unrecorded []string
	// copies are the states of spec.copies' items, told (copiesTold) once
	// every write of the round is done; copiesUndone, the items a write
	// could not make (copies.go).
	copies       []tenancyv1.TenantCopyStatus
	copiesTold   bool
	copiesUndone map[string]bool
}

// newObservation lists the tenant's namespaces, in order, not yet looked
// at; requestedBy names the request of each namespace granted to one.
func newObservation(names []string, requestedBy map[string]requestMark) *observation {
	o := &observation{namespaces: make([]tenancyv1.TenantNamespaceStatus, 0, len(names)), held: map[string]bool{}}
	for _, n := range names {
		o.namespaces = append(o.namespaces, tenancyv1.TenantNamespaceStatus{Name: n, RequestedBy: requestedBy[n].key})
	}
	return o
}

func (o *observation) set(name string, state tenancyv1.NamespaceState, message string) {
	for i := range o.namespaces {
		if o.namespaces[i].Name == name {
			o.namespaces[i].State, o.namespaces[i].Message = state, message
			return
		}
	}
	o.namespaces = append(o.namespaces, tenancyv1.TenantNamespaceStatus{Name: name, State: state, Message: message})
}

// conflict marks a namespace as blocked by an object someone else holds;
// the first conflict found in a namespace is the one reported.
func (o *observation) conflict(name, message string) {
	for i := range o.namespaces {
		if o.namespaces[i].Name == name && o.namespaces[i].State != tenancyv1.NamespaceConflict {
			o.namespaces[i].State, o.namespaces[i].Message = tenancyv1.NamespaceConflict, message
		}
	}
}

// undoIsolation records the policies that undo a namespace's network
// isolation. The namespace is reported as a Conflict (unless another
// conflict was found there) when the status is computed.
func (o *observation) undoIsolation(namespace string, policies []string) {
	if o.undone == nil {
		o.undone = map[string][]string{}
	}
	o.undone[namespace] = policies
}

// record adds what one write found: a namespace's state, the first
// conflict in a namespace (or among the cluster-wide objects), the objects
// the API server refused, and the usage of a quota of the tenant (hard,
// the spec's limits).
func (o *observation) record(f found, hard corev1.ResourceList) {
	if f.state != "" {
		o.set(f.namespace, f.state, f.message)
	}
	if f.held != holdUntold {
		o.held[f.namespace] = f.held == holdYes
	}
	if f.uid != "" {
		if o.uids == nil {
			o.uids = map[string]types.UID{}
		}
		o.uids[f.namespace] = f.uid
	}
	switch {
	case f.conflict == "":
	case f.namespace != "":
		o.conflict(f.namespace, f.conflict)
	case o.rbacConflict == "":
		o.rbacConflict = f.conflict
	}
	o.refused = append(o.refused, f.refused...)
	for _, k := range f.copiesUndone {
		if o.copiesUndone == nil {
			o.copiesUndone = map[string]bool{}
		}
		o.copiesUndone[k] = true
	}
	o.pods.record(f)
	if f.quota != nil {
		o.addQuota(hard, f.quota.Status.Used)
	}
}

// ready lists the namespaces found Ready, in spec order.
func (o *observation) ready() []string {
	var names []string
	for _, ns := range o.namespaces {
		if ns.State == tenancyv1.NamespaceReady {
			names = append(names, ns.Name)
		}
	}
	return names
}

// addQuota adds one namespace's quota to the tenant's sums: its limits, and
// its usage of each limited resource (nothing counted yet counts as zero, so
// the quota controller's first, all-zero count changes nothing).
func (o *observation) addQuota(hard, used corev1.ResourceList) {
	if o.quotaHard == nil {
		o.quotaHard, o.quotaUsed = corev1.ResourceList{}, corev1.ResourceList{}
	}
	for name, limit := range hard {
		h := o.quotaHard[name]
		h.Add(limit)
		o.quotaHard[name] = h
		u := o.quotaUsed[name]
		if q, ok := used[name]; ok {
			u.Add(q)
		}
		o.quotaUsed[name] = u
	}
}

// blocked reports whether a person must act (conflicts, protected names,
// refused guardrails, releases no one recorded).
func (o *observation) blocked() bool {
	for _, ns := range o.namespaces {
		if ns.State == tenancyv1.NamespaceConflict || ns.State == tenancyv1.NamespaceProtected {
			return true
		}
	}
	return o.rbacConflict != "" || len(o.refused) > 0 || len(o.undone) > 0 || len(o.unrecorded) > 0 || len(o.unavailableCopies()) > 0
}

// unavailableCopies are the messages of the copies whose source is missing
// or not granted.
func (o *observation) unavailableCopies() []string {
	var out []string
	for _, c := range o.copies {
		if c.State != tenancyv1.CopyReady {
			out = append(out, "copy "+string(c.Kind)+" "+c.Name+": "+c.Message)
		}
	}
	return out
}

// computeStatus derives the whole status from what was observed and how the
// reconcile ended (out: an error being retried, if any).
func computeStatus(t *tenancyv1.Tenant, obs *observation, out outcome.Outcome) tenancyv1.TenantStatus {
	st := *t.Status.DeepCopy()
	gen := t.Generation
	st.ObservedGeneration = gen
	st.LastHandledReconcileAt = operate.RequestedAt(t)
	operate.Resume(&st.Conditions)
	st.Namespaces = namespaceStates(t.Status.Namespaces, obs.namespaces)
	st.NamespaceNames = nil
	for _, ns := range st.Namespaces {
		st.NamespaceNames = append(st.NamespaceNames, ns.Name)
	}
	for i, ns := range st.Namespaces {
		if policies := obs.undone[ns.Name]; len(policies) > 0 && ns.State == tenancyv1.NamespaceReady {
			st.Namespaces[i].State, st.Namespaces[i].Message = tenancyv1.NamespaceConflict, isolationNamespaceMessage(policies)
		}
	}
	st.Quota = tenancyv1.TenantQuotaStatus{Hard: obs.quotaHard, Used: obs.quotaUsed}
	if obs.copiesTold {
		st.Copies = nil
		if len(obs.copies) > 0 {
			st.Copies = obs.copies
		}
	}
	switch {
	case obs.subjectsChecked && len(obs.missingSubjects) > 0:
		conditions.Set(&st.Conditions, gen, ConditionSubjectsFound, false, ReasonSubjectNamespaceMissing,
			"the namespace of "+strings.Join(obs.missingSubjects, ", ")+" does not exist: the binding grants nothing until it does, and then to whoever creates that ServiceAccount")
	case obs.subjectsChecked:
		conditions.Set(&st.Conditions, gen, ConditionSubjectsFound, true, ReasonSubjectsFound, "every ServiceAccount admin and viewer is in a namespace that exists")
	}
	setQuotaCondition(&st, t, obs)
	setPodSecurityCondition(&st, t, obs)
	// Not checked this time: either this very spec was checked before and
	// every namespace was found (that verdict stands), or the reconcile
	// stopped before the check, which the next one makes (the condition is
	// then absent, or older than the spec).
	conditions.Summarize(&st.Conditions, gen, summarize(t, obs, out))
	return st
}

// namespaceStates are the states of the namespaces as found. A namespace
// the reconcile did not get to (it stopped at an error first) keeps the
// state last reported, or is left out: state is a required field, and the
// API server refuses a status with a namespace without one, so the
// ReconcileError would never be written.
func namespaceStates(last, found []tenancyv1.TenantNamespaceStatus) []tenancyv1.TenantNamespaceStatus {
	out := make([]tenancyv1.TenantNamespaceStatus, 0, len(found))
	for _, ns := range found {
		if ns.State == "" {
			i := slices.IndexFunc(last, func(l tenancyv1.TenantNamespaceStatus) bool { return l.Name == ns.Name })
			if i < 0 {
				continue
			}
			ns = last[i]
		}
		out = append(out, ns)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// summarize says where the tenant stands: its network isolation undone by
// policies it holds, blocked by names or objects someone else holds or by a
// guardrail the API server refused, waiting for a namespace to finish
// terminating, or ready. An undone isolation is named first: it is the one
// problem that leaves the tenant open now; the others keep something out of
// it. A block found outweighs an error on Ready (retrying will not lift
// it), though the error is what the reconcile returns.
func summarize(t *tenancyv1.Tenant, obs *observation, out outcome.Outcome) conditions.Summary {
	reason, msgs := "", []string(nil)
	if len(obs.undone) > 0 {
		reason = ReasonIsolationUndone
		msgs = append(msgs, isolationMessage(obs.namespaces, obs.undone))
	}
	counted := 0
	for _, ns := range obs.namespaces {
		if ns.RequestedBy != "" && (ns.State == tenancyv1.NamespaceConflict || ns.State == tenancyv1.NamespaceProtected) {
			// A name a team asked for that someone else holds: the request
			// says so; the Tenant is not held back by it.
			continue
		}
		counted++
		switch ns.State {
		case tenancyv1.NamespaceConflict:
			if reason != ReasonIsolationUndone {
				reason = ReasonNamespaceConflict
			}
			msgs = append(msgs, ns.Message)
		case tenancyv1.NamespaceProtected:
			if reason == "" {
				reason = ReasonProtectedNamespace
			}
			msgs = append(msgs, fmt.Sprintf("namespace %s %s", ns.Name, ns.Message))
		}
	}
	if obs.rbacConflict != "" {
		if reason == "" {
			reason = ReasonRBACConflict
		}
		msgs = append(msgs, obs.rbacConflict)
	}
	if len(obs.refused) > 0 {
		if reason == "" {
			reason = ReasonGuardrailRefused
		}
		msgs = append(msgs, obs.refused...)
	}
	if unavailable := obs.unavailableCopies(); len(unavailable) > 0 {
		if reason == "" {
			reason = ReasonCopySourceUnavailable
		}
		msgs = append(msgs, unavailable...)
	}
	if len(obs.unrecorded) > 0 {
		if reason == "" {
			reason = ReasonReleaseUnrecorded
		}
		msgs = append(msgs, unrecordedMessage(t, obs.unrecorded))
	}
	ready := 0
	for _, ns := range obs.namespaces {
		if ns.State == tenancyv1.NamespaceReady && len(obs.undone[ns.Name]) == 0 {
			ready++
		}
	}
	if reason != "" {
		return conditions.Summary{Progress: conditions.Blocked, Reason: reason,
			Message: fmt.Sprintf("%d of %d namespaces ready: %s", ready, counted, strings.Join(msgs, "; "))}
	}
	if s, says := out.Summary(); says {
		return s
	}
	switch {
	case len(obs.quotaPending) > 0:
		return quotaPendingSummary(obs.quotaPending)
	case ready < counted:
		return conditions.Summary{Progress: conditions.Working, Reason: ReasonTerminating,
			Message: fmt.Sprintf("%d of %d namespaces ready; waiting for a namespace being deleted", ready, counted)}
	}
	return conditions.Summary{Progress: conditions.Done, Reason: conditions.ReasonReady,
		Message: fmt.Sprintf("%d namespaces ready, administered by %s", ready, describeAdmins(t))}
}

// unrecordedMessage tells a cluster admin what Trellis cannot tell: which
// Tenant, if any, released these namespaces.
func unrecordedMessage(t *tenancyv1.Tenant, namespaces []string) string {
	which := "namespace " + namespaces[0] + " is"
	if len(namespaces) > 1 {
		which = "namespaces " + strings.Join(namespaces, ", ") + " are"
	}
	return fmt.Sprintf("%s labelled %s=%s without %s: Trellis cannot tell whether this Tenant released it (a name is not a Tenant), "+
		"so the quota there labelled as this tenant's does not count against quota.tenant; a cluster admin who knows this Tenant released it "+
		"records that (kubectl annotate namespace <namespace> %s=%s), or hands it over (%s=%s), or removes the label",
		which, ReleasedFromLabel, t.Name, ReleasedFromUIDAnnotation, ReleasedFromUIDAnnotation, t.UID, HandOverAnnotation, t.Name)
}

// describeAdmins names the first admin and counts the others.
func describeAdmins(t *tenancyv1.Tenant) string {
	all := adminSubjects(t)
	if len(all) == 0 {
		return "nobody"
	}
	first := all[0].Kind + " " + all[0].Name
	if all[0].Namespace != "" {
		first = all[0].Kind + " " + all[0].Namespace + "/" + all[0].Name
	}
	if len(all) == 1 {
		return first
	}
	return fmt.Sprintf("%s and %d more", first, len(all)-1)
}
