package manager

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/controller/children"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/controller/tenancy"
	"github.com/trellis-dev/trellis/internal/controller/view"
)

// bigEnv is what a namespace editor put into the Deployments of issue 21.
var bigEnv = strings.Repeat("x", 900_000)

func controllerRef(apiVersion, kind, name string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("uid-" + name),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

// siteRef is the controller reference of MarkdownView "site".
func siteRef() metav1.OwnerReference {
	return controllerRef(viewv1.GroupVersion.String(), "MarkdownView", "site")
}

// heavyDeployment has everything a user can put into a Deployment: a large
// spec and status, many labels and annotations, finalizers, several owner
// references.
func heavyDeployment(name string, refs ...metav1.OwnerReference) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "team", UID: "uid-d", ResourceVersion: "42", Generation: 3,
			CreationTimestamp: metav1.NewTime(time.Unix(1_700_000_000, 0)),
			Labels: map[string]string{
				setup.ManagedByLabel: setup.ManagedByValue, "app": "theirs", "app.kubernetes.io/instance": "site",
			},
			Annotations:     map[string]string{"notes": strings.Repeat("n", 200_000)},
			Finalizers:      []string{"example.com/keep"},
			OwnerReferences: refs,
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: setup.FieldManager}, {Manager: "kubectl"}},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "app", Image: "example.com/app", Env: []corev1.EnvVar{{Name: "BIG", Value: bigEnv}},
			}}}},
		},
		Status: appsv1.DeploymentStatus{Replicas: 0, ObservedGeneration: 3},
	}
}

func TestReduceKeepsBoundedMetadataOnly(t *testing.T) {
	g := NewWithT(t)
	deleting := metav1.NewTime(time.Unix(1_700_000_100, 0))
	in := heavyDeployment("viewer-site",
		metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: "uid-other"},
		siteRef(),
		metav1.OwnerReference{APIVersion: "v1", Kind: "Secret", Name: strings.Repeat("s", 10_000), UID: "uid-s"})
	in.DeletionTimestamp = &deleting
	in.Labels[tenancy.TenantLabel] = "acme"
	in.Annotations[tenancy.TenantUIDAnnotation] = "uid-acme"
	in.Annotations[tenancy.HandOverAnnotation] = strings.Repeat("h", maxKeptString+1) // too long to name a tenant
	keys := map[string]bool{setup.ManagedByLabel: true, tenancy.TenantLabel: true,
		tenancy.TenantUIDAnnotation: true, tenancy.HandOverAnnotation: true}

	out, err := reduce(in, keys)
	g.Expect(err).NotTo(HaveOccurred())
	want := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{
		Name: "viewer-site", Namespace: "team", UID: "uid-d", ResourceVersion: "42", Generation: 3,
		CreationTimestamp: in.CreationTimestamp, DeletionTimestamp: &deleting,
		Labels:          map[string]string{setup.ManagedByLabel: setup.ManagedByValue, tenancy.TenantLabel: "acme"},
		Annotations:     map[string]string{tenancy.TenantUIDAnnotation: "uid-acme"},
		OwnerReferences: []metav1.OwnerReference{siteRef()},
	}}
	g.Expect(out).To(Equal(want), "only the controller reference, and only the keys asked for, under the bound")

	again, err := reduce(out, keys)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(want), "reducing a reduced object changes nothing (a transform may see its own output)")

	raw, err := json.Marshal(out)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(raw)).To(BeNumerically("<", 1024), "%s", raw)

	// A controller reference too long to be Trellis' is dropped.
	long := heavyDeployment("x", controllerRef("view.trellis.dev/v1", "MarkdownView", strings.Repeat("m", 300)))
	out, err = reduce(long, keys)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.GetOwnerReferences()).To(BeEmpty())
}

func TestReduceWorksOnAnyObjectType(t *testing.T) {
	g := NewWithT(t)
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"})
	u.SetName("w")
	u.SetNamespace("team")
	u.SetLabels(map[string]string{setup.ManagedByLabel: setup.ManagedByValue, "other": "x"})
	u.Object["spec"] = map[string]any{"blob": bigEnv}
	out, err := reduce(u, map[string]bool{setup.ManagedByLabel: true})
	g.Expect(err).NotTo(HaveOccurred())
	got := out.(*unstructured.Unstructured)
	g.Expect(got.GroupVersionKind().Kind).To(Equal("Widget"))
	g.Expect(got.GetName()).To(Equal("w"))
	g.Expect(got.GetLabels()).To(Equal(map[string]string{setup.ManagedByLabel: setup.ManagedByValue}))
	g.Expect(got.Object).NotTo(HaveKey("spec"))
}

