package access

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/controller/storage/storagetest"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/s3"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// TestLiveGrants: the grants that may stand in a bucket's policy are those
// of the bucket's BucketAccesses in the cache, found by what their status
// records or by their StorageBucket's claim (before their first status
// write), each naming every key its access may have granted.
func TestLiveGrants(t *testing.T) {
	g := NewWithT(t)
	store := storagetest.ReadyStore(true)
	// Recorded: current key V2, V1 retiring, V3 asked for (being issued).
	recorded := storagetest.GrantedAccess()
	recorded.Spec.KeyVersion = 3
	recorded.Status.AccessKeyID = stores.AccountName(rtStoreUID, recorded.UID, 2)
	recorded.Status.RetiringKeys = []storagev1.RetiringKey{storagetest.Retiring(stores.AccountName(rtStoreUID, recorded.UID, 1), syncNow)}
	// New: nothing on record yet; its StorageBucket claims the bucket.
	fresh := storagetest.Access()
	fresh.Name, fresh.UID, fresh.Spec.Mode = "fresh", "uid-fresh", storagev1.AccessReadOnly
	// Leaving: being deleted, its grant still its own to take out.
	leaving := storagetest.Deleting(storagetest.AccessWithUID("leaving", "uid-leaving")).(*storagev1.BucketAccess)
	// Of another bucket, in another namespace, and of another store.
	other := storagetest.AccessWithUID("other", "uid-other")
	other.Spec.BucketRef.Name, other.Status.BucketName = "elsewhere", "team-a-elsewhere"
	theirs := storagetest.AccessWithUID("theirs", "uid-theirs")
	theirs.Namespace = "team-b"
	theirs.Status.StoreName, theirs.Status.BucketName = "", ""
	moved := storagetest.AccessWithUID("moved", "uid-moved")
	moved.Status.StoreName = "store-b"
	moved.Spec.BucketRef.Name = "gone"
	f := newFixture(storagetest.OpenNamespace(), store, storagetest.ClaimedBucket(), recorded, fresh, leaving, other, theirs, moved)

	got, err := stores.LiveGrants(context.Background(), f.C, f.Accounts.KnownPrincipal, store, testBucket)
	g.Expect(err).NotTo(HaveOccurred())
	byName := map[string]s3.Grant{}
	for _, lg := range got {
		byName[lg.Access.Name] = lg.Grant
		g.Expect(lg.Access.Namespace).To(Equal(testNS))
	}
	g.Expect(byName).To(HaveLen(3), "the bucket's three accesses, no other")
	key := func(uid types.UID, v int32) string { return stores.AccountName(rtStoreUID, uid, v) }
	g.Expect(byName[rtAccess]).To(Equal(s3.Grant{ID: stores.GrantID(recorded.UID), Mode: s3.ReadWrite,
		Principals: []string{key(recorded.UID, 3), key(recorded.UID, 2), key(recorded.UID, 1)}}))
	g.Expect(byName["fresh"]).To(Equal(s3.Grant{ID: stores.GrantID("uid-fresh"), Mode: s3.ReadOnly,
		Principals: []string{key("uid-fresh", 1)}}), "found by its StorageBucket's claim; the key of its keyVersion")
	g.Expect(byName["leaving"].Principals).To(ContainElement(key("uid-leaving", 1)))

	// On an IAM store, a key issued and granted but not yet on record is
	// named by the ARN its driver learnt as it made the user: another
	// writer of the policy in that moment keeps its grant.
	f.Accounts.IAM = true
	_, err = f.Accounts.IssueKey(context.Background(), key("uid-fresh", 1))
	g.Expect(err).NotTo(HaveOccurred())
	got, err = stores.LiveGrants(context.Background(), f.C, f.Accounts.KnownPrincipal, store, testBucket)
	g.Expect(err).NotTo(HaveOccurred())
	for _, lg := range got {
		if lg.Access.Name == "fresh" {
			g.Expect(lg.Principals).To(ContainElement(storagetest.IAMARN(key("uid-fresh", 1))))
		}
	}

	// On a MinIO store no bucket policy statement grants an account: every
	// access's grant names no one, so a statement of its Sid goes.
	store.Spec.Type = storagev1.StoreTypeMinIO
	got, err = stores.LiveGrants(context.Background(), f.C, f.Accounts.KnownPrincipal, store, testBucket)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(HaveLen(3))
	for _, lg := range got {
		g.Expect(lg.Principals).To(BeEmpty(), lg.Access.Name)
	}
	store.Spec.Type = storagev1.StoreTypeVersitygw

	// The cache failing is an error, never "no grant is live".
	f.API.Fail(testenv.List, "BucketAccess", storagetest.ErrUnavailable)
	_, err = stores.LiveGrants(context.Background(), f.C, f.Accounts.KnownPrincipal, store, testBucket)
	g.Expect(err).To(HaveOccurred())
}
