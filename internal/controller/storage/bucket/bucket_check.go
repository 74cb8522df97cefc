package bucket

import (
	"context"
	"errors"
	"fmt"
	"time"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/s3"
)

// Reasons of a StorageBucket's conditions besides those of s3.Classify
// (StoreUnreachable, AccessDenied, BucketNameTaken, ...), as documented in
// docs/storage.md.
const (
	ReasonHealthy       = "Healthy"
	ReasonCreating      = "Creating"
	ReasonConflict      = "Conflict"
	ReasonDeleteBlocked = "DeleteBlocked"
	ReasonDeleting      = "Deleting"
	// ReasonAdoptionNotAllowed: the bucket exists, was not created for this
	// namespace, and the store does not let the namespace adopt it.
	ReasonAdoptionNotAllowed = "AdoptionNotAllowed"
	// ReasonBucketNameNotAllowed: bucketName is outside the namespace's own
	// names, and the store does not let the namespace use other names.
	ReasonBucketNameNotAllowed = "BucketNameNotAllowed"
)

// bucketCheck is one check of one bucket against its store: the S3 side of a
// StorageBucket's reconcile, driven by what its status already records, so it
// can be tested through every exit with a fake s3.Client.
type bucketCheck struct {
	s3     s3.Client
	store  string
	bucket string
	// owner is this StorageBucket, as the bucket's ownership tags name it;
	// run fills its NamespaceUID, from namespaceUID, when it needs it.
	owner s3.Owner
	// namespaceUID reads the UID of the StorageBucket's namespace afresh:
	// only a check that tags a bucket, or judges whose it is, needs it.
	namespaceUID func(context.Context) (string, error)
	// claim is what the status records for this bucket name ("" if nothing).
	claim storagev1.BucketClaim
	// adopt is spec.adoptExisting.
	adopt bool
	// mayAdopt: the store lets this namespace take over buckets that were
	// not created for it (adoptionNamespaceSelector).
	mayAdopt bool
	// foreignName: bucketName is outside the namespace's own names.
	foreignName bool
	probe       bool
	// recordIntent persists claim Creating before the bucket is created, so a
	// bucket created but not yet tagged is recognised as ours afterwards.
	recordIntent func(context.Context) error
}

// checkResult is what a check found.
type checkResult struct {
	summary conditions.Summary
	// claim is the claim to record; "" leaves the recorded one.
	claim storagev1.BucketClaim
	// event, when set, is worth telling a person (created, adopted, ...).
	event *bucketEvent
	// storeDown: the store stopped answering; the store-level check takes over.
	storeDown bool
	// settings is what applying the declared bucket settings found; nil
	// when they were not looked at (none declared, or the check failed).
	settings *settingsResult
}

// ReasonBucketCreated is the Event of a bucket a check created.
const ReasonBucketCreated = "BucketCreated"

type bucketEvent struct {
	warning bool
	// ready: the Event tells a person the bucket is there for them (created
	// or adopted), so Ready turning True on the same write raises no Event
	// of its own: a new bucket gets one Event, not two.
	ready          bool
	reason, format string
}

func healthy(bucket, store string) conditions.Summary {
	return conditions.Summary{Progress: conditions.Done, Reason: ReasonHealthy,
		Message: fmt.Sprintf("bucket %s exists in %s and is healthy", bucket, store)}
}

// errIntent marks a failure to record the intent to create: an API error,
// returned from the reconcile instead of shown as the store's fault.
var errIntent = errors.New("recording the intent to create the bucket")

