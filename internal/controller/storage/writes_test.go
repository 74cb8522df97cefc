package storage

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	bucketaccess "github.com/trellis-dev/trellis/internal/controller/storage/access"
	storagebucket "github.com/trellis-dev/trellis/internal/controller/storage/bucket"
	"github.com/trellis-dev/trellis/internal/controller/storage/storagetest"
	objectstore "github.com/trellis-dev/trellis/internal/controller/storage/store"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/s3"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// TestEveryWriteIsTrellis: whatever the storage controllers write (the
// ObjectStore's finalizer, the three statuses, a BucketAccess's Secret) is
// written as the field manager "trellis", so `kubectl get
// --show-managed-fields` tells a person which fields are Trellis' and
// Server-Side Apply conflicts name it. The finalizers of StorageBuckets and
// BucketAccesses are set at admission (config/admission), after the
// request's managed fields are computed: no field manager owns them, so a
// GitOps tool that applies the object without them does not remove them.
func TestEveryWriteIsTrellis(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	store := ensureStore(g)
	ns := newNamespace(t)
	g.Expect(k8s.Create(ctx, newBucket(ns, "data", store))).To(Succeed())
	eventuallyReason(g, ns, "data", storagebucket.ReasonHealthy)
	g.Expect(k8s.Create(ctx, newAccess(ns, "app", "data", "app-s3", storagev1.AccessReadWrite))).To(Succeed())
	eventuallyAccessReason(g, ns, "app", bucketaccess.ReasonGranted)

	for _, obj := range []client.Object{
		&storagev1.ObjectStore{}, &storagev1.StorageBucket{}, &storagev1.BucketAccess{},
	} {
		key := client.ObjectKey{Namespace: ns, Name: "data"}
		switch obj.(type) {
		case *storagev1.ObjectStore:
			key = client.ObjectKey{Name: store}
		case *storagev1.BucketAccess:
			key.Name = "app"
		}
		g.Expect(k8s.Get(ctx, key, obj)).To(Succeed())
		managers := testenv.FieldManagers(obj)
		g.Expect(managers["status"]).To(ConsistOf("trellis"), "%T status", obj)
		if _, ok := obj.(*storagev1.ObjectStore); ok {
			// The object is the creator's; the finalizer is Trellis'.
			g.Expect(managers[""]).To(ContainElement("trellis"), "%T finalizer", obj)
			continue
		}
		g.Expect(obj.GetFinalizers()).NotTo(BeEmpty(), "%T", obj)
		g.Expect(managers[""]).NotTo(ContainElement("trellis"), "%T: the finalizer is set at admission", obj)
		for _, e := range obj.GetManagedFields() {
			g.Expect(e.FieldsV1.GetRawString()).NotTo(ContainSubstring("finalizers"), "%T, manager %s", obj, e.Manager)
		}
	}
	g.Expect(testenv.FieldManagers(secretOf(g, ns, "app-s3"))[""]).To(ConsistOf("trellis"))
}

