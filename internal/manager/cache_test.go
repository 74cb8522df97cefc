package manager

import (
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/internal/controller/setup"
)

func byObjectFor(opts cache.Options, obj client.Object) (cache.ByObject, bool) {
	for o, b := range opts.ByObject {
		if fmt.Sprintf("%T", o) == fmt.Sprintf("%T", obj) {
			return b, true
		}
	}
	return cache.ByObject{}, false
}

// everything recognises every object as the controller's own child.
func everything(client.Object) bool { return true }

func withManagedFields() []metav1.ManagedFieldsEntry {
	return []metav1.ManagedFieldsEntry{{Manager: "kubectl"}, {Manager: setup.FieldManager}, {Manager: "kube-controller-manager"}}
}

func TestCacheOptionsScopeChildrenAndChainTransforms(t *testing.T) {
	g := NewWithT(t)
	// seen records what the controller's transform was handed.
	var seen []string
	markSeen := func(in any) (any, error) {
		obj := in.(metav1.Object)
		for _, f := range obj.GetManagedFields() {
			seen = append(seen, fmt.Sprintf("%s:%s", obj.GetName(), f.Manager))
		}
		obj.SetAnnotations(map[string]string{"transformed": "yes"})
		return in, nil
	}
	controllers := []setup.Controller{
		{
			Name:          "a",
			Recognise:     everything,
			Owned:         []client.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}},
			OptionalOwned: []client.Object{&networkingv1.IngressClass{}, &networkingv1.Ingress{}},
			Transforms: []setup.Transform{
				{Object: &corev1.ConfigMap{}, Func: markSeen},
				{Object: &corev1.Secret{}, Func: markSeen}, // a type the controller reads, not one it owns
				{Object: &networkingv1.IngressClass{}, Func: markSeen},
			},
		},
		{
			Name: "b", Owned: []client.Object{&corev1.ConfigMap{}, &corev1.Namespace{}}, Recognise: everything,
			ReadsManagedFields: []client.Object{&corev1.Namespace{}},
		},
	}
	// Of a's optional types, only Ingress is served.
	optional := map[string][]servedType{"a": {{obj: &networkingv1.Ingress{}, gvk: schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}}}}

	opts, err := cacheOptions(controllers, optional, time.Hour, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*opts.SyncPeriod).To(Equal(time.Hour))
	managed := labels.SelectorFromSet(labels.Set{setup.ManagedByLabel: setup.ManagedByValue})

	for _, obj := range []client.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}, &corev1.Namespace{}, &networkingv1.Ingress{}} {
		b, ok := byObjectFor(opts, obj)
		g.Expect(ok).To(BeTrue(), "%T", obj)
		g.Expect(b.Label.String()).To(Equal(managed.String()), "%T is cached only where Trellis manages it", obj)
	}
	_, ok := byObjectFor(opts, &networkingv1.IngressClass{})
	g.Expect(ok).To(BeFalse(), "an optional type the cluster does not serve is not cached, even with a transform")
	secret, ok := byObjectFor(opts, &corev1.Secret{})
	g.Expect(ok).To(BeTrue())
	g.Expect(secret.Label).To(BeNil(), "a transformed type that is not a child is not label-scoped")
	g.Expect(opts.ByObject).To(HaveLen(5), "one entry per type, however many controllers name it")

	// A child: managedFields trimmed to Trellis' own entry first, then the
	// controller's transform, then dropped (no controller reads them).
	cm, _ := byObjectFor(opts, &corev1.ConfigMap{})
	out, err := cm.Transform(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", ManagedFields: withManagedFields()}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(seen).To(Equal([]string{"cm:" + setup.FieldManager}))
	g.Expect(out.(*corev1.ConfigMap).Annotations).To(HaveKeyWithValue("transformed", "yes"))
	g.Expect(out.(*corev1.ConfigMap).ManagedFields).To(BeEmpty())

	// Not a child: managedFields dropped entirely, then the transform.
	seen = nil
	out, err = secret.Transform(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", ManagedFields: withManagedFields()}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(seen).To(BeEmpty())
	g.Expect(out.(*corev1.Secret).Annotations).To(HaveKeyWithValue("transformed", "yes"))

	// A child without a transform of its own keeps no managedFields...
	d, _ := byObjectFor(opts, &appsv1.Deployment{})
	out, err = d.Transform(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{ManagedFields: withManagedFields()}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.(*appsv1.Deployment).ManagedFields).To(BeEmpty())
	g.Expect(out.(*appsv1.Deployment).Annotations).To(BeEmpty())

	// ...unless a controller reads them: then Trellis' entry only.
	ns, _ := byObjectFor(opts, &corev1.Namespace{})
	out, err = ns.Transform(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{ManagedFields: withManagedFields()}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.(*corev1.Namespace).ManagedFields).To(ConsistOf(HaveField("Manager", setup.FieldManager)))

	// Everything else: managedFields dropped.
	out, err = opts.DefaultTransform(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{ManagedFields: withManagedFields()}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.(*corev1.Pod).ManagedFields).To(BeEmpty())
}

func TestCacheOptionsRefuseTwoTransformsOfOneType(t *testing.T) {
	g := NewWithT(t)
	noop := func(in any) (any, error) { return in, nil }
	_, err := cacheOptions([]setup.Controller{
		{Name: "a", Transforms: []setup.Transform{{Object: &corev1.ConfigMap{}, Func: noop}}},
		{Name: "b", Owned: []client.Object{&corev1.ConfigMap{}}, Recognise: everything, Transforms: []setup.Transform{{Object: &corev1.ConfigMap{}, Func: noop}}},
	}, nil, time.Hour, nil)
	g.Expect(err).To(MatchError(ContainSubstring("controllers a and b both transform cached *v1.ConfigMap objects")))
}

func TestChain(t *testing.T) {
	g := NewWithT(t)
	var order []string
	step := func(name string) func(any) (any, error) {
		return func(in any) (any, error) { order = append(order, name); return in, nil }
	}
	fail := func(any) (any, error) { return nil, errors.New("boom") }

	out, err := chain(step("1"), nil, step("2"))(7)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal(7))
	g.Expect(order).To(Equal([]string{"1", "2"}))

	order = nil
	_, err = chain(step("1"), fail, step("3"))(7)
	g.Expect(err).To(MatchError("boom"))
	g.Expect(order).To(Equal([]string{"1"}), "an error stops the chain")
}
