package access

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/children"
	"github.com/trellis-dev/trellis/internal/controller/operate"
	"github.com/trellis-dev/trellis/internal/controller/outcome"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
)

// accessObservation is what one reconcile of a BucketAccess saw.
type accessObservation struct {
	stores.Observed
	// target is the store and bucket the accounts live in, put on record
	// before any exists.
	target *accessTarget
	// synced is what bringing the key, its grant and its Secret in line
	// found and did; nil when it did not run.
	synced *accessResult
	// waits says why a deletion waits (nil: it does not).
	waits *conditions.Summary
}

type accessTarget struct{ store, bucket string }

// computeAccessStatus derives the status from what one reconcile observed
// and how it ended.
// A key is recorded only once the Secret holds it. It is pure, so "write
// only on change" is a plain comparison.
func computeAccessStatus(a *storagev1.BucketAccess, obs *accessObservation, out outcome.Outcome) storagev1.BucketAccessStatus {
	st := *a.Status.DeepCopy()
	found := obs.waits
	if obs.synced != nil {
		found = &obs.synced.summary
	}
	summary := stores.Summary(out, found)
	if summary == nil {
		return st
	}
	st.ObservedGeneration = a.Generation
	st.LastHandledReconcileAt = operate.RequestedAt(a)
	operate.Resume(&st.Conditions)
	if t := obs.target; t != nil {
		st.StoreName, st.BucketName = t.store, t.bucket
	}
	if res := obs.synced; res != nil {
		if res.issued != nil {
			st.AccessKeyID, st.Account, st.Principal = res.issued.AccessKeyID, res.issued.Account, res.issued.Principal
			st.KeyVersion = a.Spec.KeyVersion
		}
		if res.keysKnown {
			st.RetiringKeys = res.retiring
		}
	}
	conditions.Summarize(&st.Conditions, a.Generation, *summary)
	return st
}

// Keys of a BucketAccess's Secret: the store's coordinates and the key under
// plain names (the key names the ObjectStore credentials Secret uses), and
// the same as the environment variables the AWS SDKs and CLI read, so
// `envFrom: [{secretRef: {name: ...}}]` configures a client.
const (
	secretEndpoint     = "endpoint"
	secretRegion       = "region"
	secretBucketName   = "bucketName"
	secretPathStyle    = "pathStyle"
	envAccessKeyID     = "AWS_ACCESS_KEY_ID"
	envSecretAccessKey = "AWS_SECRET_ACCESS_KEY"
	envRegion          = "AWS_REGION"
	envDefaultRegion   = "AWS_DEFAULT_REGION"
	envEndpointURLS3   = "AWS_ENDPOINT_URL_S3"
	envBucketName      = "BUCKET_NAME"
	envPathStyle       = "S3_FORCE_PATH_STYLE"
	// secretCABundle is the store's CA bundle, when it names one: mounted as
	// a file, it is what AWS_CA_BUNDLE (or SSL_CERT_FILE) points at.
	secretCABundle = "ca.crt"
)

// accessSecretLabels mark the Secret of a BucketAccess.
func accessSecretLabels(a *storagev1.BucketAccess) map[string]string {
	return map[string]string{
		setup.ManagedByLabel:          setup.ManagedByValue,
		"app.kubernetes.io/name":      "bucket-access",
		"app.kubernetes.io/instance":  a.Name,
		"app.kubernetes.io/part-of":   "trellis",
		"app.kubernetes.io/component": "credentials",
		"storage.trellis.dev/bucket":  a.Spec.BucketRef.Name,
	}
}

// desiredSecret is the Secret of a BucketAccess holding the given key, and
// the store's CA bundle if it has one (caBundle nil: none).
func desiredSecret(a *storagev1.BucketAccess, store *storagev1.ObjectStore, bucket, accessKeyID, secretKey string, caBundle []byte) *corev1ac.SecretApplyConfiguration {
	pathStyle := strconv.FormatBool(ptr.Deref(store.Spec.PathStyle, false))
	data := map[string][]byte{
		secretEndpoint:            []byte(store.Spec.Endpoint),
		secretRegion:              []byte(store.Spec.Region),
		secretBucketName:          []byte(bucket),
		secretPathStyle:           []byte(pathStyle),
		stores.AccessKeyIDKey:     []byte(accessKeyID),
		stores.SecretAccessKeyKey: []byte(secretKey),
		envAccessKeyID:            []byte(accessKeyID),
		envSecretAccessKey:        []byte(secretKey),
		envRegion:                 []byte(store.Spec.Region),
		envDefaultRegion:          []byte(store.Spec.Region),
		envEndpointURLS3:          []byte(store.Spec.Endpoint),
		envBucketName:             []byte(bucket),
		envPathStyle:              []byte(pathStyle),
	}
	if len(caBundle) > 0 {
		data[secretCABundle] = caBundle
	}
	return corev1ac.Secret(a.Spec.SecretName, a.Namespace).
		WithLabels(accessSecretLabels(a)).
		WithOwnerReferences(children.OwnerReference(a, storagev1.GroupVersion.WithKind("BucketAccess"))).
		WithType(corev1.SecretTypeOpaque).
		WithData(data)
}