// run checks the bucket with as few store requests as it can: a claimed
// bucket costs one HeadBucket (plus the probe, if asked for).
func (c bucketCheck) run(ctx context.Context) (checkResult, error) {
	exists, err := c.s3.BucketExists(ctx, c.bucket)
	if err != nil {
		return c.storeFailed(err), nil
	}
	res := checkResult{}
	switch {
	case !exists:
		if c.foreignName && !c.mayAdopt {
			return checkResult{summary: conditions.Summary{Progress: conditions.Blocked, Reason: ReasonBucketNameNotAllowed,
				Message: fmt.Sprintf("bucket name %s is outside this namespace's names (%s-…), and ObjectStore %s does not let namespace %s create buckets under other names (its adoptionNamespaceSelector); name the bucket %s-…, or ask the platform team", c.bucket, c.owner.Namespace, c.store, c.owner.Namespace, c.owner.Namespace)}}, nil
		}
		if c.owner.NamespaceUID, err = c.namespaceUID(ctx); err != nil {
			return checkResult{}, err
		}
		if c.claim != storagev1.BucketCreating {
			if err := c.recordIntent(ctx); err != nil {
				return checkResult{}, fmt.Errorf("%w: %w", errIntent, err)
			}
		}
		if err := c.s3.CreateBucket(ctx, c.bucket); err != nil {
			return c.storeFailed(err), nil
		}
		if err := c.s3.SetOwner(ctx, c.bucket, c.owner); err != nil {
			// Created but not tagged: the recorded intent makes the next check claim it.
			return c.storeFailed(err), nil
		}
		res.claim = storagev1.BucketClaimed
		if c.claim == storagev1.BucketClaimed {
			res.event = &bucketEvent{warning: true, reason: "BucketRecreated", format: "bucket %s had disappeared from the store and was created again (empty)"}
		} else {
			res.event = &bucketEvent{ready: true, reason: ReasonBucketCreated, format: "created bucket %s"}
		}
	case c.claim != storagev1.BucketClaimed:
		// Seen for the first time, after a conflict, or created by us but not tagged yet.
		if c.owner.NamespaceUID, err = c.namespaceUID(ctx); err != nil {
			return checkResult{}, err
		}
		taken, ok := c.takeExisting(ctx)
		if !ok {
			return taken, nil
		}
		res = taken
	}
	if c.probe {
		if err := c.s3.Probe(ctx, c.bucket); err != nil {
			failed := c.storeFailed(err)
			failed.claim, failed.event = res.claim, res.event
			return failed, nil
		}
	}
	res.summary = healthy(c.bucket, c.store)
	return res, nil
}

// takeExisting decides whether a bucket that exists, and that this
// StorageBucket does not claim yet, is its own: by its tags, by the intent
// to create it on record, or by adoption. It tags what it takes; ok is
// false when it takes nothing (the result says why).
func (c bucketCheck) takeExisting(ctx context.Context) (res checkResult, ok bool) {
	owner, err := c.s3.Owner(ctx, c.bucket)
	if err != nil {
		return c.storeFailed(err), false
	}
	ownNamespace := c.keptByThisNamespace(owner)
	switch {
	case owner.UID == c.owner.UID:
		if owner != c.owner {
			// Tagged before namespaces, or their UIDs, were recorded.
			if err := c.s3.SetOwner(ctx, c.bucket, c.owner); err != nil {
				return c.storeFailed(err), false
			}
		}
	case owner.UID == "" && c.claim == storagev1.BucketCreating:
		if err := c.s3.SetOwner(ctx, c.bucket, c.owner); err != nil {
			return c.storeFailed(err), false
		}
		res.event = &bucketEvent{ready: true, reason: ReasonBucketCreated, format: "created bucket %s (tagged on a later check: the store failed in between)"}
	case c.adopt && (c.mayAdopt || ownNamespace):
		if err := c.s3.SetOwner(ctx, c.bucket, c.owner); err != nil {
			return c.storeFailed(err), false
		}
		res.event = &bucketEvent{ready: true, reason: "BucketAdopted", format: "adopted existing bucket %s (adoptExisting: true)"}
		if ownNamespace && !c.mayAdopt {
			res.event.format = "took back bucket %s, kept by an earlier StorageBucket of this namespace (adoptExisting: true)"
		}
	case c.adopt:
		return checkResult{summary: conditions.Summary{Progress: conditions.Blocked, Reason: ReasonAdoptionNotAllowed,
			Message: fmt.Sprintf("bucket %s already exists in %s and was not created for namespace %s; ObjectStore %s does not let this namespace adopt buckets (its adoptionNamespaceSelector), so it is left untouched", c.bucket, c.store, c.owner.Namespace, c.store) +
				c.keptFor(owner)}}, false
	default:
		hint := "set adoptExisting: true to take it over"
		switch {
		case ownNamespace:
			hint = "it was kept by an earlier StorageBucket of this namespace: set adoptExisting: true to take it back"
		case !c.mayAdopt:
			hint = fmt.Sprintf("it was not created for namespace %s, and ObjectStore %s does not let this namespace adopt buckets", c.owner.Namespace, c.store)
		}
		return checkResult{summary: conditions.Summary{Progress: conditions.Blocked, Reason: ReasonConflict,
			Message: fmt.Sprintf("bucket %s already exists in %s and was not created by this StorageBucket; %s", c.bucket, c.store, hint) + c.keptFor(owner)}}, false
	}
	res.claim = storagev1.BucketClaimed
	return res, true
}

