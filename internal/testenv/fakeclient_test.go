package testenv

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoac "k8s.io/client-go/applyconfigurations"
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
	named := []string{"patch Namespace a", "status Namespace a", "apply Secret a/s", "create Namespace c", "delete Namespace c"}
	if got := f.NamedWrites(); !slices.Equal(got, named) {
		t.Errorf("named writes %v, want %v", got, named)
	}
	// Failures as a table's data: a namespaced object by namespace/name.
	f.FailRequests(map[string]error{"apiget Secret a/s": down})
	if err := f.APIReader.Get(ctx, client.ObjectKey{Namespace: "a", Name: "s"}, &corev1.Secret{}); !errors.Is(err, down) {
		t.Errorf("API get of a/s: %v, want the injected error", err)
	}
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: "a", Name: "s"}, &corev1.Secret{}); err != nil {
		t.Errorf("cache get of a/s: %v, want the object", err)
	}
	f.Heal()
	if n := f.Count(Status, "Namespace"); n != 1 {
		t.Errorf("status writes %d, want 1", n)
	}
	f.ForgetWrites()
	if got := f.Writes(); len(got) != 0 {
		t.Errorf("writes %v after ForgetWrites", got)
	}
}

func TestFakeCacheHoldsWhatItSaysAndTheAPIServerNamesObjects(t *testing.T) {
	ctx := context.Background()
	cm := func(name string, labels map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labels},
			Data: map[string]string{"k": "v"}}
	}
	f := NewFake(fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).
		WithObjects(cm("held", map[string]string{"cached": "yes"}), cm("unheld", nil)).
		WithReturnManagedFields().WithTypeConverters(clientgoac.NewTypeConverter(clientgoscheme.Scheme)))
	// A cache of labelled objects only, trimmed of their data.
	f.Cache = func(obj client.Object) (bool, error) {
		if c, ok := obj.(*corev1.ConfigMap); ok {
			c.Data = nil
		}
		return obj.GetLabels()["cached"] == "yes", nil
	}

	got := &corev1.ConfigMap{}
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "held"}, got); err != nil || got.Data != nil {
		t.Errorf("cache get of a held object: %v, data %v; want it trimmed", err, got.Data)
	}
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "unheld"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("cache get of an object the cache does not hold: %v, want not found", err)
	}
	list := &corev1.ConfigMapList{}
	if err := f.Client.List(ctx, list); err != nil || len(list.Items) != 1 || list.Items[0].Name != "held" {
		t.Errorf("cache list: %v, %d items; want the held one only", err, len(list.Items))
	}
	if err := f.APIReader.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "unheld"}, got); err != nil || got.Data["k"] != "v" {
		t.Errorf("API get: %v, data %v; want the whole object", err, got.Data)
	}
	if err := f.APIReader.List(ctx, list); err != nil || len(list.Items) != 2 {
		t.Errorf("API list: %v, %d items; want both", err, len(list.Items))
	}
	if want := []string{"apiget ConfigMap", "apilist ConfigMap"}; !slices.Equal(f.APIReads(), want) {
		t.Errorf("API reads %v, want %v", f.APIReads(), want)
	}

	// Created and applied objects get a UID; an applier claims no empty status.
	f.Cache = nil
	created := cm("created", nil)
	if err := f.Client.Create(ctx, created); err != nil || created.UID != "uid-configmap-created" {
		t.Errorf("create: %v, UID %q", err, created.UID)
	}
	svc := corev1ac.Service("applied", "ns").WithSpec(corev1ac.ServiceSpec().WithPorts(corev1ac.ServicePort().WithPort(80)))
	if err := f.Client.Apply(ctx, svc, client.FieldOwner("test")); err != nil {
		t.Fatal(err)
	}
	stored := &corev1.Service{}
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "applied"}, stored); err != nil || stored.UID != "uid-service-applied" {
		t.Errorf("applied: %v, UID %q", err, stored.UID)
	}
	if len(stored.ManagedFields) == 0 {
		t.Fatal("no managed fields")
	}
	for _, m := range stored.ManagedFields {
		if strings.Contains(string(m.FieldsV1.GetRawBytes()), `"f:status":{}`) {
			t.Errorf("%s claims an empty status: %s", m.Manager, m.FieldsV1.GetRawBytes())
		}
	}
	// A write the API server refuses is not counted.
	if err := f.Client.Create(ctx, cm("held", nil)); !apierrors.IsAlreadyExists(err) {
		t.Errorf("create of an object that exists: %v", err)
	}
	if want := []string{"create ConfigMap", "apply Service"}; !slices.Equal(f.Writes(), want) {
		t.Errorf("writes %v, want %v", f.Writes(), want)
	}
	f.ForgetWrites()
	if len(f.Writes()) != 0 || len(f.APIReads()) != 0 {
		t.Errorf("forgotten, still %v and %v", f.Writes(), f.APIReads())
	}
}