// childTransforms builds the cache options of the manager's real view and
// tenancy controllers, with HTTPRoutes served.
func childTransforms(g Gomega) func(obj client.Object) client.Object {
	served := map[string][]servedType{view.ControllerName: {{obj: &gatewayv1.HTTPRoute{},
		gvk: schema.GroupVersionKind{Group: gatewayv1.GroupName, Version: "v1", Kind: "HTTPRoute"}}}}
	opts, err := cacheOptions([]setup.Controller{view.Controller, tenancy.Controller}, served, time.Hour, nil)
	g.Expect(err).NotTo(HaveOccurred())
	return func(obj client.Object) client.Object {
		b, ok := byObjectFor(opts, obj)
		g.Expect(ok).To(BeTrue(), "%T is cached", obj)
		out, err := b.Transform(obj)
		g.Expect(err).NotTo(HaveOccurred())
		return out.(client.Object)
	}
}

// TestCacheKeepsWholeOnlyRecognisedChildren runs the manager's transforms
// of child types, with the real controllers' recognisers, on each child
// Trellis makes and on look-alikes anyone who may write those objects can
// make: a label alone, a real view's owner reference on a name that view
// does not give that child, an owner of another group, a tenant label on an
// object Trellis does not name so. A look-alike keeps no spec, data or
// status, and skips the controller's own transform.
func TestCacheKeepsWholeOnlyRecognisedChildren(t *testing.T) {
	g := NewWithT(t)
	transform := childTransforms(g)
	marks := func(extra map[string]string) map[string]string {
		l := map[string]string{setup.ManagedByLabel: setup.ManagedByValue, "app.kubernetes.io/part-of": "trellis"}
		for k, v := range extra {
			l[k] = v
		}
		return l
	}
	tenantMarks := marks(map[string]string{tenancy.TenantLabel: "acme"})
	meta := func(name, ns string, labels map[string]string, refs ...metav1.OwnerReference) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), ResourceVersion: "7",
			Labels: labels, Annotations: map[string]string{"example.com/notes": strings.Repeat("n", 1000)}, OwnerReferences: refs}
	}
	configMap := func(m metav1.ObjectMeta) client.Object {
		return &corev1.ConfigMap{ObjectMeta: m, Data: map[string]string{"index.md": bigEnv}}
	}
	deployment := func(m metav1.ObjectMeta) client.Object {
		d := heavyDeployment(m.Name, m.OwnerReferences...)
		d.ObjectMeta = m
		return d
	}
	service := func(m metav1.ObjectMeta) client.Object {
		return &corev1.Service{ObjectMeta: m, Spec: corev1.ServiceSpec{ExternalName: bigEnv[:1000]}}
	}
	ingress := func(m metav1.ObjectMeta) client.Object {
		return &networkingv1.Ingress{ObjectMeta: m, Spec: networkingv1.IngressSpec{IngressClassName: ptr.To("x")}}
	}
	route := func(m metav1.ObjectMeta) client.Object {
		return &gatewayv1.HTTPRoute{ObjectMeta: m, Spec: gatewayv1.HTTPRouteSpec{Hostnames: []gatewayv1.Hostname{"a.example.com"}}}
	}
	roleBinding := func(m metav1.ObjectMeta) client.Object {
		return &rbacv1.RoleBinding{ObjectMeta: m, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "admin"},
			Subjects: []rbacv1.Subject{{Kind: "Group", Name: "acme-admins"}}}
	}
	clusterRole := func(m metav1.ObjectMeta) client.Object {
		return &rbacv1.ClusterRole{ObjectMeta: m, Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, Resources: []string{"pods"}}}}
	}
	quota := func(m metav1.ObjectMeta) client.Object {
		return &corev1.ResourceQuota{ObjectMeta: m, Spec: corev1.ResourceQuotaSpec{Scopes: []corev1.ResourceQuotaScope{"BestEffort"}}}
	}
	namespace := func(annotations map[string]string) func(metav1.ObjectMeta) client.Object {
		return func(m metav1.ObjectMeta) client.Object {
			for k, v := range annotations {
				m.Annotations[k] = v
			}
			return &corev1.Namespace{ObjectMeta: m, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}}}
		}
	}
	otherGroup := controllerRef("example.com/v1", "MarkdownView", "site")

	for _, tc := range []struct {
		name string
		obj  client.Object
		// whole: kept as it came (after the controller's own transform);
		// applied: a child the view controller applies, kept as metadata,
		// status and the hash of what Trellis applied (its spec dropped);
		// otherwise reduced, with these labels and annotations left.
		whole, applied          bool
		keptLabels, keptAnnotes map[string]string
	}{
		{name: "a view's Deployment", applied: true, obj: deployment(meta("viewer-site", "team", marks(nil), siteRef()))},
		{name: "a view's Service", applied: true, obj: service(meta("viewer-site", "team", marks(nil), siteRef()))},
		{name: "a view's Ingress", applied: true, obj: ingress(meta("viewer-site", "team", marks(nil), siteRef()))},
		{name: "a view's HTTPRoute", applied: true, obj: route(meta("viewer-site", "team", marks(nil), siteRef()))},
		{name: "label-only Deployment at a view's child name", obj: deployment(meta("viewer-site", "team", marks(nil))),
			keptLabels: map[string]string{setup.ManagedByLabel: setup.ManagedByValue}},
		{name: "label-only Deployment", obj: deployment(meta("big-1", "team", marks(nil))),
			keptLabels: map[string]string{setup.ManagedByLabel: setup.ManagedByValue}},
		{name: "Deployment of a real view under another name", obj: deployment(meta("viewer-other", "team", marks(nil), siteRef())),
			keptLabels: map[string]string{setup.ManagedByLabel: setup.ManagedByValue}},
		{name: "Deployment controlled by a MarkdownView of another group", obj: deployment(meta("viewer-site", "team", marks(nil), otherGroup)),
			keptLabels: map[string]string{setup.ManagedByLabel: setup.ManagedByValue}},
		{name: "ConfigMap of a real view under the viewer's name", obj: configMap(meta("viewer-site", "team", marks(nil), siteRef())),
			keptLabels: map[string]string{setup.ManagedByLabel: setup.ManagedByValue}},
		{name: "label-only ConfigMap at a view's child name", obj: configMap(meta("markdowns-site", "team", marks(nil))),
			keptLabels: map[string]string{setup.ManagedByLabel: setup.ManagedByValue}},
		{name: "Service of a real view under another name", obj: service(meta("svc", "team", marks(nil), siteRef())),
			keptLabels: map[string]string{setup.ManagedByLabel: setup.ManagedByValue}},
		{name: "HTTPRoute of a real view under another name", obj: route(meta("viewer-sites", "team", marks(nil), siteRef())),
			keptLabels: map[string]string{setup.ManagedByLabel: setup.ManagedByValue}},

		{name: "a tenant's admin RoleBinding", whole: true, obj: roleBinding(meta("trellis-tenant-admin", "acme-dev", tenantMarks))},
		{name: "a tenant's viewer RoleBinding", whole: true, obj: roleBinding(meta("trellis-tenant-viewer", "acme-dev", tenantMarks))},
		{name: "a tenant's quota", whole: true, obj: quota(meta("trellis-tenant-quota", "acme-dev", tenantMarks))},
		{name: "a tenant's ClusterRole", whole: true, obj: clusterRole(meta("trellis:tenant:acme", "", tenantMarks))},
		{name: "a tenant's namespace", whole: true,
			obj: namespace(map[string]string{tenancy.TenantUIDAnnotation: "uid-acme"})(meta("acme-dev", "", tenantMarks))},
		{name: "RoleBinding with a tenant's name but no tenant label", obj: roleBinding(meta("trellis-tenant-admin", "acme-dev", marks(nil))),
			keptLabels: map[string]string{setup.ManagedByLabel: setup.ManagedByValue}},
		{name: "RoleBinding with the tenant label under another name", obj: roleBinding(meta("team-admins", "acme-dev", tenantMarks)),
			keptLabels: map[string]string{setup.ManagedByLabel: setup.ManagedByValue, tenancy.TenantLabel: "acme"}},
		{name: "quota with the tenant label under another name", obj: quota(meta("bigger", "acme-dev", tenantMarks)),
			keptLabels: map[string]string{setup.ManagedByLabel: setup.ManagedByValue, tenancy.TenantLabel: "acme"}},
		{name: "ClusterRole with the tenant label under another name", obj: clusterRole(meta("acme-extra", "", tenantMarks)),
			keptLabels: map[string]string{setup.ManagedByLabel: setup.ManagedByValue, tenancy.TenantLabel: "acme"}},
		{name: "namespace with the tenant label only",
			obj:         namespace(map[string]string{tenancy.HandOverAnnotation: "bolt"})(meta("acme-x", "", tenantMarks)),
			keptLabels:  map[string]string{setup.ManagedByLabel: setup.ManagedByValue, tenancy.TenantLabel: "acme"},
			keptAnnotes: map[string]string{tenancy.HandOverAnnotation: "bolt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			in := tc.obj.DeepCopyObject().(client.Object)
			out := transform(tc.obj)
			if tc.whole {
				g.Expect(out).To(Equal(in), "kept whole")
				return
			}
			if tc.applied {
				g.Expect(out.GetAnnotations()).To(HaveKey(children.AppliedHashAnnotation))
				got := out.DeepCopyObject().(client.Object)
				delete(got.GetAnnotations(), children.AppliedHashAnnotation)
				want := in.DeepCopyObject().(client.Object)
				switch w := want.(type) {
				case *appsv1.Deployment:
					w.Spec = appsv1.DeploymentSpec{}
				case *corev1.Service:
					w.Spec, w.Status = corev1.ServiceSpec{}, corev1.ServiceStatus{}
				case *networkingv1.Ingress:
					w.Spec, w.Status = networkingv1.IngressSpec{}, networkingv1.IngressStatus{}
				case *gatewayv1.HTTPRoute:
					w.Spec = gatewayv1.HTTPRouteSpec{}
				}
				g.Expect(got).To(Equal(want), "metadata and status kept, spec dropped")
				return
			}
			g.Expect(out).To(BeAssignableToTypeOf(in))
			want := in.DeepCopyObject().(client.Object)
			reduced, err := reduce(want, map[string]bool{})
			g.Expect(err).NotTo(HaveOccurred())
			reduced.SetLabels(tc.keptLabels)
			reduced.SetAnnotations(tc.keptAnnotes)
			g.Expect(out).To(Equal(reduced), "reduced to metadata, its controller reference and the marks the controllers read")
		})
	}

	// A view's own ConfigMap goes on to the view controller's transform,
	// which keeps a hash of its data instead of the data.
	own := configMap(meta("markdowns-site", "team", marks(nil), siteRef()))
	out := transform(own).(*corev1.ConfigMap)
	g.Expect(out.Data).To(BeNil())
	g.Expect(out.Annotations).To(HaveKey("view.trellis.dev/content-sha256 (cached)"))
	g.Expect(out.Annotations).To(HaveKey("example.com/notes"))
}