// keptByThisNamespace reports whether the bucket's tags name this very
// namespace: its name and its UID. A namespace deleted and made again under
// the name has another UID, and a bucket tagged before Trellis recorded
// namespace UIDs names no namespace object at all: neither is this one's.
func (c bucketCheck) keptByThisNamespace(owner s3.Owner) bool {
	return owner.Namespace == c.owner.Namespace && owner.NamespaceUID != "" && owner.NamespaceUID == c.owner.NamespaceUID
}

// keptFor tells, for a bucket whose ownership tags name another namespace
// (or another namespace of this name), what is true of it and who can
// change that. The check runs after the claims of other StorageBuckets:
// none claims this bucket, so the one that tagged it is gone and left it
// behind (deletionPolicy: Retain). "" for a bucket without a namespace
// tag, or one of this namespace.
func (c bucketCheck) keptFor(owner s3.Owner) string {
	if owner.Namespace == "" || c.keptByThisNamespace(owner) {
		return ""
	}
	tags := fmt.Sprintf("%s=%s, ", s3.OwnerNamespaceTag, owner.Namespace)
	if owner.NamespaceUID != "" {
		tags += fmt.Sprintf("%s=%s, ", s3.OwnerNamespaceUIDTag, owner.NamespaceUID)
	}
	tags += fmt.Sprintf("%s=%s", s3.OwnerTag, owner.UID)
	if owner.Namespace == c.owner.Namespace {
		was := fmt.Sprintf("an earlier namespace named %s (its tags %s), not this one (UID %s): a namespace made again under a name does not take what the earlier one kept",
			owner.Namespace, tags, c.owner.NamespaceUID)
		if owner.NamespaceUID == "" {
			was = fmt.Sprintf("a namespace named %s by a Trellis that did not record namespace UIDs (its tags %s), so it cannot be told from this one (UID %s)",
				owner.Namespace, tags, c.owner.NamespaceUID)
		}
		return fmt.Sprintf(". No StorageBucket claims it: it was kept for %s. "+
			"The platform team can let namespace %s adopt it (ObjectStore %s's adoptionNamespaceSelector), or hand it over by setting its tag %s to %s",
			was, c.owner.Namespace, c.store, s3.OwnerNamespaceUIDTag, c.owner.NamespaceUID)
	}
	back := fmt.Sprintf("Namespace %s can take it back with a StorageBucket naming it (bucketName: %s) and adoptExisting: true. ", owner.Namespace, c.bucket)
	if owner.NamespaceUID == "" {
		back = "It was tagged by a Trellis that did not record namespace UIDs, so no namespace takes it back without the store's leave. "
	}
	return fmt.Sprintf(". No StorageBucket claims it: it was kept for namespace %s after its StorageBucket was deleted (deletionPolicy: Retain; its tags %s). "+
		back+
		"The platform team can let namespace %s adopt it (ObjectStore %s's adoptionNamespaceSelector), hand it over by setting its tags %s to %s and %s to %s, "+
		"or release it by removing its ownership tags (then only namespaces the store lets adopt can take it)",
		owner.Namespace, tags,
		c.owner.Namespace, c.store, s3.OwnerNamespaceTag, c.owner.Namespace, s3.OwnerNamespaceUIDTag, c.owner.NamespaceUID)
}

