package storage

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/s3"
)

// The bucket attacks of a namespace editor: a derived bucket name another
// namespace would derive.

// TestCollidingDerivedNamesStayApart: acme/dev-data and acme-dev/data used
// to derive the same bucket name. Now each gets its own, and namespace acme
// cannot name acme-dev's bucket first either.
func TestCollidingDerivedNamesStayApart(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	store := ensureStore(g)
	acme := fmt.Sprintf("acme%d", nsCounter.Add(1))
	acmeDev := acme + "-dev"
	for _, n := range []string{acme, acmeDev} {
		g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})).To(Succeed())
	}
	alice := editorOf(t, "alice-"+acme, acme)
	theirs := s3.DeriveBucketName(acmeDev, "data")
	g.Expect(theirs).To(HavePrefix(acmeDev + "-data--"))

	// acme tries to take acme-dev's derived name first, by naming it.
	squat := newBucket(acme, "squat", store)
	squat.Spec.BucketName = theirs
	g.Expect(alice.Create(ctx, squat)).To(Succeed())
	got := eventuallyReason(g, acme, "squat", ReasonBucketNameNotAllowed)
	g.Expect(got.Status.Claim).To(BeEmpty())

	g.Expect(alice.Create(ctx, newBucket(acme, "dev-data", store))).To(Succeed())
	g.Expect(k8s.Create(ctx, newBucket(acmeDev, "data", store))).To(Succeed())
	mine := eventuallyReason(g, acme, "dev-data", ReasonHealthy)
	other := eventuallyReason(g, acmeDev, "data", ReasonHealthy)
	g.Expect(mine.Status.BucketName).To(Equal(acme + "-dev-data"))
	g.Expect(other.Status.BucketName).To(Equal(theirs))
	c := direct(g)
	for _, b := range []*storagev1.StorageBucket{mine, other} {
		owner, err := c.Owner(ctx, b.Status.BucketName)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(owner).To(Equal(s3.Owner{UID: string(b.UID), Namespace: b.Namespace}), "each its own bucket")
	}

	for _, b := range []struct{ ns, name string }{{acme, "squat"}, {acme, "dev-data"}, {acmeDev, "data"}} {
		deleteBucket(g, b.ns, b.name)
	}
}
