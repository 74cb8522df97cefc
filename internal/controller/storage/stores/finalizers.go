package stores

// The finalizers of the three storage kinds. config/admission adds the
// StorageBucket's and the BucketAccess's at creation.
const (
	// StoreFinalizer keeps an ObjectStore while StorageBuckets still use it.
	StoreFinalizer = "storage.trellis.dev/in-use"
	// BucketFinalizer holds a StorageBucket until its deletion policy is applied.
	BucketFinalizer = "storage.trellis.dev/bucket"
	// AccessFinalizer holds a BucketAccess until its key is revoked in the store.
	AccessFinalizer = "storage.trellis.dev/access"
)