// TestANewBucketCostsTwoStatusWritesAndOneEvent: besides the user's
// create, a new StorageBucket costs the manager two writes of it, both
// status (the intent to create, written before the store is asked, and
// Healthy), and one Event (BucketCreated, with no Healthy besides): its
// finalizer came with the create (config/admission, Kubernetes 1.36 and
// later). Below 1.36 (make test runs this on 1.33 too) the controller adds
// the finalizer itself, first: one patch more.
func TestANewBucketCostsTwoStatusWritesAndOneEvent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	mutating, err := testenv.ServesMutatingPolicies(k8s)
	g.Expect(err).NotTo(HaveOccurred())
	store := ensureStore(g)
	ns := newNamespace(t)
	mgrWrites.Reset()
	b := newBucket(ns, "counted", store)
	g.Expect(k8s.Create(ctx, b)).To(Succeed())
	if mutating {
		g.Expect(b.Finalizers).To(ConsistOf(stores.BucketFinalizer), "in the answer to the create")
	}
	eventuallyReason(g, ns, "counted", storagebucket.ReasonHealthy)
	reasons := func(g Gomega) []string {
		list := &corev1.EventList{}
		g.Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		out := make([]string, 0, len(list.Items))
		for _, e := range list.Items {
			out = append(out, e.Reason)
		}
		return out
	}
	g.Eventually(reasons, timeout, poll).ShouldNot(BeEmpty())
	time.Sleep(time.Second) // anything else the manager would send
	_, paths := mgrWrites.Writes()
	var mine []string
	for _, p := range paths {
		if strings.Contains(p, "/namespaces/"+ns+"/") && !strings.Contains(p, "/events") {
			mine = append(mine, p)
		}
	}
	bucket := "/apis/storage.trellis.dev/v1/namespaces/" + ns + "/storagebuckets/counted"
	want := []string{"PATCH " + bucket + "/status", "PATCH " + bucket + "/status"}
	if !mutating {
		want = append([]string{"PATCH " + bucket}, want...) // the finalizer, before anything is made
	}
	g.Expect(mine).To(Equal(want))
	g.Expect(reasons(g)).To(ConsistOf(storagebucket.ReasonBucketCreated))
	deleteBucket(g, ns, "counted")
}

// TestReconcilingAgainWritesNothing: once an object is where its spec
// wants it, reconciling it again (a check due, a resync) sends the API
// server no write at all.
func TestReconcilingAgainWritesNothing(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	newStore := storagetest.ReadyStore(true)
	newStore.Finalizers, newStore.Status = nil, storagev1.ObjectStoreStatus{}
	f := storagetest.NewFixture(storagetest.OpenNamespace(), storagetest.StoreCredentials(), newStore, storagetest.Bucket(), storagetest.Access())
	// What the three share in the manager (setupWith).
	clients, namespaces, schedule := f.Stores(), stores.NewNamespaceLabels(f.API.APIReader), storagebucket.NewSchedule()
	objectStores := objectstore.New(f.C, f.Rec, clients, nil, nil, false)
	buckets := storagebucket.New(f.C, f.Rec, storagebucket.Config{Stores: clients, Namespaces: namespaces, Schedule: schedule,
		StoreChecks: f.StoreChecks, AccessEvents: make(chan event.TypedGenericEvent[*storagev1.BucketAccess], 10)})
	accesses := bucketaccess.New(f.C, f.API.APIReader, f.Rec, bucketaccess.Config{Stores: clients, Namespaces: namespaces, StoreChecks: f.StoreChecks})
	storeKey := types.NamespacedName{Name: storagetest.Store}
	bucketKey := types.NamespacedName{Namespace: storagetest.NS, Name: "assets"}
	accessKey := types.NamespacedName{Namespace: storagetest.NS, Name: storagetest.AccessName}
	reconcileAll := func() {
		_, err := objectStores.Reconcile(ctx, ctrl.Request{NamespacedName: storeKey})
		g.Expect(err).NotTo(HaveOccurred())
		schedule.CheckNow(bucketKey)
		_, err = buckets.Reconcile(ctx, ctrl.Request{NamespacedName: bucketKey})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = accesses.Reconcile(ctx, ctrl.Request{NamespacedName: accessKey})
		g.Expect(err).NotTo(HaveOccurred())
	}
	// The bucket, once created, is tagged as this StorageBucket's.
	f.S3.OwnerTag = s3.Owner{UID: storagetest.BucketUID, Namespace: storagetest.NS, NamespaceUID: storagetest.NSUID}

	reconcileAll()
	a := storagetest.Access()
	g.Expect(f.Read(g, a)).To(BeTrue())
	g.Expect(conditions.Get(a.Status.Conditions, conditions.Ready).Reason).To(Equal(bucketaccess.ReasonGranted), "all three in place: %v", f.API.Writes())
	f.API.ForgetWrites()
	f.S3.Exists = true

	reconcileAll()
	g.Expect(f.API.Writes()).To(BeEmpty())
	g.Expect(f.S3.Calls[len(f.S3.Calls)-3:]).To(Equal([]string{"Ping", "BucketExists", "Policy"}),
		"one request per check: the store's, the bucket's, the grant's")
}

