package bucket

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/minio/minio-go/v7"
	. "github.com/onsi/gomega"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/storage/storagetest"
	"github.com/trellis-dev/trellis/internal/s3"
)

var (
	errTaken   = minio.ErrorResponse{Code: "BucketAlreadyExists", StatusCode: 409}
	errBadName = minio.ErrorResponse{Code: "InvalidBucketName", StatusCode: 400}
)

const (
	testUID    = "uid-mine"
	otherUID   = "uid-theirs"
	testBucket = "team-assets"
	testNS     = storagetest.NS
	testNSUID  = "ns-uid-team"
	otherNS    = "team-b"
)

var (
	mine     = s3.Owner{UID: testUID, Namespace: testNS, NamespaceUID: testNSUID}
	theirs   = s3.Owner{UID: otherUID, Namespace: otherNS, NamespaceUID: "ns-uid-team-b"}
	keptByUs = s3.Owner{UID: otherUID, Namespace: testNS, NamespaceUID: testNSUID}
	// keptByEarlier was kept for a namespace of this name that was deleted:
	// this one was made again under the name.
	keptByEarlier = s3.Owner{UID: otherUID, Namespace: testNS, NamespaceUID: "ns-uid-earlier"}
	// keptByName was kept by a Trellis that recorded the namespace's name only.
	keptByName = s3.Owner{UID: otherUID, Namespace: testNS}
	errNotImpl = minio.ErrorResponse{Code: "NotImplemented", StatusCode: 501}
)

