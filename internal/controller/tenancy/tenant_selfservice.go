// Self-service, the reconcile's side: before the first step, the requests in
// the tenant's namespaces are read and decided (selfservice.go), and the
// namespaces granted join those of the spec for every step after; after the
// Tenant's status, each request's status says what became of it.

package tenancy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/outcome"
)

// requestTenantIndex finds the requests whose status names a Tenant: those
// it must tell when their namespace has left it.
const requestTenantIndex = "status.tenant"

// readRequests decides the tenant's requests and widens the scope's
// namespaces with those granted, and with those kept although their request
// is gone (waitingNamespaces). It reads the cache: the requests in each
// namespace the Tenant holds, the requests that last named it, and the
// other Tenants' specs; and, live, a namespace that a request last naming
// the Tenant is in, when the cache does not show the Tenant holding it.
func (r *Reconciler) readRequests(ctx context.Context, s *scope) error {
	t := s.t
	owned, err := r.ownedNamespaces(ctx, t)
	if err != nil {
		return err
	}
	held := map[string]requestMark{} // namespace -> the request it was made for
	made := map[string]metav1.Time{} // namespace -> when it was made
	var reqs []*tenancyv1.NamespaceRequest
	hold := func(ns *corev1.Namespace) error {
		held[ns.Name] = requestMark{key: ns.Annotations[RequestedByAnnotation], uid: types.UID(ns.Annotations[RequestedByUIDAnnotation])}
		made[ns.Name] = ns.CreationTimestamp
		list := &tenancyv1.NamespaceRequestList{}
		if err := r.client.List(ctx, list, client.InNamespace(ns.Name)); err != nil {
			return fmt.Errorf("listing the NamespaceRequests in %s: %w", ns.Name, err)
		}
		for i := range list.Items {
			reqs = append(reqs, &list.Items[i])
		}
		return nil
	}
	for i := range owned {
		if owned[i].DeletionTimestamp.IsZero() { // else its requests are going with it
			if err := hold(&owned[i]); err != nil {
				return err
			}
		}
	}
	named := &tenancyv1.NamespaceRequestList{}
	if err := r.client.List(ctx, named, client.MatchingFields{requestTenantIndex: t.Name}); err != nil {
		return fmt.Errorf("listing the NamespaceRequests of Tenant %s: %w", t.Name, err)
	}
	left := map[string]bool{} // namespaces read live and found not the Tenant's
	for i := range named.Items {
		req := &named.Items[i]
		if _, in := held[req.Namespace]; in {
			continue
		}
		if left[req.Namespace] {
			s.strays = append(s.strays, req)
			continue
		}
		// The cache holds only namespaces labelled as Trellis', and finds a
		// Tenant's by its label: anyone who may patch a namespace can take
		// those off. Only the namespace itself, read live, says whether the
		// request's namespace left the Tenant.
		ns, err := r.heldLive(ctx, t, req.Namespace)
		switch {
		case err != nil:
			return err
		case ns == nil:
			left[req.Namespace] = true
			s.strays = append(s.strays, req)
		default:
			if err := hold(ns); err != nil {
				return err
			}
		}
	}
	others := neighbours{namespaces: map[string]string{}, prefixes: map[string]string{}}
	if len(reqs) > 0 {
		// Read-only, and every Tenant: no copies.
		tenants := &tenancyv1.TenantList{}
		if err := r.client.List(ctx, tenants, client.UnsafeDisableDeepCopy); err != nil {
			return fmt.Errorf("listing Tenants: %w", err)
		}
		for i := range tenants.Items {
			o := &tenants.Items[i]
			if o.Name == t.Name {
				continue
			}
			if p := ptr.Deref(o.Spec.NamespacePrefix, ""); p != "" {
				others.prefixes[p] = o.Name
			}
			for _, n := range namespaceNames(o) {
				others.namespaces[n] = o.Name
			}
		}
	}
	s.requests = reqs
	if err := r.restoredRequests(ctx, t, reqs, held, made); err != nil {
		return err
	}
	sel := selectRequests(t, reqs, held, others, r.protection)
	if vanished := vanishedGrants(t, sel, s.strays); len(vanished) > 0 {
		// Requests granted before are gone, and not because their namespace
		// left the tenant. If their CRD is being deleted (an uninstall), no
		// one asked for the namespaces to go: they stay.
		going, err := r.crdGoing(ctx, requestCRDName)
		if err != nil {
			return err
		}
		if going {
			log.FromContext(ctx).Info("the NamespaceRequest CRD is being deleted: keeping the namespaces granted to requests", "namespaces", vanished)
			for ns, key := range vanished {
				sel.namespaces = append(sel.namespaces, ns)
				mark := held[ns]
				if mark.key != key {
					mark = requestMark{key: key}
				}
				sel.requestedBy[ns] = mark
			}
			slices.Sort(sel.namespaces[len(sel.namespaces)-len(vanished):])
		}
	}
	s.waiting = waitingNamespaces(t, reqs, held, sel)
	if len(s.waiting) > 0 {
		kept := slices.Sorted(maps.Keys(s.waiting))
		log.FromContext(ctx).Info("keeping namespaces whose request is gone while requests in them hold namespaces", "namespaces", kept)
		for _, ns := range kept {
			sel.namespaces = append(sel.namespaces, ns)
			sel.requestedBy[ns] = held[ns]
		}
	}
	s.grant(sel)
	return nil
}

