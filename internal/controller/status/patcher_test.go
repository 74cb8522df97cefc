package status

import (
	"context"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"

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
	scheme   *runtime.Scheme
	// failWrites makes status writes fail; onWrite, when set, is told of
	// each write before the patcher gets the answer.
	failWrites bool
	onWrite    func(*tenancyv1.Tenant)
}

func newFixture(t *testing.T) *fixture {
	scheme := runtime.NewScheme()
	if err := tenancyv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	f := &fixture{recorder: events.NewFakeRecorder(10), key: types.NamespacedName{Name: "team"}, scheme: scheme}
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
				if f.failWrites {
					return apierrors.NewServiceUnavailable("try again")
				}
				f.writes.Add(1)
				if err := c.SubResource(sub).Patch(ctx, obj, patch, opts...); err != nil {
					return err
				}
				if f.onWrite != nil {
					f.onWrite(obj.(*tenancyv1.Tenant).DeepCopy())
				}
				return nil
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

	saved := testutil.ToFloat64(savedWrites.WithLabelValues("Tenant"))
	f.stale = before
	obj := f.get(t)
	g.Expect(conditions.Get(obj.Status.Conditions, conditions.Reconciling)).NotTo(BeNil(),
		"a stale copy is replaced by the status just written")
	wrote, err := f.patcher.Patch(ctx, obj, withSummary(obj, working))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wrote).To(BeFalse(), "an unchanged status must not be sent twice because the cache lags")
	g.Expect(f.writes.Load()).To(Equal(int32(1)))
	g.Expect(testutil.ToFloat64(savedWrites.WithLabelValues("Tenant"))-saved).To(Equal(1.0), "the write saved is counted")

	// A status the reconcile changes again is written, and saves nothing.
	obj = f.get(t)
	_, err = f.patcher.Patch(ctx, obj, withSummary(obj, conditions.Summary{Progress: conditions.Done, Reason: "Ready", Message: "all there"}))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.writes.Load()).To(Equal(int32(2)))
	g.Expect(testutil.ToFloat64(savedWrites.WithLabelValues("Tenant"))-saved).To(Equal(1.0), "nothing more saved")

	// Once the cache has a newer version, it is trusted again, and the
	// write is forgotten.
	f.stale = nil
	obj = f.get(t)
	g.Expect(conditions.IsTrue(obj.Status.Conditions, conditions.Ready)).To(BeTrue())
	g.Expect(f.patcher.Remembered()).To(BeZero(), "a write the cache has shown is forgotten")
}

func TestWritesOnWritesTheCacheHasNotShown(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t)
	ctx := context.Background()
	first := f.get(t) // the copy the cache keeps serving
	working := conditions.Summary{Progress: conditions.Working, Reason: "RollingOut", Message: "0 of 1"}
	ready := conditions.Summary{Progress: conditions.Done, Reason: "Ready", Message: "all there"}

	// Two writes in one reconcile: the second is made on the first's result.
	obj := first.DeepCopy()
	_, err := f.patcher.Patch(ctx, obj, withSummary(obj, working))
	g.Expect(err).NotTo(HaveOccurred())
	afterFirst := obj.DeepCopy()
	_, err = f.patcher.Patch(ctx, obj, withSummary(obj, ready))
	g.Expect(err).NotTo(HaveOccurred())

	// Whichever copy from before the second write the cache serves, it
	// gets the second write's status.
	for name, cached := range map[string]*tenancyv1.Tenant{"the version read": first, "the first write's": afterFirst} {
		f.stale = cached
		got := f.get(t)
		g.Expect(conditions.IsTrue(got.Status.Conditions, conditions.Ready)).To(BeTrue(), name)
		g.Expect(f.patcher.Remembered()).To(Equal(1), name)
	}

	// A reconcile on such a copy that writes again keeps them all as before.
	f.stale = first
	obj = f.get(t)
	_, err = f.patcher.Patch(ctx, obj, withSummary(obj, conditions.Summary{Progress: conditions.Done, Reason: "Ready", Message: "all there, again"}))
	g.Expect(err).NotTo(HaveOccurred())
	f.stale = afterFirst
	g.Expect(conditions.Get(f.get(t).Status.Conditions, conditions.Ready).Message).To(Equal("all there, again"))

	f.stale = nil
	g.Expect(conditions.Get(f.get(t).Status.Conditions, conditions.Ready).Message).To(Equal("all there, again"))
	g.Expect(f.patcher.Remembered()).To(BeZero())
}

