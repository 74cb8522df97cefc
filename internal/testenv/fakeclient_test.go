package testenv

import (
	"context"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestFakeFailsWhatARowAsksAndCountsWrites(t *testing.T) {
	ctx := context.Background()
	ns := func(name string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	f := NewFake(fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(ns("a"), ns("b")).
		WithStatusSubresource(&corev1.Namespace{}))
	down := apierrors.NewServiceUnavailable("down")
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "namespaces"}, "b", errors.New("modified"))

	// The cache and the API server fail apart.
	f.Fail(Get, "Namespace", down)
	if err := f.Client.Get(ctx, client.ObjectKey{Name: "a"}, &corev1.Namespace{}); !errors.Is(err, down) {
		t.Errorf("cache get: %v, want the injected error", err)
	}
	if err := f.APIReader.Get(ctx, client.ObjectKey{Name: "a"}, &corev1.Namespace{}); err != nil {
		t.Errorf("API get: %v, want the object", err)
	}
	f.Heal()
	f.Fail(APIList, "Namespace", down)
	if err := f.APIReader.List(ctx, &corev1.NamespaceList{}); !errors.Is(err, down) {
		t.Errorf("API list: %v, want the injected error", err)
	}
	if err := f.Client.List(ctx, &corev1.NamespaceList{}); err != nil {
		t.Errorf("cache list: %v, want the list", err)
	}
	f.Heal()

	// A named failure is that object's only; a failed write is not counted.
	f.FailNamed(Patch, "Namespace", "b", conflict)
	for _, name := range []string{"a", "b"} {
		n := ns(name)
		err := f.Client.Patch(ctx, n, client.MergeFrom(n.DeepCopy()))
		if want := name == "b"; apierrors.IsConflict(err) != want {
			t.Errorf("patch %s: %v, conflict wanted: %t", name, err, want)
		}
	}
	f.Fail(Status, "Namespace", down)
	if err := f.Client.Status().Update(ctx, ns("a")); !errors.Is(err, down) {
		t.Errorf("status update: %v, want the injected error", err)
	}
	f.Heal()

	if err := f.Client.Status().Patch(ctx, ns("a"), client.Merge); err != nil {
		t.Fatal(err)
	}
	if err := f.Client.Apply(ctx, corev1ac.Secret("s", "a").WithData(map[string][]byte{"k": []byte("v")}), client.FieldOwner("test")); err != nil {
		t.Fatal(err)
	}
	if err := f.Client.Create(ctx, ns("c")); err != nil {
		t.Fatal(err)
	}
	if err := f.Client.Delete(ctx, ns("c")); err != nil {
		t.Fatal(err)
	}
	want := []string{"patch Namespace", "status Namespace", "apply Secret", "create Namespace", "delete Namespace"}
	if got := f.Writes(); !slices.Equal(got, want) {
		t.Errorf("writes %v, want %v", got, want)
	}
	if n := f.Count(Status, "Namespace"); n != 1 {
		t.Errorf("status writes %d, want 1", n)
	}
	f.ForgetWrites()
	if got := f.Writes(); len(got) != 0 {
		t.Errorf("writes %v after ForgetWrites", got)
	}
}
