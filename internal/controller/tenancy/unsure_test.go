package tenancy

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/controller/children"
)

// errCacheDown is a cache read of Tenants that fails.
var errCacheDown = errors.New("cache: timed out waiting for the Tenant informer")

// TestAnUnsureCacheIsAnErrorNotAConflict: whether an object someone else
// may hold is the tenant's can need a read of Tenants (which Tenant holds a
// UID; does the Tenant a ClusterRole names still exist). When that read
// fails, the reconcile returns the error, to be retried: nothing is taken,
// and nobody is told the name belongs to someone else.
func TestAnUnsureCacheIsAnErrorNotAConflict(t *testing.T) {
	tenant := unitTenant("acme", "uid-acme", "acme-", "a")
	marked := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme-a",
		Labels:      map[string]string{TenantLabel: "acme"},
		Annotations: map[string]string{TenantUIDAnnotation: "uid-of-another-tenant"}}}
	role := desiredTenantRole(tenant, nil, nil)
	role.Labels[TenantLabel] = "gone-or-not"
	failTenantReads := interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*tenancyv1.Tenant); ok {
				return errCacheDown
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*tenancyv1.TenantList); ok {
				return errCacheDown
			}
			return c.List(ctx, list, opts...)
		},
	}
	cases := map[string]struct {
		existing client.Object
		run      func(context.Context, *Reconciler, *scope) (found, error)
	}{
		"a namespace marked with another Tenant's UID": {
			existing: marked,
			run: func(ctx context.Context, r *Reconciler, s *scope) (found, error) {
				return r.reconcileNamespace(ctx, s, "acme-a")
			},
		},
		"a ClusterRole labelled for another Tenant": {
			existing: role,
			run: func(ctx context.Context, r *Reconciler, s *scope) (found, error) {
				return ensureChild(ctx, r, s, "ClusterRole", &rbacv1.ClusterRole{}, desiredTenantRole(tenant, nil, nil), syncClusterRole, true)
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			c := fake.NewClientBuilder().WithScheme(k8s.Scheme()).WithObjects(tenant, tc.existing).
				WithInterceptorFuncs(failTenantReads).Build()
			r := &Reconciler{client: c, children: children.Clients{Cached: c, Uncached: c}}
			s := r.newScope(tenant)

			f, err := tc.run(context.Background(), r, s)

			g.Expect(err).To(MatchError(errCacheDown), "returned, to be retried")
			g.Expect(children.IsNotOwned(err)).To(BeFalse())
			g.Expect(f.state).NotTo(Equal(tenancyv1.NamespaceConflict), "nothing a person is asked to fix")
			g.Expect(f.conflict).To(BeEmpty())
			g.Expect(f.refused).To(BeEmpty())
			live := tc.existing.DeepCopyObject().(client.Object)
			g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(tc.existing), live)).To(Succeed())
			g.Expect(live.GetLabels()).To(Equal(tc.existing.GetLabels()), "not taken, left as it was")
			g.Expect(live.GetAnnotations()).To(Equal(tc.existing.GetAnnotations()))
		})
	}
}