// restoredRequests forgets the request UID in the marks of the namespaces
// made before the NamespaceRequest CRD was last installed, where a request
// of the same name but another UID is in the tenant. Every request of that
// time went with the CRD; the one there now was made again from the team's
// record (a backup, Git), as docs/tenant.md asks before installing the CRD
// again, and holds the namespace its name was given. Otherwise a request
// made again under the same name is a new request: the namespace was made
// for the one that was deleted. The CRD is read only then.
func (r *Reconciler) restoredRequests(ctx context.Context, t *tenancyv1.Tenant, reqs []*tenancyv1.NamespaceRequest,
	held map[string]requestMark, made map[string]metav1.Time) error {
	prefix := ptr.Deref(t.Spec.NamespacePrefix, "")
	var installed *metav1.Time
	for _, req := range reqs {
		name := prefix + req.Name
		mark, ok := held[name]
		if !ok || mark.uid == "" || mark.key != requestKey(req) || mark.uid == req.UID {
			continue
		}
		if installed == nil {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := r.apiReader.Get(ctx, client.ObjectKey{Name: requestCRDName}, crd); err != nil {
				return fmt.Errorf("reading the CRD %s: %w", requestCRDName, err)
			}
			installed = &crd.CreationTimestamp
		}
		if at := made[name]; at.Before(installed) {
			held[name] = requestMark{key: mark.key}
		}
	}
	return nil
}

// heldLive reads namespace from the API server and returns it if t holds
// it: it exists, is not being deleted, and is marked with t's UID; else nil.
func (r *Reconciler) heldLive(ctx context.Context, t *tenancyv1.Tenant, namespace string) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	err := r.apiReader.Get(ctx, client.ObjectKey{Name: namespace}, ns)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading namespace %s: %w", namespace, err)
	case !ns.DeletionTimestamp.IsZero() || !isMarkedBy(ns.Annotations, t):
		return nil, nil
	}
	return ns, nil
}

// vanishedGrants are the namespaces the last status granted to requests
// that are gone (neither decided now nor strays), by namespace.
func vanishedGrants(t *tenancyv1.Tenant, sel selection, strays []*tenancyv1.NamespaceRequest) map[string]string {
	out := map[string]string{}
	for _, ns := range t.Status.Namespaces {
		if ns.RequestedBy == "" || sel.requestedBy[ns.Name].key != "" {
			continue
		}
		namespace, name, _ := strings.Cut(ns.RequestedBy, "/")
		if _, decided := sel.verdicts[types.NamespacedName{Namespace: namespace, Name: name}]; decided {
			continue
		}
		if slices.ContainsFunc(strays, func(r *tenancyv1.NamespaceRequest) bool { return requestKey(r) == ns.RequestedBy }) {
			continue
		}
		out[ns.Name] = ns.RequestedBy
	}
	return out
}

// reportRequests writes each request's status from the decision and from
// what became of its namespace (the Tenant's status, next, and how the
// reconcile ended, out); a request whose namespace left the Tenant is told
// so. Only what changed is written.
func (r *Reconciler) reportRequests(ctx context.Context, s *scope, next tenancyv1.TenantStatus, out outcome.Outcome) error {
	states := map[string]tenancyv1.TenantNamespaceStatus{}
	for _, ns := range next.Namespaces {
		states[ns.Name] = ns
	}
	errs := make([]error, 0, len(s.requests)+len(s.strays))
	for _, req := range s.requests {
		v := s.sel.verdicts[types.NamespacedName{Namespace: req.Namespace, Name: req.Name}]
		grant := requestGrant{told: true} // refused: it holds none
		if v.granted {
			held, told := s.obs.held[v.namespace]
			grant = requestGrant{told: told}
			if held {
				grant.namespace = v.namespace
			}
		}
		errs = append(errs, r.reportRequest(ctx, s.t, req, v.namespace, grant, requestSummary(s, out, v, states[v.namespace])))
	}
	for _, req := range s.strays {
		errs = append(errs, r.reportRequest(ctx, s.t, req, req.Status.Namespace, requestGrant{told: true}, conditions.Summary{
			Progress: conditions.Blocked, Reason: ReasonNotInTenant,
			Message: fmt.Sprintf("namespace %s, where this request is, no longer belongs to Tenant %s: it grants nothing "+
				"(a namespace it was granted was given up as the Tenant's namespaceDeletionPolicy says)", req.Namespace, s.t.Name),
		}))
	}
	return errors.Join(errs...)
}

// requestGrant is what a request holds once the reconcile is done: the
// namespace the Tenant holds for it, or none. A granted request whose
// namespace's write did not tell (it failed) keeps what its status says.
type requestGrant struct {
	namespace string
	told      bool
}

