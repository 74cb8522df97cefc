// Self-service: which NamespaceRequests a Tenant grants. Pure: it decides
// from what the reconcile read (the requests in the tenant's namespaces,
// the last status, the other Tenants' prefixes) and reads nothing itself.

package tenancy

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
)

// Reasons a NamespaceRequest is refused (its Stalled condition), or made.
const (
	ReasonRequestGranted      = "Ready"
	ReasonRequestCreating     = "Creating"
	ReasonSelfServiceDisabled = "SelfServiceDisabled"
	ReasonInvalidName         = "InvalidName"
	ReasonNameNotAllowed      = "NameNotAllowed"
	ReasonNameTaken           = "NameTaken"
	ReasonLimitReached        = "LimitReached"
	ReasonNotInTenant         = "NotInTenant"
)

// verdict is what a Tenant decided about one request.
type verdict struct {
	// namespace is the full name asked for.
	namespace string
	// granted: the namespace is the Tenant's; else reason and message say
	// why not.
	granted         bool
	reason, message string
}

// requestKey names a request as the Tenant's status does: <namespace>/<name>.
func requestKey(r *tenancyv1.NamespaceRequest) string { return r.Namespace + "/" + r.Name }

// requestMark is the request a namespace was made for, as its marks name it
// (RequestedByAnnotation, RequestedByUIDAnnotation); the zero value for a
// namespace made for none.
type requestMark struct {
	key string
	uid types.UID
}

func markOf(r *tenancyv1.NamespaceRequest) requestMark {
	return requestMark{key: requestKey(r), uid: r.UID}
}

// madeFor reports whether the namespace so marked was made for r: its name,
// and its UID where the mark records one (a namespace made before Trellis
// recorded UIDs is the request's of that name).
func (m requestMark) madeFor(r *tenancyv1.NamespaceRequest) bool {
	return m.key == requestKey(r) && (m.uid == "" || m.uid == r.UID)
}

// selection is the outcome of selectRequests.
type selection struct {
	// namespaces are the granted namespaces, in the order granted.
	namespaces []string
	// requestedBy maps each granted namespace to its request.
	requestedBy map[string]requestMark
	// verdicts has one entry per request looked at.
	verdicts map[types.NamespacedName]verdict
}

// neighbours is what the other Tenants reserve: the namespaces of their
// specs, and their prefixes, each by the Tenant's name.
type neighbours struct {
	namespaces map[string]string
	prefixes   map[string]string
}

// selectRequests decides which requests t grants. reqs are the requests in
// namespaces t holds (and nowhere else); held are the namespaces t holds
// (marked with its UID), each with the request it was made for, if any (its
// marks); others is what the other Tenants reserve. The rules, in order:
//   - a request granted before keeps its namespace, whatever selfService
//     now says: lowering maxNamespaces or narrowing namePattern refuses new
//     requests and takes nothing away. Granted before: the namespace it asks
//     for is held and was made for it, or, while it is not held, the
//     request's own status records it or the Tenant's last status names the
//     request (a status not yet written, or lost to a race, takes nothing
//     away). A namespace held for another reason (the spec's, one the spec
//     just dropped, or one made for another request, or for a request of
//     the same name that was deleted) is no request's: a request gets only
//     a namespace Trellis made for it;
//   - without selfService, every new request is refused;
//   - the name must make a namespace name Trellis may give a tenant
//     (protection), match namePattern, and, for a new request, be neither a
//     namespace of another Tenant's spec nor inside another Tenant's longer
//     prefix (a Tenant made later with such a name or prefix cannot take a
//     namespace already granted: it is marked);
//   - a namespace of the spec, or one an earlier request asked for, is
//     taken; so is, for a new request, one the Tenant already holds;
//   - past maxNamespaces, requests wait, the oldest served first.
//
// A namespace that exists and is not the Tenant's is found by the write of
// the namespace itself (claim), and refuses its request there.
func selectRequests(t *tenancyv1.Tenant, reqs []*tenancyv1.NamespaceRequest, held map[string]requestMark, others neighbours, protection Protection) selection {
	prefix := ptr.Deref(t.Spec.NamespacePrefix, "")
	taken := map[string]string{}
	for _, n := range namespaceNames(t) {
		taken[n] = "it is a namespace of the Tenant's spec"
	}
	named := map[string]string{} // request key -> namespace the last status granted it
	for _, ns := range t.Status.Namespaces {
		if ns.RequestedBy != "" {
			named[ns.RequestedBy] = ns.Name
		}
	}
	before := map[*tenancyv1.NamespaceRequest]bool{}
	for _, r := range reqs {
		name := prefix + r.Name
		mark, isHeld := held[name]
		switch {
		case taken[name] != "":
		case isHeld:
			before[r] = mark.madeFor(r)
		default:
			before[r] = named[requestKey(r)] == name || r.Status.GrantedNamespace == name
		}
	}
	ordered := slices.Clone(reqs)
	slices.SortFunc(ordered, func(a, b *tenancyv1.NamespaceRequest) int {
		aBefore, bBefore := before[a], before[b]
		switch {
		case aBefore != bBefore && aBefore:
			return -1
		case aBefore != bBefore:
			return 1
		}
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time),
			cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})

	var pattern *regexp.Regexp
	var patternErr error
	if ss := t.Spec.SelfService; ss.NamePattern != "" {
		pattern, patternErr = regexp.Compile("^(?:" + ss.NamePattern + ")$")
	}
	out := selection{requestedBy: map[string]requestMark{}, verdicts: map[types.NamespacedName]verdict{}}
	for _, r := range ordered {
		name := prefix + r.Name
		v := verdict{namespace: name}
		grantedBefore := before[r]
		refuse := func(reason, format string, args ...any) {
			v.reason, v.message = reason, fmt.Sprintf(format, args...)
		}
		switch {
		case !grantedBefore && t.Spec.SelfService.MaxNamespaces == 0: // unset: the schema's minimum is 1
			refuse(ReasonSelfServiceDisabled, "Tenant %s does not let its admins add namespaces (spec.selfService is unset)", t.Name)
		case protection.Protected(name) != "":
			refuse(ReasonInvalidName, "namespace %s may not be a tenant's: %s", name, protection.Protected(name))
		case !grantedBefore && patternErr != nil:
			refuse(ReasonNameNotAllowed, "Tenant %s's selfService.namePattern is not a valid regular expression: %v", t.Name, patternErr)
		case !grantedBefore && pattern != nil && !pattern.MatchString(r.Name):
			refuse(ReasonNameNotAllowed, "%q does not match Tenant %s's selfService.namePattern %q", r.Name, t.Name, t.Spec.SelfService.NamePattern)
		case taken[name] != "":
			refuse(ReasonNameTaken, "namespace %s cannot be granted: %s", name, taken[name])
		case !grantedBefore && isHeld(held, name):
			refuse(ReasonNameTaken, "namespace %s already exists and is Tenant %s's, but was not made for this request: a request gets only a namespace Trellis makes for it", name, t.Name)
		case !grantedBefore && others.namespaces[name] != "":
			refuse(ReasonNameTaken, "namespace %s is a namespace of Tenant %s's spec", name, others.namespaces[name])
		case !grantedBefore && insideOther(name, prefix, others.prefixes) != "":
			refuse(ReasonNameTaken, "namespace %s is inside Tenant %s's prefix", name, insideOther(name, prefix, others.prefixes))
		case !grantedBefore && len(out.namespaces) >= int(t.Spec.SelfService.MaxNamespaces):
			refuse(ReasonLimitReached, "Tenant %s holds %d requested namespaces, its selfService.maxNamespaces; delete a request to make room",
				t.Name, len(out.namespaces))
		default:
			v.granted = true
			taken[name] = "it was asked for by NamespaceRequest " + requestKey(r)
			out.namespaces = append(out.namespaces, name)
			out.requestedBy[name] = markOf(r)
		}
		out.verdicts[types.NamespacedName{Namespace: r.Namespace, Name: r.Name}] = v
	}
	return out
}

