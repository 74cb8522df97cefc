package storage

import (
	"context"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	bucketaccess "github.com/trellis-dev/trellis/internal/controller/storage/access"
	storagebucket "github.com/trellis-dev/trellis/internal/controller/storage/bucket"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/s3"
)

// TestARecreatedAccessKeepsNoKeyOfTheOldOne: a key does not outlive its
// BucketAccess, attacked through a name reused. A namespace editor takes
// the finalizer off a BucketAccess, deletes it and makes one of the same
// name at once, before any sweep runs: the old key's account and grant
// belong to a UID that is gone, so the new access protects neither. The
// old key is refused and its account swept; the new key works.
func TestARecreatedAccessKeepsNoKeyOfTheOldOne(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	store := ensureStore(g)
	ns := newNamespace(t)
	editor := editorOf(t, "dev-"+ns, ns)
	g.Expect(editor.Create(ctx, newBucket(ns, "data", store))).To(Succeed())
	eventuallyReason(g, ns, "data", storagebucket.ReasonHealthy)
	bucket := ns + "-data"
	g.Expect(editor.Create(ctx, newAccess(ns, "app", "data", "app-1", storagev1.AccessReadWrite))).To(Succeed())
	old := eventuallyAccessReason(g, ns, "app", bucketaccess.ReasonGranted)
	oldKey := credsOf(g, ns, "app-1")
	g.Expect(oldKey.put(g, bucket, "before.txt")).To(Succeed())

	release := holdSweeps(t)
	g.Expect(editor.Patch(ctx, old, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))).To(Succeed())
	g.Expect(editor.Delete(ctx, old)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(old), &storagev1.BucketAccess{}))
	}, timeout, poll).Should(BeTrue())
	// The old Secret stays (envtest runs no garbage collector), so the new
	// access names another.
	g.Expect(editor.Create(ctx, newAccess(ns, "app", "data", "app-2", storagev1.AccessReadWrite))).To(Succeed())
	recreated := eventuallyAccessReason(g, ns, "app", bucketaccess.ReasonGranted)
	g.Expect(recreated.UID).NotTo(Equal(old.UID))
	newKey := credsOf(g, ns, "app-2")
	release()

	g.Eventually(func() int { return httpStatus(oldKey.put(g, bucket, "after.txt")) }, withinASweep, poll).
		Should(Equal(http.StatusForbidden), "the old access's key, whatever the name of the live one")
	g.Eventually(func() []string {
		return storeAccounts(g, stores.AccountPrefix(uidOf(g, store), old.UID))
	}, withinASweep, poll).Should(BeEmpty())
	statements := statementsOf(g, policyOf(g, bucket))
	g.Expect(statements).NotTo(HaveKey(s3.GrantSidPrefix + stores.GrantID(old.UID)))
	g.Expect(statements).To(HaveKey(s3.GrantSidPrefix + stores.GrantID(recreated.UID)))
	g.Expect(newKey.put(g, bucket, "new.txt")).To(Succeed())

	deleteAccess(g, ns, "app")
	g.Expect(k8s.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-1"}})).To(Succeed())
	deleteBucket(g, ns, "data")
}

// echoingAdmin is a store's admin API that refuses every request and
// answers with what it was sent as the error's code, as a store (or a proxy
// in front of it) may; it records the secret keys it was sent.
type echoingAdmin struct {
	mu      sync.Mutex
	secrets []string
}

func (e *echoingAdmin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var account struct {
		Secret string `xml:"Secret"`
	}
	if xml.Unmarshal(body, &account) == nil && account.Secret != "" {
		e.mu.Lock()
		e.secrets = append(e.secrets, account.Secret)
		e.mu.Unlock()
	}
	var code strings.Builder
	_ = xml.EscapeText(&code, body)
	w.WriteHeader(http.StatusBadRequest)
	_, _ = io.WriteString(w, "<Error><Code>"+code.String()+"</Code></Error>")
}

func (e *echoingAdmin) seen() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.secrets...)
}

// TestStoreAnswersPublishNoKey: the object store cannot get Trellis to
// publish a credential. Its admin API answers the creation of a
// BucketAccess's account with the request itself, the new secret key in
// it, as the error's code: neither the access's status nor its Events,
// which the namespace's viewers read (they cannot read its Secrets), may
// carry it.
func TestStoreAnswersPublishNoKey(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	admin := &echoingAdmin{}
	srv := httptest.NewServer(admin)
	defer srv.Close()
	store := newStore("echoing", credsSecret)
	store.Spec.Versitygw = &storagev1.VersitygwOptions{AdminEndpoint: srv.URL}
	g.Expect(k8s.Create(ctx, store)).To(Succeed())
	ns := newNamespace(t)
	g.Expect(k8s.Create(ctx, newBucket(ns, "data", store.Name))).To(Succeed())
	eventuallyReason(g, ns, "data", storagebucket.ReasonHealthy)
	g.Expect(k8s.Create(ctx, newAccess(ns, "app", "data", "app-creds", storagev1.AccessReadOnly))).To(Succeed())

	var secrets []string
	g.Eventually(func() []string { secrets = admin.seen(); return secrets }, timeout, poll).ShouldNot(BeEmpty())
	g.Eventually(func(g Gomega) {
		a := getAccess(g, ns, "app")
		g.Expect(a.Status.Conditions).NotTo(BeEmpty())
		g.Expect(a.Status.ObservedGeneration).To(Equal(a.Generation))
	}, timeout, poll).Should(Succeed())
	published := func(g Gomega) []string {
		a := getAccess(g, ns, "app")
		texts := []string{}
		for _, c := range a.Status.Conditions {
			texts = append(texts, c.Message)
		}
		events := &corev1.EventList{}
		g.Expect(k8s.List(ctx, events, client.InNamespace(ns))).To(Succeed())
		for _, e := range events.Items {
			texts = append(texts, e.Message)
		}
		return texts
	}
	g.Consistently(func(g Gomega) {
		for _, text := range published(g) {
			for _, secret := range admin.seen() {
				g.Expect(text).NotTo(ContainSubstring(secret))
			}
		}
	}, "3s", poll).Should(Succeed())

	g.Expect(k8s.Patch(ctx, getAccess(g, ns, "app"), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))).To(Succeed())
	deleteAccess(g, ns, "app")
	deleteBucket(g, ns, "data")
	g.Expect(k8s.Delete(ctx, store)).To(Succeed())
}