// storeFailed turns a store error into the bucket's state: names the store
// refuses, and refused credentials, need a person; anything else heals.
func (c bucketCheck) storeFailed(err error) checkResult {
	reason, msg := s3.Classify(err)
	progress := conditions.Working
	if stores.NeedsPerson(reason) || reason == s3.ReasonBucketNameTaken || reason == s3.ReasonInvalidBucketName {
		progress = conditions.Blocked
	}
	return checkResult{
		summary:   conditions.Summary{Progress: progress, Reason: string(reason), Message: fmt.Sprintf("ObjectStore %s: %s", c.store, msg)},
		storeDown: reason == s3.ReasonStoreUnreachable,
	}
}

// deleteCountLimit bounds how many objects are counted to report a blocked deletion.
const deleteCountLimit = 1000

// bucketDeletion is the S3 side of deleting a bucket under deletionPolicy
// Delete: only a bucket this StorageBucket owns, only when it is empty.
type bucketDeletion struct {
	s3     s3.Client
	store  string
	bucket string
	uid    string
	claim  storagev1.BucketClaim
}

// deletionResult is what a deletion attempt found: done, or why it waits and
// how soon it tries again.
type deletionResult struct {
	done    bool
	deleted bool
	summary conditions.Summary
	retry   time.Duration
}

func (d bucketDeletion) run(ctx context.Context) deletionResult {
	exists, err := d.s3.BucketExists(ctx, d.bucket)
	if err != nil {
		return d.waitForStore("cannot reach bucket %s to delete it", err)
	}
	if !exists {
		return deletionResult{done: true}
	}
	owner, err := d.s3.Owner(ctx, d.bucket)
	if err != nil {
		return d.waitForStore("cannot read who owns bucket %s", err)
	}
	ours := owner.UID == d.uid || owner.UID == "" && d.claim == storagev1.BucketCreating
	if !ours {
		// Not ours (a conflict that never resolved): never delete it.
		return deletionResult{done: true}
	}
	n, err := d.s3.CountObjects(ctx, d.bucket, deleteCountLimit)
	if err != nil {
		return d.waitForStore("cannot list bucket %s", err)
	}
	if n > 0 {
		count := fmt.Sprintf("%d objects", n)
		if n >= deleteCountLimit {
			count = fmt.Sprintf("at least %d objects", n)
		}
		return deletionResult{retry: 2 * time.Minute, summary: conditions.Summary{Progress: conditions.Blocked, Reason: ReasonDeleteBlocked,
			Message: fmt.Sprintf("bucket %s still holds %s; empty it, or set deletionPolicy: Retain to keep it and let the StorageBucket go", d.bucket, count)}}
	}
	if err := d.s3.DeleteBucket(ctx, d.bucket); err != nil {
		return d.waitForStore("deleting bucket %s failed", err)
	}
	return deletionResult{done: true, deleted: true}
}

// waitForStore: the store failed during the deletion; it is tried again, and
// the message says how to let go without it.
func (d bucketDeletion) waitForStore(what string, err error) deletionResult {
	reason, msg := s3.Classify(err)
	progress := conditions.Working
	if stores.NeedsPerson(reason) {
		progress = conditions.Blocked
	}
	return deletionResult{retry: time.Minute, summary: conditions.Summary{Progress: progress, Reason: string(reason),
		Message: fmt.Sprintf(what+": %s; it is tried again, or set deletionPolicy: Retain to let the StorageBucket go", d.bucket, msg)}}
}