// requestSummary says where one request stands.
func requestSummary(s *scope, out outcome.Outcome, v verdict, ns tenancyv1.TenantNamespaceStatus) conditions.Summary {
	switch {
	case !v.granted:
		// Refused until a person acts: even a request past the count waits
		// for someone to delete another.
		return conditions.Summary{Progress: conditions.Blocked, Reason: v.reason, Message: v.message}
	case ns.State == tenancyv1.NamespaceConflict:
		return conditions.Summary{Progress: conditions.Blocked, Reason: ReasonNameTaken, Message: ns.Message}
	case ns.State == tenancyv1.NamespaceReady && slices.Contains(s.obs.quotaPending, v.namespace):
		return conditions.Summary{Progress: conditions.Working, Reason: ReasonRequestCreating,
			Message: fmt.Sprintf("namespace %s is made; its admins are bound once its quota is counted", v.namespace)}
	case ns.State == tenancyv1.NamespaceReady && out.Err() == nil:
		return conditions.Summary{Progress: conditions.Done, Reason: ReasonRequestGranted,
			Message: fmt.Sprintf("namespace %s is Tenant %s's, with every guardrail of the Tenant", v.namespace, s.t.Name)}
	case ns.Message != "":
		return conditions.Summary{Progress: conditions.Working, Reason: ReasonRequestCreating, Message: ns.Message}
	}
	return conditions.Summary{Progress: conditions.Working, Reason: ReasonRequestCreating,
		Message: fmt.Sprintf("namespace %s is granted and being made", v.namespace)}
}

func (r *Reconciler) reportRequest(ctx context.Context, t *tenancyv1.Tenant, req *tenancyv1.NamespaceRequest, namespace string,
	grant requestGrant, sum conditions.Summary) error {
	uid := req.UID
	if found, err := r.requests.Get(ctx, client.ObjectKeyFromObject(req), req); err != nil || !found || req.UID != uid {
		// Gone, or made again since it was decided: the next reconcile
		// decides the new one.
		return err
	}
	st := *req.Status.DeepCopy()
	st.Tenant, st.Namespace, st.ObservedGeneration = t.Name, namespace, req.Generation
	if grant.told {
		st.GrantedNamespace = grant.namespace
	}
	conditions.Summarize(&st.Conditions, req.Generation, sum)
	_, err := r.requests.Patch(ctx, req, st)
	return err
}

// errRequestGone: the request a namespace is to be made for is gone, or is
// another object of that name now; nothing is made for it.
var errRequestGone = errors.New("the NamespaceRequest is gone, or made again since it was decided")

// recordGrant records on the request that namespace is granted to it, before
// the namespace is made. From then on, deleting the request gives the
// namespace up only at the word of someone who may give it up (the
// namespace-requests policy reads the record): no namespace exists for a
// request whose deletion that policy did not judge against it.
func (r *Reconciler) recordGrant(ctx context.Context, s *scope, namespace string, mark requestMark) error {
	decided := s.request(mark)
	if decided == nil {
		return errRequestGone
	}
	req := &tenancyv1.NamespaceRequest{}
	found, err := r.requests.Get(ctx, client.ObjectKeyFromObject(decided), req)
	switch {
	case err != nil:
		return err
	case !found || req.UID != mark.uid:
		return errRequestGone
	case req.Status.GrantedNamespace == namespace:
		return nil
	}
	st := *req.Status.DeepCopy()
	st.GrantedNamespace = namespace
	if _, err := r.requests.Patch(ctx, req, st); apierrors.IsNotFound(err) {
		return errRequestGone
	} else if err != nil {
		return fmt.Errorf("recording the grant of namespace %s on NamespaceRequest %s: %w", namespace, mark.key, err)
	}
	return nil
}

// request is the request decided in this reconcile that mark names, or nil.
func (s *scope) request(mark requestMark) *tenancyv1.NamespaceRequest {
	for _, req := range s.requests {
		if markOf(req) == mark {
			return req
		}
	}
	return nil
}

// requestToTenant maps a request to the Tenant of its namespace (by the
// namespace's tenant label, read from the cache), and to the Tenant its
// status names, which must tell it when it has left.
func requestToTenant(c client.Reader) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var reqs []reconcile.Request
		if req, ok := o.(*tenancyv1.NamespaceRequest); ok && req.Status.Tenant != "" {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: req.Status.Tenant}})
		}
		ns := &corev1.Namespace{}
		if err := c.Get(ctx, client.ObjectKey{Name: o.GetNamespace()}, ns); err == nil {
			if t := ns.Labels[TenantLabel]; t != "" {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: t}})
			}
		}
		return reqs
	}
}

// trimRequest drops a cached NamespaceRequest's labels, annotations,
// finalizers and owner references: the controller reads none of them (its
// status writes are merge patches of the status alone), and a team could
// otherwise grow the manager's memory by what it writes there, up to the
// API server's object size per request.
func trimRequest(in any) (any, error) {
	if r, ok := in.(*tenancyv1.NamespaceRequest); ok {
		r.Labels, r.Annotations = nil, nil
		r.Finalizers, r.OwnerReferences = nil, nil
	}
	return in, nil
}
