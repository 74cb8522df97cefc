// The last step of a Tenant's reconcile: do its ServiceAccount subjects'
// namespaces exist?

package tenancy

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/children"
)

// checkSubjects looks for the namespaces of ServiceAccount admins and
// viewers outside the tenant's own namespaces. Only for a spec not checked
// yet, or while one was missing: an unchanged Tenant costs no read.
func (r *Reconciler) checkSubjects(ctx context.Context, s *scope) error {
	t := s.t
	if c := conditions.Get(t.Status.Conditions, ConditionSubjectsFound); c != nil &&
		c.Status == metav1.ConditionTrue && c.ObservedGeneration == t.Generation {
		return nil
	}
	own := s.names
	seen := map[string]bool{}
	var missing []string
	for _, sub := range append(admins(t), t.Spec.Viewers...) {
		if sub.Kind != rbacv1.ServiceAccountKind || slices.Contains(own, sub.Namespace) {
			continue
		}
		id := "ServiceAccount " + sub.Namespace + "/" + sub.Name
		if seen[id] {
			continue
		}
		seen[id] = true
		exists, err := children.Lookup(ctx, r.children, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sub.Namespace}})
		if err != nil {
			return err
		}
		if !exists {
			missing = append(missing, id)
		}
	}
	s.obs.subjectsChecked, s.obs.missingSubjects = true, missing
	return nil
}
