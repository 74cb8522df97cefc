package stores

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/s3"
)

// Field indexes over StorageBuckets.
const (
	// BucketStoreIndex finds the buckets of a store.
	BucketStoreIndex = "spec.storeRef.name"
	// StoreBucketIndex is "<store>/<bucket name>": who else claims a bucket.
	StoreBucketIndex = "storage.storeAndBucket"
	// BucketNameIndex is the bucket name alone, for bucket events.
	BucketNameIndex = "storage.bucketName"
	// AccessBucketIndex finds the BucketAccesses of a StorageBucket (by
	// name, within a namespace).
	AccessBucketIndex = "spec.bucketRef.name"
	// AccessStoreIndex finds the BucketAccesses with accounts in a store.
	AccessStoreIndex = "status.storeName"
	// AccessTargetIndex is "<store>/<bucket>" as a BucketAccess's status
	// records them: the accesses whose grants a bucket's policy may hold.
	AccessTargetIndex = "status.storeAndBucket"
	// BucketClaimIndex is "<store>/<bucket>" of a StorageBucket that claims
	// (or is creating) its bucket, by its status.
	BucketClaimIndex = "status.claimedBucket"
)

// StoreBucketKey is the value of the "<store>/<bucket>" indexes.
func StoreBucketKey(store, bucket string) string { return store + "/" + bucket }

// AddIndexes registers the field indexes the storage controllers, the
// sweep and the bucket-event receiver read from the cache.
func AddIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	for _, ix := range Indexes {
		if err := indexer.IndexField(ctx, ix.Obj, ix.Field, ix.Value); err != nil {
			return err
		}
	}
	return nil
}

// Index is a field index: the value of Field for each object of Obj's type.
type Index struct {
	Obj   client.Object
	Field string
	Value client.IndexerFunc
}

// Indexes are the field indexes the storage controllers read from the cache.
var Indexes = []Index{
	{&storagev1.StorageBucket{}, BucketStoreIndex, func(o client.Object) []string {
		return []string{o.(*storagev1.StorageBucket).Spec.StoreRef.Name}
	}},
	{&storagev1.StorageBucket{}, StoreBucketIndex, func(o client.Object) []string {
		b := o.(*storagev1.StorageBucket)
		return []string{StoreBucketKey(b.Spec.StoreRef.Name, BucketName(b))}
	}},
	{&storagev1.StorageBucket{}, BucketNameIndex, func(o client.Object) []string {
		return []string{BucketName(o.(*storagev1.StorageBucket))}
	}},
	{&storagev1.BucketAccess{}, AccessBucketIndex, func(o client.Object) []string {
		return []string{o.(*storagev1.BucketAccess).Spec.BucketRef.Name}
	}},
	{&storagev1.BucketAccess{}, AccessStoreIndex, func(o client.Object) []string {
		if store := o.(*storagev1.BucketAccess).Status.StoreName; store != "" {
			return []string{store}
		}
		return nil
	}},
	{&storagev1.BucketAccess{}, AccessTargetIndex, func(o client.Object) []string {
		if st := o.(*storagev1.BucketAccess).Status; st.StoreName != "" && st.BucketName != "" {
			return []string{StoreBucketKey(st.StoreName, st.BucketName)}
		}
		return nil
	}},
	{&storagev1.StorageBucket{}, BucketClaimIndex, func(o client.Object) []string {
		if b := o.(*storagev1.StorageBucket); b.Status.Claim != "" && b.Status.BucketName != "" {
			return []string{StoreBucketKey(b.Spec.StoreRef.Name, b.Status.BucketName)}
		}
		return nil
	}},
}

// BucketName is the bucket's name in the store: spec.bucketName, else the
// name the status records once the bucket was created or claimed under it
// (so a bucket named by an earlier rule of s3.DeriveBucketName keeps its
// name), else the derived name. Only the manager writes status (people get
// read access to it), and a name recorded without a claim is derived again:
// a StorageBucket that lost a collision of the earlier rule gets the new
// name instead of staying in conflict.
func BucketName(b *storagev1.StorageBucket) string {
	if b.Spec.BucketName != "" {
		return b.Spec.BucketName
	}
	if b.Status.BucketName != "" && b.Status.Claim != "" {
		return b.Status.BucketName
	}
	return s3.DeriveBucketName(b.Namespace, b.Name)
}
