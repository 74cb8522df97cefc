package access

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/outcome"
	"github.com/trellis-dev/trellis/internal/controller/storage/storagetest"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/s3"
)

// synced is the observation of a reconcile that brought the key in line.
func synced(res accessResult) *accessObservation { return &accessObservation{synced: &res} }

func TestComputeAccessStatus(t *testing.T) {
	g := NewWithT(t)
	a := &storagev1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Generation: 3},
		Spec: storagev1.BucketAccessSpec{KeyVersion: 2},
		Status: storagev1.BucketAccessStatus{StoreName: "s", BucketName: testBucket, AccessKeyID: keyV1, KeyVersion: 1,
			RetiringKeys: []storagev1.RetiringKey{storagetest.Retiring(keyV2, syncNow)}}}
	granted := conditions.Summary{Progress: conditions.Done, Reason: ReasonGranted, Message: "granted"}

	st := computeAccessStatus(a, synced(accessResult{summary: conditions.Summary{Progress: conditions.Working, Reason: string(s3.ReasonStoreUnreachable), Message: "down"}}), outcome.Outcome{})
	g.Expect(st.AccessKeyID).To(Equal(keyV1), "a failed reconcile records no key")
	g.Expect(st.KeyVersion).To(Equal(int32(1)))
	g.Expect(st.RetiringKeys).To(HaveLen(1), "nor forgets the keys to revoke")
	g.Expect(st.ObservedGeneration).To(Equal(int64(3)))
	g.Expect(conditions.IsTrue(st.Conditions, conditions.Reconciling)).To(BeTrue())

	st = computeAccessStatus(a, synced(accessResult{summary: granted, issued: &issuedKey{Key: stores.Key{AccessKeyID: keyV2}, secretKey: "x"},
		keysKnown: true, retiring: []storagev1.RetiringKey{storagetest.Retiring(keyV1, syncNow)}}), outcome.Outcome{})
	g.Expect(st.AccessKeyID).To(Equal(keyV2))
	g.Expect(st.KeyVersion).To(Equal(int32(2)))
	g.Expect(stores.KeyIDs(st.RetiringKeys)).To(Equal([]string{keyV1}))
	g.Expect(st.StoreName).To(Equal("s"))
	g.Expect(conditions.IsTrue(st.Conditions, conditions.Ready)).To(BeTrue())

	// An IAM store's key: its account and principal go on record with it,
	// for its revocation and its grant; a later key of versitygw's kind
	// (both its key id) leaves none of them behind.
	iamKey := stores.Key{AccessKeyID: "AKIASTOREMADE0001", Account: keyV2, Principal: storagetest.IAMARN(keyV2)}
	st = computeAccessStatus(a, synced(accessResult{summary: granted, issued: &issuedKey{Key: iamKey, secretKey: "x"}}), outcome.Outcome{})
	g.Expect([]string{st.AccessKeyID, st.Account, st.Principal}).To(Equal([]string{iamKey.AccessKeyID, keyV2, storagetest.IAMARN(keyV2)}))
	a.Status = st
	st = computeAccessStatus(a, synced(accessResult{summary: granted, issued: &issuedKey{Key: stores.Key{AccessKeyID: keyV3}, secretKey: "x"}}), outcome.Outcome{})
	g.Expect([]string{st.AccessKeyID, st.Account, st.Principal}).To(Equal([]string{keyV3, "", ""}))

	st = computeAccessStatus(a, synced(accessResult{summary: granted, keysKnown: true}), outcome.Outcome{})
	g.Expect(st.RetiringKeys).To(BeEmpty(), "revoked keys leave the record")
}

// TestComputeAccessStatusBeyondSync: the target put on record before any
// account, an error (ReconcileError, keeping the key on record), a
// revocation that waits, and a reconcile that observed nothing.
func TestComputeAccessStatusBeyondSync(t *testing.T) {
	g := NewWithT(t)
	a := &storagev1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Generation: 2},
		Spec:   storagev1.BucketAccessSpec{KeyVersion: 1, Mode: storagev1.AccessReadWrite},
		Status: storagev1.BucketAccessStatus{AccessKeyID: keyV1, KeyVersion: 1}}
	issuing := conditions.Summary{Progress: conditions.Working, Reason: ReasonIssuing, Message: "issuing"}

	g.Expect(computeAccessStatus(a, &accessObservation{}, outcome.Outcome{})).To(Equal(a.Status), "nothing observed, nothing changed")

	st := computeAccessStatus(a, &accessObservation{target: &accessTarget{store: "s", bucket: testBucket}, synced: &accessResult{summary: issuing}}, outcome.Outcome{})
	g.Expect([]string{st.StoreName, st.BucketName}).To(Equal([]string{"s", testBucket}))
	g.Expect(conditions.Get(st.Conditions, conditions.Ready).Reason).To(Equal(ReasonIssuing))

	failed := errors.New("applying Secret s: etcdserver: request timed out")
	st = computeAccessStatus(a, &accessObservation{synced: &accessResult{}}, outcome.Of(failed))
	g.Expect(st.AccessKeyID).To(Equal(keyV1))
	g.Expect(conditions.Get(st.Conditions, conditions.Ready).Reason).To(Equal(conditions.ReasonReconcileError))
	g.Expect(conditions.Get(st.Conditions, conditions.Ready).Message).To(Equal(failed.Error()))
	g.Expect(conditions.IsTrue(st.Conditions, conditions.Reconciling)).To(BeTrue())
	g.Expect(st.ObservedGeneration).To(Equal(int64(2)))

	revoking := conditions.Summary{Progress: conditions.Working, Reason: ReasonRevoking, Message: "store down"}
	st = computeAccessStatus(a, &accessObservation{waits: &revoking}, outcome.Outcome{})
	g.Expect(conditions.Get(st.Conditions, conditions.Ready).Reason).To(Equal(ReasonRevoking))
	g.Expect(st.AccessKeyID).To(Equal(keyV1))
}
