package status

import (
	"context"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
)

var rules = []EventRule{
	{Condition: conditions.Ready, Status: metav1.ConditionTrue, Type: corev1.EventTypeNormal},
	{Condition: conditions.Stalled, Status: metav1.ConditionTrue, Type: corev1.EventTypeWarning},
	{Condition: conditions.Reconciling, Status: metav1.ConditionTrue, Type: corev1.EventTypeWarning, Except: []string{"Routine"}},
}

// fixture is a fake API server holding one Tenant, a patcher on it that
// counts its status writes, and a way to make Get return a stale copy.
type fixture struct {
	patcher  *Patcher[*tenancyv1.Tenant, tenancyv1.TenantStatus]
	recorder *events.FakeRecorder
	writes   atomic.Int32
	stale    *tenancyv1.Tenant // when set, Get returns it (a cache that lags)
	key      types.NamespacedName
}

func newFixture(t *testing.T) *fixture {
	scheme := runtime.NewScheme()
	if err := tenancyv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	f := &fixture{recorder: events.NewFakeRecorder(10), key: types.NamespacedName{Name: "team"}}
	tenant := &tenancyv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "team", Generation: 1}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tenant).WithStatusSubresource(tenant).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if f.stale != nil {
					f.stale.DeepCopyInto(obj.(*tenancyv1.Tenant))
					return nil
				}
				return c.Get(ctx, key, obj, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				f.writes.Add(1)
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).Build()
	f.patcher = NewPatcher(c, f.recorder, func(t *tenancyv1.Tenant) *tenancyv1.TenantStatus { return &t.Status }, rules...)
	return f
}

func (f *fixture) get(t *testing.T) *tenancyv1.Tenant {
	t.Helper()
	obj := &tenancyv1.Tenant{}
	found, err := f.patcher.Get(context.Background(), f.key, obj)
	if err != nil || !found {
		t.Fatalf("get: found=%v err=%v", found, err)
	}
	return obj
}

func withSummary(obj *tenancyv1.Tenant, s conditions.Summary) tenancyv1.TenantStatus {
	st := *obj.Status.DeepCopy()
	st.ObservedGeneration = obj.Generation
	conditions.Summarize(&st.Conditions, obj.Generation, s)
	return st
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestPatchWritesOnlyChanges(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t)
	ready := conditions.Summary{Progress: conditions.Done, Reason: "Ready", Message: "all there"}

	obj := f.get(t)
	wrote, err := f.patcher.Patch(context.Background(), obj, withSummary(obj, ready))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wrote).To(BeTrue())

	obj = f.get(t)
	wrote, err = f.patcher.Patch(context.Background(), obj, withSummary(obj, ready))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wrote).To(BeFalse(), "the same status again must cost no write")
	g.Expect(f.writes.Load()).To(Equal(int32(1)))
}

func TestGetBuildsOnTheLastWriteWhileTheCacheLags(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t)
	ctx := context.Background()
	before := f.get(t) // the copy the cache will keep serving
	working := conditions.Summary{Progress: conditions.Working, Reason: "RollingOut", Message: "0 of 1"}

	_, err := f.patcher.Patch(ctx, before.DeepCopy(), withSummary(before, working))
	g.Expect(err).NotTo(HaveOccurred())

	f.stale = before
	obj := f.get(t)
	g.Expect(conditions.Get(obj.Status.Conditions, conditions.Reconciling)).NotTo(BeNil(),
		"a stale copy is replaced by the status just written")
	wrote, err := f.patcher.Patch(ctx, obj, withSummary(obj, working))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wrote).To(BeFalse(), "an unchanged status must not be sent twice because the cache lags")
	g.Expect(f.writes.Load()).To(Equal(int32(1)))

	// Once the cache has a newer version, it is trusted again.
	f.stale = nil
	f.patcher.Forget(f.key)
	obj = f.get(t)
	g.Expect(conditions.Get(obj.Status.Conditions, conditions.Reconciling)).NotTo(BeNil())
}

func TestEventRules(t *testing.T) {
	ctx := context.Background()
	steps := []struct {
		summary conditions.Summary
		want    []string
	}{
		{conditions.Summary{Progress: conditions.Working, Reason: "Routine", Message: "starting"}, nil},
		{conditions.Summary{Progress: conditions.Working, Reason: "StoreUnreachable", Message: "no answer"}, []string{"Warning StoreUnreachable no answer"}},
		{conditions.Summary{Progress: conditions.Working, Reason: "StoreUnreachable", Message: "still no answer"}, nil},
		{conditions.Summary{Progress: conditions.Done, Reason: "Ready", Message: "fine"}, []string{"Normal Ready fine"}},
		{conditions.Summary{Progress: conditions.Done, Reason: "Ready", Message: "fine, again"}, nil},
		{conditions.Summary{Progress: conditions.Blocked, Reason: "Conflict", Message: "taken"}, []string{"Warning Conflict taken"}},
		{conditions.Summary{Progress: conditions.Blocked, Reason: "DeleteBlocked", Message: "not empty"}, []string{"Warning DeleteBlocked not empty"}},
	}
	g := NewWithT(t)
	f := newFixture(t)
	for i, step := range steps {
		obj := f.get(t)
		_, err := f.patcher.Patch(ctx, obj, withSummary(obj, step.summary))
		g.Expect(err).NotTo(HaveOccurred())
		if step.want == nil {
			g.Expect(f.events()).To(BeEmpty(), "step %d (%s)", i, step.summary.Reason)
		} else {
			g.Expect(f.events()).To(Equal(step.want), "step %d (%s)", i, step.summary.Reason)
		}
	}
}

func TestGetReportsAGoneObject(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t)
	found, err := f.patcher.Get(context.Background(), types.NamespacedName{Name: "gone"}, &tenancyv1.Tenant{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeFalse())
}

// The patcher remembers the status it wrote, not the object the API server
// answered with: that carries the whole spec (a MarkdownView's up to 1 MiB
// of files), which would stay in memory for as long as the object exists.
func TestPatchRemembersOnlyTheStatus(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t)
	obj := f.get(t)
	obj.Spec.Namespaces = []string{"a-very-large-spec"}
	obj.Labels = map[string]string{"big": "label"}
	next := withSummary(obj, conditions.Summary{Progress: conditions.Done, Reason: "Ready", Message: "all there"})
	_, err := f.patcher.Patch(context.Background(), obj, next)
	g.Expect(err).NotTo(HaveOccurred())

	w := f.patcher.written[f.key]
	g.Expect(w.obj.Status).To(Equal(obj.Status), "the status as the API server stored it")
	g.Expect(w.obj.Status.Conditions).To(HaveLen(len(next.Conditions)))
	g.Expect(w.obj.Spec).To(BeZero())
	g.Expect(w.obj.ObjectMeta).To(BeZero())

	// What is remembered is a copy: changing the object written does not change it.
	obj.Status.Conditions[0].Message = "changed"
	g.Expect(f.patcher.written[f.key].obj.Status.Conditions[0].Message).To(Equal("all there"))
}