// TestCABundleInTheSecretFollowsTheStore: a store's CA bundle is in its
// BucketAccess Secret as ca.crt; checked again with the same bundle,
// nothing is written; without caBundleRef any more, ca.crt leaves the
// Secret, so an app does not keep trusting a CA the platform team took
// back.
func TestCABundleInTheSecretFollowsTheStore(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	ca, err := testenv.NewTestCA("test CA")
	g.Expect(err).NotTo(HaveOccurred())
	newStore := storagetest.ReadyStore(true)
	newStore.Finalizers, newStore.Status = nil, storagev1.ObjectStoreStatus{}
	newStore.Spec.Endpoint = httpsEndpoint
	newStore.Spec.CABundleRef = storagev1.CABundleReference{Kind: storagev1.CABundleConfigMap, Name: "ca", Key: "ca.crt"}
	bundle := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: storagetest.ManagerNS, Name: "ca"}, Data: map[string]string{"ca.crt": string(ca.PEM)}}
	f := storagetest.NewFixture(storagetest.OpenNamespace(), storagetest.StoreCredentials(), bundle, newStore, storagetest.Bucket(), storagetest.Access())
	clients, namespaces, schedule := f.Stores(), stores.NewNamespaceLabels(f.API.APIReader), storagebucket.NewSchedule()
	objectStores := objectstore.New(f.C, f.Rec, clients, nil, nil, false)
	buckets := storagebucket.New(f.C, f.Rec, storagebucket.Config{Stores: clients, Namespaces: namespaces, Schedule: schedule,
		StoreChecks: f.StoreChecks, AccessEvents: make(chan event.TypedGenericEvent[*storagev1.BucketAccess], 10)})
	accesses := bucketaccess.New(f.C, f.API.APIReader, f.Rec, bucketaccess.Config{Stores: clients, Namespaces: namespaces, StoreChecks: f.StoreChecks})
	bucketKey := types.NamespacedName{Namespace: storagetest.NS, Name: "assets"}
	reconcileAll := func() {
		_, err := objectStores.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: storagetest.Store}})
		g.Expect(err).NotTo(HaveOccurred())
		schedule.CheckNow(bucketKey)
		_, err = buckets.Reconcile(ctx, ctrl.Request{NamespacedName: bucketKey})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = accesses.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: storagetest.NS, Name: storagetest.AccessName}})
		g.Expect(err).NotTo(HaveOccurred())
	}
	f.S3.OwnerTag = s3.Owner{UID: storagetest.BucketUID, Namespace: storagetest.NS, NamespaceUID: storagetest.NSUID}
	secret := func() map[string][]byte {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: storagetest.NS, Name: storagetest.Access().Spec.SecretName}}
		g.Expect(f.Read(g, s)).To(BeTrue())
		return s.Data
	}

	reconcileAll()
	g.Expect(secret()).To(HaveKeyWithValue("ca.crt", ca.PEM))
	f.API.ForgetWrites()
	f.S3.Exists = true
	reconcileAll()
	g.Expect(f.API.Writes()).To(BeEmpty(), "the same bundle writes nothing")

	store := &storagev1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: storagetest.Store}}
	g.Expect(f.Read(g, store)).To(BeTrue())
	store.Spec.CABundleRef = storagev1.CABundleReference{}
	store.Generation++
	g.Expect(f.C.Update(ctx, store)).To(Succeed())
	reconcileAll()
	g.Expect(secret()).NotTo(HaveKey("ca.crt"), "no bundle, no ca.crt")
	g.Expect(secret()).To(HaveKey("AWS_SECRET_ACCESS_KEY"), "the rest stays")
}