// TestBucketCheck drives every exit of one check with a fake store.
func TestBucketCheck(t *testing.T) {
	cases := map[string]struct {
		reason string // why this case exists
		s3     storagetest.FakeS3
		claim  storagev1.BucketClaim
		adopt  bool
		// mayAdopt and foreign: the store lets the namespace adopt; the name
		// is outside the namespace's own.
		mayAdopt, foreign bool
		probe             bool
		// intentErr makes recording the intent to create fail.
		intentErr error
		// nsErr makes reading the namespace's UID fail.
		nsErr error

		wantErr      bool
		wantProgress conditions.Progress
		wantReason   string
		wantClaim    storagev1.BucketClaim
		wantEvent    string
		wantIntent   bool
		wantDown     bool
		wantCalls    []string
		// wantTagged is what SetOwner wrote, when it was called.
		wantTagged s3.Owner
		wantMsg    string
		// notMsg must not be in the message ("" to skip).
		notMsg string
	}{
		"claimed and there": {
			reason: "a claimed bucket costs exactly one HeadBucket",
			s3:     storagetest.FakeS3{Exists: true}, claim: storagev1.BucketClaimed,
			wantProgress: conditions.Done, wantReason: ReasonHealthy, wantCalls: []string{"BucketExists"},
		},
		"claimed, there, probed": {
			reason: "the probe is the only other request",
			s3:     storagetest.FakeS3{Exists: true}, claim: storagev1.BucketClaimed, probe: true,
			wantProgress: conditions.Done, wantReason: ReasonHealthy, wantCalls: []string{"BucketExists", "Probe"},
		},
		"store down on HeadBucket": {
			reason: "the store-level check takes over",
			s3:     storagetest.FakeS3{ExistsErr: storagetest.ErrDown}, claim: storagev1.BucketClaimed,
			wantProgress: conditions.Working, wantReason: string(s3.ReasonStoreUnreachable), wantDown: true, wantCalls: []string{"BucketExists"},
		},
		"credentials refused": {
			reason:       "only a person can fix keys",
			s3:           storagetest.FakeS3{ExistsErr: storagetest.ErrDenied},
			wantProgress: conditions.Blocked, wantReason: string(s3.ReasonAccessDenied), wantCalls: []string{"BucketExists"},
		},
		"missing: intent, create, tag": {
			reason:       "the intent is on record before the bucket exists",
			s3:           storagetest.FakeS3{},
			wantProgress: conditions.Done, wantReason: ReasonHealthy, wantClaim: storagev1.BucketClaimed, wantEvent: "BucketCreated", wantIntent: true,
			wantCalls: []string{"BucketExists", "CreateBucket", "SetOwner"}, wantTagged: mine,
		},
		"missing, intent already recorded": {
			reason: "a second attempt does not write the intent again",
			s3:     storagetest.FakeS3{}, claim: storagev1.BucketCreating,
			wantProgress: conditions.Done, wantReason: ReasonHealthy, wantClaim: storagev1.BucketClaimed, wantEvent: "BucketCreated",
			wantCalls: []string{"BucketExists", "CreateBucket", "SetOwner"},
		},
		"missing, intent cannot be recorded": {
			reason: "no bucket is created without the intent on record",
			s3:     storagetest.FakeS3{}, intentErr: errors.New("etcd timeout"),
			wantErr: true, wantIntent: true, wantCalls: []string{"BucketExists"},
		},
		"missing, name taken by another account": {
			reason:       "a name someone else holds needs a person",
			s3:           storagetest.FakeS3{CreateErr: errTaken},
			wantProgress: conditions.Blocked, wantReason: string(s3.ReasonBucketNameTaken), wantIntent: true, wantCalls: []string{"BucketExists", "CreateBucket"},
		},
		"missing, name refused": {
			s3:           storagetest.FakeS3{CreateErr: errBadName},
			wantProgress: conditions.Blocked, wantReason: string(s3.ReasonInvalidBucketName), wantIntent: true, wantCalls: []string{"BucketExists", "CreateBucket"},
		},
		"created, tagging failed": {
			reason:       "the crash window: created but not tagged; the intent stays on record",
			s3:           storagetest.FakeS3{SetOwnerErr: storagetest.ErrDown},
			wantProgress: conditions.Working, wantReason: string(s3.ReasonStoreUnreachable), wantIntent: true, wantDown: true,
			wantCalls: []string{"BucketExists", "CreateBucket", "SetOwner"},
		},
		"created earlier, untagged, intent on record": {
			reason: "the next check after the crash window claims it",
			s3:     storagetest.FakeS3{Exists: true}, claim: storagev1.BucketCreating,
			wantProgress: conditions.Done, wantReason: ReasonHealthy, wantClaim: storagev1.BucketClaimed, wantEvent: "BucketCreated",
			wantCalls: []string{"BucketExists", "Owner", "SetOwner"},
		},
		"created earlier, untagged, tagging fails again": {
			s3: storagetest.FakeS3{Exists: true, SetOwnerErr: storagetest.ErrDown}, claim: storagev1.BucketCreating,
			wantProgress: conditions.Working, wantReason: string(s3.ReasonStoreUnreachable), wantDown: true,
			wantCalls: []string{"BucketExists", "Owner", "SetOwner"},
		},
		"intent on record, but someone else's tag": {
			reason: "the intent never overrides another owner",
			s3:     storagetest.FakeS3{Exists: true, OwnerTag: theirs}, claim: storagev1.BucketCreating,
			wantProgress: conditions.Blocked, wantReason: ReasonConflict, wantCalls: []string{"BucketExists", "Owner"},
		},
		"recreated after it vanished": {
			s3: storagetest.FakeS3{}, claim: storagev1.BucketClaimed,
			wantProgress: conditions.Done, wantReason: ReasonHealthy, wantClaim: storagev1.BucketClaimed, wantEvent: "BucketRecreated", wantIntent: true,
			wantCalls: []string{"BucketExists", "CreateBucket", "SetOwner"}, wantTagged: mine,
		},
		"exists, tagged with our UID": {
			reason:       "status lost, tag says it is ours",
			s3:           storagetest.FakeS3{Exists: true, OwnerTag: mine},
			wantProgress: conditions.Done, wantReason: ReasonHealthy, wantClaim: storagev1.BucketClaimed, wantCalls: []string{"BucketExists", "Owner"},
		},
		"exists, tagged with our UID before namespaces were": {
			reason:       "the namespace tag is added, so the bucket can be taken back if kept",
			s3:           storagetest.FakeS3{Exists: true, OwnerTag: s3.Owner{UID: testUID}},
			wantProgress: conditions.Done, wantReason: ReasonHealthy, wantClaim: storagev1.BucketClaimed,
			wantCalls: []string{"BucketExists", "Owner", "SetOwner"}, wantTagged: mine,
		},
		"exists, tagged with our UID before namespace UIDs were": {
			reason:       "the namespace UID tag is added, so only this namespace takes it back if kept",
			s3:           storagetest.FakeS3{Exists: true, OwnerTag: s3.Owner{UID: testUID, Namespace: testNS}},
			wantProgress: conditions.Done, wantReason: ReasonHealthy, wantClaim: storagev1.BucketClaimed,
			wantCalls: []string{"BucketExists", "Owner", "SetOwner"}, wantTagged: mine,
		},
		"namespace UID unreadable": {
			reason: "an API error: nothing is asked of the store that needs it, nothing is created",
			s3:     storagetest.FakeS3{}, nsErr: errors.New("the API server is away"),
			wantErr: true, wantCalls: []string{"BucketExists"},
		},
		"namespace UID unreadable, the bucket there": {
			reason: "an API error: whose the bucket is is not judged without it",
			s3:     storagetest.FakeS3{Exists: true, OwnerTag: keptByUs}, adopt: true, nsErr: errors.New("the API server is away"),
			wantErr: true, wantCalls: []string{"BucketExists"},
		},
		"exists, untagged, not ours": {
			s3:           storagetest.FakeS3{Exists: true},
			wantProgress: conditions.Blocked, wantReason: ReasonConflict, wantCalls: []string{"BucketExists", "Owner"},
			notMsg: "kept for namespace",
		},
		"exists, another namespace's, adopted where the store allows": {
			s3: storagetest.FakeS3{Exists: true, OwnerTag: theirs}, adopt: true, mayAdopt: true,
			wantProgress: conditions.Done, wantReason: ReasonHealthy, wantClaim: storagev1.BucketClaimed, wantEvent: "BucketAdopted",
			wantCalls: []string{"BucketExists", "Owner", "SetOwner"}, wantTagged: mine,
		},
		"exists, another namespace's, adoption not allowed": {
			reason: "team B cannot take team A's kept bucket: untouched",
			s3:     storagetest.FakeS3{Exists: true, OwnerTag: theirs}, adopt: true,
			wantProgress: conditions.Blocked, wantReason: ReasonAdoptionNotAllowed, wantCalls: []string{"BucketExists", "Owner"},
			wantMsg: "does not let this namespace adopt",
		},
		"exists, made outside Trellis, adoption not allowed": {
			s3: storagetest.FakeS3{Exists: true}, adopt: true,
			wantProgress: conditions.Blocked, wantReason: ReasonAdoptionNotAllowed, wantCalls: []string{"BucketExists", "Owner"},
		},
		"exists, kept by this namespace, taken back": {
			reason: "a team takes back its own retained bucket without the store's leave",
			s3:     storagetest.FakeS3{Exists: true, OwnerTag: keptByUs}, adopt: true,
			wantProgress: conditions.Done, wantReason: ReasonHealthy, wantClaim: storagev1.BucketClaimed, wantEvent: "BucketAdopted",
			wantCalls: []string{"BucketExists", "Owner", "SetOwner"}, wantTagged: mine,
		},
		"exists, kept by this namespace, under a foreign name, taken back": {
			s3: storagetest.FakeS3{Exists: true, OwnerTag: keptByUs}, adopt: true, foreign: true,
			wantProgress: conditions.Done, wantReason: ReasonHealthy, wantClaim: storagev1.BucketClaimed, wantEvent: "BucketAdopted",
			wantCalls: []string{"BucketExists", "Owner", "SetOwner"}, wantTagged: mine,
		},
		"exists, kept by an earlier namespace of this name, not taken": {
			reason: "a namespace deleted and made again under the name is another: the store's leave is needed",
			s3:     storagetest.FakeS3{Exists: true, OwnerTag: keptByEarlier}, adopt: true,
			wantProgress: conditions.Blocked, wantReason: ReasonAdoptionNotAllowed, wantCalls: []string{"BucketExists", "Owner"},
			wantMsg: "No StorageBucket claims it: it was kept for an earlier namespace named team (its tags trellis.dev/owner-namespace=team, " +
				"trellis.dev/owner-namespace-uid=ns-uid-earlier, trellis.dev/owner-uid=uid-theirs), not this one (UID ns-uid-team): " +
				"a namespace made again under a name does not take what the earlier one kept. " +
				"The platform team can let namespace team adopt it (ObjectStore store-a's adoptionNamespaceSelector), " +
				"or hand it over by setting its tag trellis.dev/owner-namespace-uid to ns-uid-team",
		},
		"exists, kept by an earlier namespace of this name, not asked": {
			s3:           storagetest.FakeS3{Exists: true, OwnerTag: keptByEarlier},
			wantProgress: conditions.Blocked, wantReason: ReasonConflict, wantCalls: []string{"BucketExists", "Owner"},
			wantMsg: "does not let this namespace adopt buckets. No StorageBucket claims it: it was kept for an earlier namespace named team",
			notMsg:  "take it back",
		},
		"exists, kept by an earlier namespace of this name, adopted with the store's leave": {
			s3: storagetest.FakeS3{Exists: true, OwnerTag: keptByEarlier}, adopt: true, mayAdopt: true,
			wantProgress: conditions.Done, wantReason: ReasonHealthy, wantClaim: storagev1.BucketClaimed, wantEvent: "BucketAdopted",
			wantCalls: []string{"BucketExists", "Owner", "SetOwner"}, wantTagged: mine,
		},
		"exists, kept for this name before namespace UIDs were recorded, not taken": {
			reason: "a name alone cannot tell this namespace from an earlier one: the store's leave is needed",
			s3:     storagetest.FakeS3{Exists: true, OwnerTag: keptByName}, adopt: true,
			wantProgress: conditions.Blocked, wantReason: ReasonAdoptionNotAllowed, wantCalls: []string{"BucketExists", "Owner"},
			wantMsg: "it was kept for a namespace named team by a Trellis that did not record namespace UIDs (its tags trellis.dev/owner-namespace=team, " +
				"trellis.dev/owner-uid=uid-theirs), so it cannot be told from this one (UID ns-uid-team)",
		},
		"exists, kept for another namespace before namespace UIDs were recorded": {
			s3:           storagetest.FakeS3{Exists: true, OwnerTag: s3.Owner{UID: otherUID, Namespace: otherNS}},
			wantProgress: conditions.Blocked, wantReason: ReasonConflict, wantCalls: []string{"BucketExists", "Owner"},
			wantMsg: "It was tagged by a Trellis that did not record namespace UIDs, so no namespace takes it back without the store's leave.",
		},
		"exists, kept by this namespace, not asked to adopt": {
			s3:           storagetest.FakeS3{Exists: true, OwnerTag: keptByUs},
			wantProgress: conditions.Blocked, wantReason: ReasonConflict, wantCalls: []string{"BucketExists", "Owner"},
			wantMsg: "set adoptExisting: true to take it back", notMsg: "kept for namespace",
		},
		"exists, another namespace's, not asked, not allowed": {
			s3:           storagetest.FakeS3{Exists: true, OwnerTag: theirs},
			wantProgress: conditions.Blocked, wantReason: ReasonConflict, wantCalls: []string{"BucketExists", "Owner"},
			wantMsg: "does not let this namespace adopt",
		},
		"exists, kept for another namespace: says so, and who can change it": {
			reason:       "no StorageBucket claims it (that was checked first): its tags tell whose it is",
			s3:           storagetest.FakeS3{Exists: true, OwnerTag: theirs},
			wantProgress: conditions.Blocked, wantReason: ReasonConflict, wantCalls: []string{"BucketExists", "Owner"},
			wantMsg: "No StorageBucket claims it: it was kept for namespace team-b after its StorageBucket was deleted (deletionPolicy: Retain; " +
				"its tags trellis.dev/owner-namespace=team-b, trellis.dev/owner-namespace-uid=ns-uid-team-b, trellis.dev/owner-uid=uid-theirs). " +
				"Namespace team-b can take it back with a StorageBucket naming it (bucketName: team-assets) and adoptExisting: true. " +
				"The platform team can let namespace team adopt it (ObjectStore store-a's adoptionNamespaceSelector), " +
				"hand it over by setting its tags trellis.dev/owner-namespace to team and trellis.dev/owner-namespace-uid to ns-uid-team, " +
				"or release it by removing its ownership tags",
		},
		"exists, kept for another namespace, adoption refused: says so too": {
			s3: storagetest.FakeS3{Exists: true, OwnerTag: theirs}, adopt: true,
			wantProgress: conditions.Blocked, wantReason: ReasonAdoptionNotAllowed, wantCalls: []string{"BucketExists", "Owner"},
			wantMsg: "so it is left untouched. No StorageBucket claims it: it was kept for namespace team-b",
		},
		"exists, another namespace's, not asked, allowed": {
			s3: storagetest.FakeS3{Exists: true, OwnerTag: theirs}, mayAdopt: true,
			wantProgress: conditions.Blocked, wantReason: ReasonConflict, wantCalls: []string{"BucketExists", "Owner"},
			wantMsg: "set adoptExisting: true to take it over",
		},
		"missing, a foreign name, not allowed": {
			reason: "no bucket is made under another namespace's names, and no intent recorded",
			s3:     storagetest.FakeS3{}, foreign: true,
			wantProgress: conditions.Blocked, wantReason: ReasonBucketNameNotAllowed, wantCalls: []string{"BucketExists"},
			wantMsg: "name the bucket team-",
		},
		"missing, a foreign name, allowed": {
			s3: storagetest.FakeS3{}, foreign: true, mayAdopt: true,
			wantProgress: conditions.Done, wantReason: ReasonHealthy, wantClaim: storagev1.BucketClaimed, wantEvent: "BucketCreated", wantIntent: true,
			wantCalls: []string{"BucketExists", "CreateBucket", "SetOwner"}, wantTagged: mine,
		},
		"adoption fails to tag": {
			s3: storagetest.FakeS3{Exists: true, SetOwnerErr: storagetest.ErrDenied}, adopt: true, mayAdopt: true,
			wantProgress: conditions.Blocked, wantReason: string(s3.ReasonAccessDenied), wantCalls: []string{"BucketExists", "Owner", "SetOwner"},
		},
		"owner unreadable": {
			s3:           storagetest.FakeS3{Exists: true, OwnerErr: storagetest.ErrDown},
			wantProgress: conditions.Working, wantReason: string(s3.ReasonStoreUnreachable), wantDown: true, wantCalls: []string{"BucketExists", "Owner"},
		},
		"probe fails after a claim": {
			reason: "the claim is still recorded when the probe fails",
			s3:     storagetest.FakeS3{Exists: true, OwnerTag: mine, ProbeErr: &s3.ProbeError{Step: "writing", Err: errors.New("quota")}}, probe: true,
			wantProgress: conditions.Working, wantReason: string(s3.ReasonProbeFailed), wantClaim: storagev1.BucketClaimed,
			wantCalls: []string{"BucketExists", "Owner", "Probe"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			fake := tc.s3
			intent := false
			check := bucketCheck{s3: &fake, store: "store-a", bucket: testBucket, owner: s3.Owner{UID: testUID, Namespace: testNS}, claim: tc.claim,
				adopt: tc.adopt, mayAdopt: tc.mayAdopt, foreignName: tc.foreign, probe: tc.probe,
				namespaceUID: func(context.Context) (string, error) { return testNSUID, tc.nsErr },
				recordIntent: func(context.Context) error { intent = true; return tc.intentErr }}

			res, err := check.run(context.Background())

			g.Expect(fake.Calls).To(Equal(tc.wantCalls), tc.reason)
			g.Expect(intent).To(Equal(tc.wantIntent), "intent recorded: %s", tc.reason)
			if tc.wantErr {
				g.Expect(err).To(HaveOccurred())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.summary.Progress).To(Equal(tc.wantProgress), tc.reason)
			g.Expect(res.summary.Reason).To(Equal(tc.wantReason), tc.reason)
			g.Expect(res.summary.Message).NotTo(BeEmpty())
			g.Expect(res.summary.Message).To(ContainSubstring(tc.wantMsg))
			if tc.notMsg != "" {
				g.Expect(res.summary.Message).NotTo(ContainSubstring(tc.notMsg))
			}
			if slices.Contains(tc.wantCalls, "SetOwner") && tc.wantTagged != (s3.Owner{}) {
				g.Expect(fake.SetOwnerTo).To(Equal(tc.wantTagged), "every tag, this StorageBucket's")
			}
			g.Expect(res.claim).To(Equal(tc.wantClaim), tc.reason)
			g.Expect(res.storeDown).To(Equal(tc.wantDown), tc.reason)
			if tc.wantEvent == "" {
				g.Expect(res.event).To(BeNil())
			} else {
				g.Expect(res.event).NotTo(BeNil())
				g.Expect(res.event.reason).To(Equal(tc.wantEvent))
			}
		})
	}
}

