package tenantquota

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Namespace is one namespace's ResourceQuota as read; Exists false for a
// namespace that has none yet.
type Namespace struct {
	Name   string
	Exists bool
	Spec   corev1.ResourceList // spec.hard
	Status corev1.ResourceList // status.hard
	Used   corev1.ResourceList // status.used
}

// Counted says the quota controller has counted the quota for every
// resource of limit: admission enforces it. Until then a quota enforces
// nothing, so nobody may be let into the namespace.
func (n Namespace) Counted(limit corev1.ResourceList) bool {
	if !n.Exists {
		return false
	}
	for r := range limit {
		_, hard := n.Status[r]
		_, used := n.Used[r]
		if !hard || !used {
			return false
		}
	}
	return true
}

// Outcome is the plan for the tenant's namespaces.
type Outcome struct {
	// Hard is the spec.hard each namespace's quota should have, by name:
	// the per-namespace limits with the tenant's resources allocated.
	Hard map[string]corev1.ResourceList
	// Raises says some quota goes up (or is created): the caller must plan
	// again from a live read before writing.
	Raises bool
	// Over lists the resources the namespaces together use more of than
	// the limit, in name order.
	Over []corev1.ResourceName
	// Held says budget is waiting for a lowered quota to be synced.
	Held bool
	// Used is the usage of each limited resource, summed.
	Used corev1.ResourceList
}

// Plan allocates every resource of limit (the tenant's quota.tenant.hard)
// over the namespaces, which must be in name order; perNamespace (quota.hard,
// may be empty) caps each namespace and names the other resources each
// quota keeps as they are.
func Plan(limit, perNamespace corev1.ResourceList, nss []Namespace) Outcome {
	out := Outcome{Hard: make(map[string]corev1.ResourceList, len(nss)), Used: corev1.ResourceList{}}
	for _, n := range nss {
		out.Hard[n.Name] = perNamespace.DeepCopy()
		if out.Hard[n.Name] == nil {
			out.Hard[n.Name] = corev1.ResourceList{}
		}
	}
	for _, r := range slices.Sorted(maps.Keys(limit)) {
		l := limit[r]
		qs := make([]Quota, len(nss))
		var used int64
		for i, n := range nss {
			qs[i] = Quota{Spec: Unknown, Status: Unknown, Used: Unknown, Cap: Unknown}
			if n.Exists {
				qs[i].Spec = ceil(r, n.Spec)
				qs[i].Status = ceil(r, n.Status)
				qs[i].Used = ceil(r, n.Used)
			}
			qs[i].Cap = ceil(r, perNamespace)
			used += max(qs[i].Used, 0)
		}
		res := Allocate(floor(r, l), qs)
		for i, n := range nss {
			out.Hard[n.Name][r] = quantity(r, res.Hard[i], l.Format)
			if res.Hard[i] > qs[i].Spec { // Unknown is below any
				out.Raises = true
			}
		}
		if res.Over {
			out.Over = append(out.Over, r)
		}
		out.Held = out.Held || res.Held
		out.Used[r] = quantity(r, used, l.Format)
	}
	return out
}

// Freeze keeps every quota of the plan from going up, for each resource of
// limit: a namespace gets at most its spec.hard, and a quota that does not
// exist yet, or does not name the resource, gets none of it. Lowerings stay.
// nss are the namespaces the plan was made for.
//
// It is the plan while the budget cannot be counted: while a namespace that
// was the tenant's is being deleted, the namespace controller deletes its
// quota in the same sweep as everything else, but what the quota admitted
// may stay (an object held by a finalizer) until the namespace is gone.
// Nothing new is admitted in a namespace being deleted, and no quota of the
// others goes up, so what the tenant may hold stays what it was when that
// quota was last counted, under the limit; nothing needs to be known of it.
func (o *Outcome) Freeze(limit corev1.ResourceList, nss []Namespace) {
	o.Raises = false
	for _, n := range nss {
		hard := o.Hard[n.Name]
		for r, l := range limit {
			current := Unknown
			if n.Exists {
				current = ceil(r, n.Spec)
			}
			if ceil(r, hard) > max(current, 0) {
				hard[r] = quantity(r, max(current, 0), l.Format)
			}
			if ceil(r, hard) > current { // a quota, or an entry, created at zero
				o.Raises = true
			}
		}
	}
}

// Remaining is what limit leaves for the tenant's namespaces once the
// quotas of namespaces that left the tenant are counted: a namespace
// released with its quota (Retain), or one being deleted, may still admit
// up to max(spec.hard, status.hard, used) of each resource, and Trellis
// never writes its quota again. A resource such a quota does not limit is
// not counted: that namespace was never held to the tenant's limit.
func Remaining(limit corev1.ResourceList, left []Namespace) corev1.ResourceList {
	out := make(corev1.ResourceList, len(limit))
	for r, l := range limit {
		v := floor(r, l)
		for _, n := range left {
			v -= max(ceil(r, n.Spec), ceil(r, n.Status), ceil(r, n.Used), 0)
		}
		out[r] = quantity(r, max(v, 0), l.Format)
	}
	return out
}

// Milli says a resource is counted in milli-units: CPU.
func Milli(r corev1.ResourceName) bool {
	return r == corev1.ResourceCPU || strings.HasSuffix(string(r), ".cpu")
}

// ceil is a resource's value in list in whole (or milli-) units, rounded
// up; Unknown when absent.
func ceil(r corev1.ResourceName, list corev1.ResourceList) int64 {
	q, ok := list[r]
	if !ok {
		return Unknown
	}
	if Milli(r) {
		return q.MilliValue()
	}
	return q.Value()
}

// floor is a limit in whole (or milli-) units, rounded down: a limit of
// 1.5 pods allows one.
func floor(r corev1.ResourceName, q resource.Quantity) int64 {
	v := ceil(r, corev1.ResourceList{r: q})
	if back := quantity(r, v, q.Format); back.Cmp(q) > 0 {
		v--
	}
	return max(v, 0)
}

func quantity(r corev1.ResourceName, v int64, format resource.Format) resource.Quantity {
	if Milli(r) {
		return *resource.NewMilliQuantity(v, resource.DecimalSI)
	}
	return *resource.NewQuantity(v, format)
}