// isHeld reports whether the Tenant holds the namespace.
func isHeld(held map[string]requestMark, name string) bool {
	_, ok := held[name]
	return ok
}

// insideOther names the other Tenant whose prefix, longer than this
// Tenant's, name starts with (the longest, if several): a team may not take
// names another team's Tenant is named by.
func insideOther(name, prefix string, others map[string]string) string {
	best := ""
	for p := range others {
		if len(p) > len(prefix) && strings.HasPrefix(name, p) && len(p) > len(best) {
			best = p
		}
	}
	return others[best]
}

// waitingNamespaces are the namespaces t keeps although the request they
// were made for is gone, each with the requests in it that hold namespaces
// ("<namespace>/<name> (<granted namespace>)"): a namespace is given up only
// after every namespace granted from inside it (HNC's rule). Deleting a
// request that holds N is for N's admins (the namespace-requests policy);
// were N given up while requests in it hold namespaces, the namespace
// controller would delete those requests as it empties N, giving their
// namespaces up at the word of someone who was never their admin. Not kept:
// a namespace whose request went with its own namespace, which left the
// Tenant (dropped from the spec, the Tenant's own acts, or deleted by a
// cluster admin), so the platform's acts still give up the whole chain.
// reqs, held and sel are selectRequests' arguments and result.
func waitingNamespaces(t *tenancyv1.Tenant, reqs []*tenancyv1.NamespaceRequest, held map[string]requestMark, sel selection) map[string][]string {
	kept := map[string]bool{}
	for _, n := range namespaceNames(t) {
		kept[n] = true
	}
	for _, n := range sel.namespaces {
		kept[n] = true
	}
	out := map[string][]string{}
	for ns, mark := range held {
		if mark.key == "" || kept[ns] || slices.ContainsFunc(reqs, mark.madeFor) {
			continue
		}
		if home, _, _ := strings.Cut(mark.key, "/"); !isHeld(held, home) {
			continue
		}
		var holding []string
		for _, r := range reqs {
			if v := sel.verdicts[types.NamespacedName{Namespace: r.Namespace, Name: r.Name}]; r.Namespace == ns && v.granted {
				holding = append(holding, requestKey(r)+" ("+v.namespace+")")
			}
		}
		if len(holding) > 0 {
			slices.Sort(holding)
			out[ns] = holding
		}
	}
	return out
}

// waitingMessage says why a namespace whose request is gone is kept.
func waitingMessage(request string, holding []string) string {
	const most = 3 // the message must fit the status field (1024 characters)
	list := strings.Join(holding[:min(len(holding), most)], ", ")
	if len(holding) > most {
		list += fmt.Sprintf(" and %d more", len(holding)-most)
	}
	return fmt.Sprintf("NamespaceRequest %s is gone, but requests in this namespace hold namespaces: %s; "+
		"it is given up as the namespaceDeletionPolicy says once they are deleted (by admins of those namespaces)", request, list)
}
