package storage

// The names the StorageBucket and BucketAccess controllers are registered
// under: the controller label of controller-runtime's metrics and
// trellis_reconcile_conflicts_total.
const (
	bucketController = "storagebucket"
	accessController = "bucketaccess"
)