// TestBucketDeletion drives every exit of a deletion with a fake store.
func TestBucketDeletion(t *testing.T) {
	cases := map[string]struct {
		reason string
		s3     storagetest.FakeS3
		claim  storagev1.BucketClaim

		wantDone, wantDeleted bool
		wantProgress          conditions.Progress
		wantReason            string
		wantCalls             []string
	}{
		"gone already": {
			s3: storagetest.FakeS3{}, claim: storagev1.BucketClaimed, wantDone: true, wantCalls: []string{"BucketExists"},
		},
		"ours and empty": {
			s3: storagetest.FakeS3{Exists: true, OwnerTag: mine}, claim: storagev1.BucketClaimed,
			wantDone: true, wantDeleted: true, wantCalls: []string{"BucketExists", "Owner", "CountObjects", "DeleteBucket"},
		},
		"created untagged, then deleted": {
			reason: "the crash window: the intent says it is ours",
			s3:     storagetest.FakeS3{Exists: true}, claim: storagev1.BucketCreating,
			wantDone: true, wantDeleted: true, wantCalls: []string{"BucketExists", "Owner", "CountObjects", "DeleteBucket"},
		},
		"someone else's": {
			reason: "never delete what is not ours",
			s3:     storagetest.FakeS3{Exists: true, OwnerTag: theirs}, claim: storagev1.BucketClaimed,
			wantDone: true, wantCalls: []string{"BucketExists", "Owner"},
		},
		"kept by this namespace, but another StorageBucket's": {
			reason: "the namespace tag allows taking back, never deleting",
			s3:     storagetest.FakeS3{Exists: true, OwnerTag: keptByUs}, claim: storagev1.BucketClaimed,
			wantDone: true, wantCalls: []string{"BucketExists", "Owner"},
		},
		"untagged and no intent": {
			s3: storagetest.FakeS3{Exists: true}, claim: storagev1.BucketClaimed,
			wantDone: true, wantCalls: []string{"BucketExists", "Owner"},
		},
		"not empty": {
			reason: "data is never lost: a person decides",
			s3:     storagetest.FakeS3{Exists: true, OwnerTag: mine, Objects: 3}, claim: storagev1.BucketClaimed,
			wantProgress: conditions.Blocked, wantReason: ReasonDeleteBlocked, wantCalls: []string{"BucketExists", "Owner", "CountObjects"},
		},
		"store down": {
			s3: storagetest.FakeS3{ExistsErr: storagetest.ErrDown}, claim: storagev1.BucketClaimed,
			wantProgress: conditions.Working, wantReason: string(s3.ReasonStoreUnreachable), wantCalls: []string{"BucketExists"},
		},
		"owner unreadable": {
			s3: storagetest.FakeS3{Exists: true, OwnerErr: storagetest.ErrDenied}, claim: storagev1.BucketClaimed,
			wantProgress: conditions.Blocked, wantReason: string(s3.ReasonAccessDenied), wantCalls: []string{"BucketExists", "Owner"},
		},
		"cannot list": {
			s3: storagetest.FakeS3{Exists: true, OwnerTag: mine, CountErr: storagetest.ErrDown}, claim: storagev1.BucketClaimed,
			wantProgress: conditions.Working, wantReason: string(s3.ReasonStoreUnreachable), wantCalls: []string{"BucketExists", "Owner", "CountObjects"},
		},
		"delete refused": {
			s3: storagetest.FakeS3{Exists: true, OwnerTag: mine, DeleteErr: storagetest.ErrDenied}, claim: storagev1.BucketClaimed,
			wantProgress: conditions.Blocked, wantReason: string(s3.ReasonAccessDenied), wantCalls: []string{"BucketExists", "Owner", "CountObjects", "DeleteBucket"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			fake := tc.s3
			res := bucketDeletion{s3: &fake, store: "store-a", bucket: testBucket, uid: testUID, claim: tc.claim}.run(context.Background())

			g.Expect(fake.Calls).To(Equal(tc.wantCalls), tc.reason)
			g.Expect(res.done).To(Equal(tc.wantDone), tc.reason)
			g.Expect(res.deleted).To(Equal(tc.wantDeleted), tc.reason)
			if tc.wantDone {
				return
			}
			g.Expect(res.summary.Progress).To(Equal(tc.wantProgress), tc.reason)
			g.Expect(res.summary.Reason).To(Equal(tc.wantReason), tc.reason)
			g.Expect(res.summary.Message).To(ContainSubstring("deletionPolicy: Retain"), "the way out is named")
			g.Expect(res.retry).To(BeNumerically(">", 0))
		})
	}
}
