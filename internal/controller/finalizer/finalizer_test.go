package finalizer

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

const name = "trellis.dev/test"

func TestEnsureAndRemove(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm", Finalizers: []string{"someone.else/keep"}}}
	c := fake.NewClientBuilder().WithObjects(cm).Build()
	obj := &corev1.ConfigMap{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), obj)).To(Succeed())

	wrote, err := Ensure(ctx, c, obj, name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wrote).To(BeTrue())
	wrote, err = Ensure(ctx, c, obj, name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wrote).To(BeFalse(), "present already: no write")

	stored := &corev1.ConfigMap{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), stored)).To(Succeed())
	g.Expect(stored.Finalizers).To(ConsistOf("someone.else/keep", name))

	g.Expect(Remove(ctx, c, obj, name)).To(Succeed())
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), stored)).To(Succeed())
	g.Expect(stored.Finalizers).To(ConsistOf("someone.else/keep"), "another party's finalizer stays")
	g.Expect(Remove(ctx, c, obj, name)).To(Succeed(), "absent already: nothing to do")
}

// A stale copy must not overwrite a finalizer list someone changed since:
// the patch carries the resourceVersion it was computed from.
func TestEnsureRefusesAStaleCopy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}}
	c := fake.NewClientBuilder().WithObjects(cm).Build()
	stale := &corev1.ConfigMap{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), stale)).To(Succeed())

	fresh := stale.DeepCopy()
	fresh.Finalizers = []string{"someone.else/keep"}
	g.Expect(c.Update(ctx, fresh)).To(Succeed())

	_, err := Ensure(ctx, c, stale, name)
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "got %v", err)
	stored := &corev1.ConfigMap{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), stored)).To(Succeed())
	g.Expect(stored.Finalizers).To(ConsistOf("someone.else/keep"))
}

func TestRemoveFromAGoneObject(t *testing.T) {
	g := NewWithT(t)
	c := fake.NewClientBuilder().Build()
	gone := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gone", Finalizers: []string{name}}}
	g.Expect(Remove(context.Background(), c, gone, name)).To(Succeed())
}