func TestAFailedWriteIsNotRemembered(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t)
	ctx := context.Background()
	obj := f.get(t)
	f.failWrites = true
	_, err := f.patcher.Patch(ctx, obj, withSummary(obj, conditions.Summary{Progress: conditions.Done, Reason: "Ready", Message: "all there"}))
	g.Expect(err).To(HaveOccurred())
	g.Expect(f.patcher.Remembered()).To(BeZero())

	// After a write that worked, a failed one leaves that one remembered.
	f.failWrites = false
	stale := f.get(t)
	obj = stale.DeepCopy()
	_, err = f.patcher.Patch(ctx, obj, withSummary(obj, conditions.Summary{Progress: conditions.Done, Reason: "Ready", Message: "first"}))
	g.Expect(err).NotTo(HaveOccurred())
	f.failWrites = true
	_, err = f.patcher.Patch(ctx, obj, withSummary(obj, conditions.Summary{Progress: conditions.Done, Reason: "Ready", Message: "second"}))
	g.Expect(err).To(HaveOccurred())
	f.stale = stale
	g.Expect(conditions.Get(f.get(t).Status.Conditions, conditions.Ready).Message).To(Equal("first"))
}

func TestFollowCacheForgetsWhatTheCacheShows(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	inf := &handlerInformer{}
	g.Expect(f.patcher.FollowCache(ctx, inf)).To(Succeed())
	ready := conditions.Summary{Progress: conditions.Done, Reason: "Ready", Message: "all there"}

	before := f.get(t)
	obj := before.DeepCopy()
	_, err := f.patcher.Patch(ctx, obj, withSummary(obj, ready))
	g.Expect(err).NotTo(HaveOccurred())
	inf.Update(before, before) // an event for a version from before the write
	g.Expect(f.patcher.Remembered()).To(Equal(1))
	inf.Update(before, obj)
	g.Expect(f.patcher.Remembered()).To(BeZero(), "the cache shows the write")

	// The watch event may come before the API server's answer is read.
	f.onWrite = func(written *tenancyv1.Tenant) { inf.Update(obj, written) }
	_, err = f.patcher.Patch(ctx, obj, withSummary(obj, conditions.Summary{Progress: conditions.Working, Reason: "RollingOut", Message: "0 of 1"}))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.patcher.Remembered()).To(BeZero(), "a write the cache showed while it was being sent")
	f.onWrite = nil

	// Deleted, told directly or by a final state the informer missed.
	for name, event := range map[string]any{
		"delete":      obj,
		"final state": toolscache.DeletedFinalStateUnknown{Key: "team", Obj: obj},
	} {
		_, err = f.patcher.Patch(ctx, obj, withSummary(obj, ready))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(f.patcher.Remembered()).To(Equal(1), name)
		inf.handler.OnDelete(event)
		g.Expect(f.patcher.Remembered()).To(BeZero(), name)
		ready.Message += "!"
	}
}

func TestEventRules(t *testing.T) {
	ctx := context.Background()
	steps := []struct {
		summary conditions.Summary
		want    []string
		told    []string
	}{
		{conditions.Summary{Progress: conditions.Working, Reason: "Routine", Message: "starting"}, nil, nil},
		{conditions.Summary{Progress: conditions.Working, Reason: "StoreUnreachable", Message: "no answer"}, []string{"Warning StoreUnreachable no answer"}, nil},
		{conditions.Summary{Progress: conditions.Working, Reason: "StoreUnreachable", Message: "still no answer"}, nil, nil},
		{conditions.Summary{Progress: conditions.Done, Reason: "Ready", Message: "fine"}, []string{"Normal Ready fine"}, nil},
		{conditions.Summary{Progress: conditions.Done, Reason: "Ready", Message: "fine, again"}, nil, nil},
		{conditions.Summary{Progress: conditions.Blocked, Reason: "Conflict", Message: "taken"}, []string{"Warning Conflict taken"}, nil},
		{conditions.Summary{Progress: conditions.Blocked, Reason: "DeleteBlocked", Message: "not empty"}, []string{"Warning DeleteBlocked not empty"}, nil},
		// The caller told Ready's news in an Event of its own; only Ready's is left out.
		{conditions.Summary{Progress: conditions.Done, Reason: "Created", Message: "made"}, nil, []string{conditions.Ready}},
		{conditions.Summary{Progress: conditions.Blocked, Reason: "Conflict", Message: "taken"}, []string{"Warning Conflict taken"}, []string{conditions.Ready}},
	}
	g := NewWithT(t)
	f := newFixture(t)
	for i, step := range steps {
		obj := f.get(t)
		_, err := f.patcher.Patch(ctx, obj, withSummary(obj, step.summary), step.told...)
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

// handlerInformer is the informer FollowCache gets, keeping the handler it
// adds so that tests can send it events.
type handlerInformer struct {
	controllertest.FakeInformer
	handler toolscache.ResourceEventHandler
}

func (h *handlerInformer) GetInformer(context.Context, client.Object, ...cache.InformerGetOption) (cache.Informer, error) {
	return h, nil
}

func (h *handlerInformer) AddEventHandler(handler toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	h.handler = handler
	return nil, nil
}

func (h *handlerInformer) Update(before, after client.Object) { h.handler.OnUpdate(before, after) }