func TestCacheOptionsRequireRecognise(t *testing.T) {
	g := NewWithT(t)
	_, err := cacheOptions([]setup.Controller{{Name: "a", Owned: []client.Object{&corev1.ConfigMap{}}}}, nil, time.Hour, nil)
	g.Expect(err).To(MatchError(ContainSubstring("controller a owns child types but declares no Recognise")))
	served := map[string][]servedType{"b": {{obj: &networkingv1.Ingress{}, gvk: networkingv1.SchemeGroupVersion.WithKind("Ingress")}}}
	_, err = cacheOptions([]setup.Controller{{Name: "b", OptionalOwned: []client.Object{&networkingv1.Ingress{}}}}, served, time.Hour, nil)
	g.Expect(err).To(MatchError(ContainSubstring("controller b owns child types but declares no Recognise")))
	_, err = cacheOptions([]setup.Controller{{Name: "c", Transforms: []setup.Transform{{Object: &corev1.Secret{}, Func: nil}}}}, nil, time.Hour, nil)
	g.Expect(err).NotTo(HaveOccurred(), "a controller without children needs none")
}

// A type cached with Transform.All is its transform's to reduce: the
// manager's reduction leaves it alone.
func TestCacheOptionsLeaveAllTypesToTheirTransform(t *testing.T) {
	g := NewWithT(t)
	var handed []client.Object
	keep := func(in any) (any, error) { handed = append(handed, in.(client.Object)); return in, nil }
	opts, err := cacheOptions([]setup.Controller{{
		Name: "a", Recognise: func(client.Object) bool { return false },
		Owned:      []client.Object{&networkingv1.NetworkPolicy{}, &corev1.ConfigMap{}},
		Transforms: []setup.Transform{{Object: &networkingv1.NetworkPolicy{}, Func: keep, All: true}, {Object: &corev1.ConfigMap{}, Func: keep}},
	}}, nil, time.Hour, nil)
	g.Expect(err).NotTo(HaveOccurred())

	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "theirs"},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{"Ingress"}}}
	b, _ := byObjectFor(opts, np)
	g.Expect(b.Label).To(BeNil())
	out, err := b.Transform(np.DeepCopy())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal(np))
	g.Expect(handed).To(HaveLen(1))

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "theirs"}, Data: map[string]string{"a": "b"}}
	b, _ = byObjectFor(opts, cm)
	out, err = b.Transform(cm.DeepCopy())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.(*corev1.ConfigMap).Data).To(BeNil(), "a label-selected type is reduced")
	g.Expect(handed).To(HaveLen(1), "and its reduced objects skip the controller's transform")
}
