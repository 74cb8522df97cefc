package status

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// TestMemoryFollowsWritesTheCacheHasNotSeen drives a patcher that follows
// the cache through 10,000 Tenants: each is created, reconciled (a status
// written), seen by the cache a hundred writes later (a watch that lags),
// and at the end deleted. Once the cache has caught up, the patcher holds
// nothing, although every object is still there; once they are deleted,
// neither. The heap is measured after a GC, against the heap with the
// patcher and the fake API server already built, which keeps its objects
// in memory allocated up front, so that what changes is the patcher's.
func TestMemoryFollowsWritesTheCacheHasNotSeen(t *testing.T) {
	const n, lag = 10_000, 100
	g := NewWithT(t)
	ctx := context.Background()
	api := newAPIStub(n)
	p := NewPatcher(client.Client(api), nil, func(t *tenancyv1.Tenant) *tenancyv1.TenantStatus { return &t.Status })
	inf := &handlerInformer{}
	g.Expect(p.FollowCache(ctx, inf)).To(Succeed())
	reconcile := func(i int) {
		obj := &tenancyv1.Tenant{}
		found, err := p.Get(ctx, api.key(i), obj)
		g.Expect(err).NotTo(HaveOccurred())
		if found {
			_, err = p.Patch(ctx, obj, statusFor(obj))
			g.Expect(err).NotTo(HaveOccurred())
		}
	}

	start := testenv.LiveHeap()
	for i := range n {
		api.create(i)
		reconcile(i)
		if i >= lag {
			inf.Update(api.catchUp(i - lag))
		}
	}
	lagging := p.Remembered()
	for i := n - lag; i < n; i++ {
		inf.Update(api.catchUp(i))
	}
	live := testenv.LiveHeap()
	seen := p.Remembered()
	for i := range n {
		inf.handler.OnDelete(api.remove(i))
		reconcile(i)
	}
	gone := testenv.LiveHeap()
	deleted := p.Remembered()
	runtime.KeepAlive(api) // the fake API server's memory is in every figure

	t.Logf("heap: %d KiB at the start; %+d KiB with %d objects whose writes the cache has shown (%d remembered); %+d KiB once they are deleted (%d remembered)",
		start>>10, (live-start)>>10, n, seen, (gone-start)>>10, deleted)
	g.Expect(lagging).To(Equal(lag), "the writes the cache has not shown yet")
	g.Expect(seen).To(BeZero(), "writes the cache has shown are forgotten")
	g.Expect(deleted).To(BeZero(), "deleted objects are forgotten")
	g.Expect(live-start).To(BeNumerically("<=", testenv.HeapSlack(start)), "heap with every write seen by the cache")
	g.Expect(gone-start).To(BeNumerically("<=", testenv.HeapSlack(start)), "heap once the objects are deleted")
}

// statusFor is a status of the size a Tenant's usually is: the three
// conditions Summarize writes and three namespaces.
func statusFor(t *tenancyv1.Tenant) tenancyv1.TenantStatus {
	st := tenancyv1.TenantStatus{ObservedGeneration: t.Generation}
	for _, ns := range []string{"dev", "stage", "prod"} {
		st.Namespaces = append(st.Namespaces, tenancyv1.TenantNamespaceStatus{Name: t.Name + "-" + ns, State: tenancyv1.NamespaceReady})
	}
	conditions.Summarize(&st.Conditions, t.Generation, conditions.Summary{
		Progress: conditions.Done, Reason: "Ready", Message: fmt.Sprintf("%d namespaces of %s are ready", len(st.Namespaces), t.Name),
	})
	return st
}

// apiStub plays the API server and the manager's cache for a fixed set of
// Tenants, in memory allocated up front: per object, whether it exists, the
// resourceVersion it has and the one the cache shows. Objects are built on
// each read, with the status the patcher wrote once the cache shows it.
type apiStub struct {
	client.Client // only Get and Status().Patch are called
	names         []string
	index         map[string]int
	slots         []stubSlot
	rv            int
}

type stubSlot struct {
	exists                   bool
	created, written, cached int
}

func newAPIStub(n int) *apiStub {
	s := &apiStub{names: make([]string, n), index: make(map[string]int, n), slots: make([]stubSlot, n)}
	for i := range n {
		s.names[i] = fmt.Sprintf("tenant-%05d", i)
		s.index[s.names[i]] = i
	}
	return s
}

func (s *apiStub) key(i int) types.NamespacedName { return types.NamespacedName{Name: s.names[i]} }

func (s *apiStub) create(i int) {
	s.rv++
	s.slots[i] = stubSlot{exists: true, created: s.rv, cached: s.rv}
}

// catchUp makes the cache show object i as the API server has it; it
// returns the copies before and after, for the watch event.
func (s *apiStub) catchUp(i int) (before, after *tenancyv1.Tenant) {
	before = s.object(i)
	s.slots[i].cached = max(s.slots[i].created, s.slots[i].written)
	return before, s.object(i)
}

// remove deletes object i; it returns the last copy, for the watch event.
func (s *apiStub) remove(i int) *tenancyv1.Tenant {
	last := s.object(i)
	s.slots[i] = stubSlot{}
	return last
}

func (s *apiStub) object(i int) *tenancyv1.Tenant {
	slot := s.slots[i]
	t := &tenancyv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: s.names[i], Generation: 1, ResourceVersion: strconv.Itoa(slot.cached)}}
	if slot.written != 0 && slot.cached >= slot.written {
		t.Status = statusFor(t)
	}
	return t
}

func (s *apiStub) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	i, ok := s.index[key.Name]
	if !ok || !s.slots[i].exists {
		return apierrors.NewNotFound(tenancyv1.GroupVersion.WithResource("tenants").GroupResource(), key.Name)
	}
	s.object(i).DeepCopyInto(obj.(*tenancyv1.Tenant))
	return nil
}

func (s *apiStub) Status() client.SubResourceWriter { return stubStatus{s} }

type stubStatus struct {
	*apiStub
}

func (s stubStatus) Patch(_ context.Context, obj client.Object, _ client.Patch, _ ...client.SubResourcePatchOption) error {
	i := s.index[obj.GetName()]
	s.rv++
	s.slots[i].written = s.rv
	obj.SetResourceVersion(strconv.Itoa(s.rv))
	return nil
}

func (s stubStatus) Create(context.Context, client.Object, client.Object, ...client.SubResourceCreateOption) error {
	panic("not called")
}

func (s stubStatus) Update(context.Context, client.Object, ...client.SubResourceUpdateOption) error {
	panic("not called")
}

func (s stubStatus) Apply(context.Context, k8sruntime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	panic("not called")
}
