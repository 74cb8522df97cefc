// Package stores is what the storage controllers, the sweep and the
// bucket-event receiver share: the clients of each ObjectStore (built from
// its credentials Secret, each request counted), the labels of namespaces
// that the stores' selectors match, the field indexes, and the marks
// Trellis puts in the names of the store accounts it makes.
package stores

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/s3"
)

// Keys of the credentials Secret.
const (
	AccessKeyIDKey     = "accessKeyID"
	SecretAccessKeyKey = "secretAccessKey"
)

// Clients keeps one S3 client per ObjectStore, built from its credentials
// Secret, and for store types that have one, its account driver. It holds
// clients only: whether a store answers is the ObjectStore's Ready
// condition, which every replica reads from its cache, so a new leader knows
// it at once.
type Clients struct {
	// secrets reads credentials uncached, from the manager's namespace only.
	secrets   client.Reader
	namespace string
	backends  Backends

	mu      sync.Mutex
	clients map[string]storeClient

	// policyLocks serialise the read-modify-write of a bucket's policy,
	// which StorageBuckets (their policy) and BucketAccesses (their grants)
	// both edit. Only the leader writes, so a lock in memory is enough. A
	// bucket's lock exists while someone holds it or waits for it: the map
	// holds the edits under way, not every bucket ever edited.
	locksMu     sync.Mutex
	policyLocks map[string]*policyLock // "<store>/<bucket>"
}

// policyLock is one bucket's lock, and how many hold it or wait for it.
type policyLock struct {
	sync.Mutex
	users int
}

// Backends builds the clients of a store: S3 for the data path, Accounts for
// the account driver of a store type that has one (accountDrivers).
type Backends struct {
	S3       func(s3.Config) (s3.Client, error)
	Accounts func(cfg s3.Config, store *storagev1.ObjectStore) (s3.Accounts, error)
}

// DefaultBackends are the real clients: minio-go, and the account driver
// of the store's type.
var DefaultBackends = Backends{
	S3:       func(cfg s3.Config) (s3.Client, error) { return s3.New(cfg) },
	Accounts: NewAccounts,
}

// accountDriver is how one store type's account driver is built: its
// endpoint (where the store's account API is, when not at the S3
// endpoint), and the driver.
type accountDriver struct {
	endpoint func(*storagev1.ObjectStore) string
	build    func(cfg s3.Config, endpoint string, store *storagev1.ObjectStore) (s3.Accounts, error)
	// ownPolicies: the driver grants each account through a policy of its
	// own (s3.AccountGrants), and a bucket policy grants accounts nothing.
	ownPolicies bool
}

// accountDrivers are the store types with an account driver, each one of
// internal/s3's accounts_*.go; any other type has none.
var accountDrivers = map[storagev1.StoreType]accountDriver{
	storagev1.StoreTypeVersitygw: {
		endpoint: func(o *storagev1.ObjectStore) string {
			if o.Spec.Versitygw == nil {
				return ""
			}
			return o.Spec.Versitygw.AdminEndpoint
		},
		build: func(cfg s3.Config, endpoint string, _ *storagev1.ObjectStore) (s3.Accounts, error) {
			return s3.NewVersitygwAccounts(cfg, endpoint)
		},
	},
	storagev1.StoreTypeIAM: {
		endpoint: func(o *storagev1.ObjectStore) string {
			if o.Spec.IAM == nil {
				return ""
			}
			return o.Spec.IAM.Endpoint
		},
		// The driver manages only users named with the store's mark.
		build: func(cfg s3.Config, endpoint string, o *storagev1.ObjectStore) (s3.Accounts, error) {
			return s3.NewIAMAccounts(cfg, endpoint, StoreKeyPrefix(o.UID))
		},
	},
	storagev1.StoreTypeMinIO: {
		endpoint: func(o *storagev1.ObjectStore) string {
			if o.Spec.MinIO == nil {
				return ""
			}
			return o.Spec.MinIO.AdminEndpoint
		},
		// The driver manages only users named with the store's mark.
		build: func(cfg s3.Config, endpoint string, o *storagev1.ObjectStore) (s3.Accounts, error) {
			return s3.NewMinIOAccounts(cfg, endpoint, StoreKeyPrefix(o.UID))
		},
		ownPolicies: true,
	},
}

// GrantsByAccount reports whether the store's accounts are granted by
// policies of their own (MinIO), so that no bucket policy statement of
// Trellis' grants them anything and none may stand.
func GrantsByAccount(store *storagev1.ObjectStore) bool {
	return accountDrivers[store.Spec.Type].ownPolicies
}

// NewAccounts builds the account driver of the store's type, or answers
// s3.ErrAccessNotSupported for a type without one.
func NewAccounts(cfg s3.Config, store *storagev1.ObjectStore) (s3.Accounts, error) {
	d, ok := accountDrivers[store.Spec.Type]
	if !ok {
		return nil, s3.ErrAccessNotSupported
	}
	return d.build(cfg, d.endpoint(store), store)
}

// accountsEndpoint is where the store's account API is served ("": at the
// S3 endpoint, or no account driver).
func accountsEndpoint(store *storagev1.ObjectStore) string {
	if d, ok := accountDrivers[store.Spec.Type]; ok {
		return d.endpoint(store)
	}
	return ""
}

type storeClient struct {
	client   s3.Client
	accounts s3.Accounts // nil for a store type without an account driver
	// caBundle is the PEM the clients trust (nil: the system's roots), for
	// the BucketAccess Secrets of the store.
	caBundle []byte
	// configSum is of UID, type, endpoints, region, path style, keys and
	// CA bundle; never the keys themselves. The UID is the account
	// driver's mark.
	configSum [32]byte
}

// NewClients returns an empty set of clients. Secrets are read with secrets,
// and only from namespace.
func NewClients(secrets client.Reader, namespace string, backends Backends) *Clients {
	return &Clients{secrets: secrets, namespace: namespace, backends: backends, clients: map[string]storeClient{}, policyLocks: map[string]*policyLock{}}
}

// Refresh reads the store's credentials Secret (and CA bundle) and returns
// its client, rebuilt only when the configuration, the keys or the bundle
// changed. The ObjectStore controller calls it at every store check, which
// is how rotated keys and CA bundles are picked up.
func (s *Clients) Refresh(ctx context.Context, store *storagev1.ObjectStore) (s3.Client, error) {
	c, err := s.refresh(ctx, store)
	return c.client, err
}

func (s *Clients) refresh(ctx context.Context, store *storagev1.ObjectStore) (storeClient, error) {
	cfg, err := s.config(ctx, store)
	if err != nil {
		return storeClient{}, err
	}
	sum := sha256.Sum256([]byte(string(store.UID) + "\x00" + string(store.Spec.Type) + "\x00" + accountsEndpoint(store) + "\x00" + cfg.Endpoint + "\x00" + cfg.Region + "\x00" +
		fmt.Sprint(cfg.PathStyle) + "\x00" + cfg.AccessKey + "\x00" + cfg.SecretKey + "\x00" + string(cfg.CABundle)))
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.clients[store.Name]; ok && c.configSum == sum {
		return c, nil
	}
	c, err := s.backends.S3(cfg)
	if err != nil {
		return storeClient{}, err
	}
	built := storeClient{client: c, caBundle: cfg.CABundle, configSum: sum}
	if HasAccounts(store) {
		a, err := s.backends.Accounts(cfg, store)
		if err != nil {
			return storeClient{}, err
		}
		built.accounts = a
	}
	s.clients[store.Name] = built
	return built, nil
}

// Client returns the store's client, building it if no check has yet (a
// bucket reconciled on a new leader before its store was).
func (s *Clients) Client(ctx context.Context, store *storagev1.ObjectStore) (s3.Client, error) {
	c, err := s.get(ctx, store)
	return c.client, err
}

// Accounts returns the store's account driver, or s3.ErrAccessNotSupported
// for a store type without one.
func (s *Clients) Accounts(ctx context.Context, store *storagev1.ObjectStore) (s3.Accounts, error) {
	if !HasAccounts(store) {
		return nil, s3.ErrAccessNotSupported
	}
	c, err := s.get(ctx, store)
	if err != nil {
		return nil, err
	}
	if c.accounts == nil {
		// Built for another type before the cache saw the change.
		if c, err = s.refresh(ctx, store); err != nil {
			return nil, err
		}
	}
	return c.accounts, nil
}

// CABundle returns the PEM certificates the store's clients trust, nil
// when the store names no CA bundle.
func (s *Clients) CABundle(ctx context.Context, store *storagev1.ObjectStore) ([]byte, error) {
	c, err := s.get(ctx, store)
	return c.caBundle, err
}

// KeptCABundle returns the PEM certificates the store's kept clients trust
// (nil: the system's roots), and whether clients of the store are kept;
// unlike CABundle it builds none.
func (s *Clients) KeptCABundle(store string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[store]
	return c.caBundle, ok
}

// HasAccounts reports whether the store's type has an account driver
// (accountDrivers).
func HasAccounts(store *storagev1.ObjectStore) bool {
	_, ok := accountDrivers[store.Spec.Type]
	return ok
}

// AccountStoreTypes names the store types with an account driver, for
// messages ("Versitygw or IAM").
func AccountStoreTypes() string {
	types := make([]string, 0, len(accountDrivers))
	for t := range accountDrivers {
		types = append(types, string(t))
	}
	slices.Sort(types)
	return strings.Join(types, " or ")
}

func (s *Clients) get(ctx context.Context, store *storagev1.ObjectStore) (storeClient, error) {
	s.mu.Lock()
	c, ok := s.clients[store.Name]
	s.mu.Unlock()
	if ok {
		return c, nil
	}
	return s.refresh(ctx, store)
}

// LockPolicy takes the lock of a bucket's policy; the caller calls the
// returned function, once, to release it.
//
// Each bucket has a lock of its own, counted and dropped when its last user
// lets go, rather than a fixed set of locks shared by hash: a policy edit
// waits for its store (seconds, when the store is slow), and a shared lock
// would make an edit in one store wait for a slow one in another.
func (s *Clients) LockPolicy(store, bucket string) (unlock func()) {
	key := store + "/" + bucket
	s.locksMu.Lock()
	l := s.policyLocks[key]
	if l == nil {
		l = &policyLock{}
		s.policyLocks[key] = l
	}
	l.users++
	s.locksMu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		s.locksMu.Lock()
		defer s.locksMu.Unlock()
		if l.users--; l.users == 0 {
			delete(s.policyLocks, key)
		}
	}
}

// PolicyLocksIn is how many policy locks of the store's buckets exist
// (held, or waited for): what memory holds for them.
func (s *Clients) PolicyLocksIn(store string) int {
	s.locksMu.Lock()
	defer s.locksMu.Unlock()
	n := 0
	for key := range s.policyLocks {
		if strings.HasPrefix(key, store+"/") {
			n++
		}
	}
	return n
}

// Holds reports whether a client of the store is kept.
func (s *Clients) Holds(store string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.clients[store]
	return ok
}

// Forget drops a deleted store's client.
func (s *Clients) Forget(store string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.clients, store)
}

// Errors reading a store's credentials; each message says what to fix.
var (
	errCredentialsNamespace = errors.New("the credentials Secret must be in the manager's namespace")
	errCredentialsNotFound  = errors.New("the credentials Secret does not exist")
	errCredentialsForbidden = errors.New("the manager may not read the credentials Secret")
)

// Errors reading a store's CA bundle; each message names the object.
var (
	errCABundleNotFound  = errors.New("does not exist")
	errCABundleNoKey     = errors.New("has no key")
	errCABundleForbidden = errors.New("may not be read by the manager")
)

func (s *Clients) config(ctx context.Context, store *storagev1.ObjectStore) (s3.Config, error) {
	ref := store.Spec.CredentialsSecretRef
	if ref.Namespace != s.namespace {
		// A tenant must not be able to point Trellis at someone else's Secret,
		// and the manager needs no cluster-wide Secret access this way.
		return s3.Config{}, fmt.Errorf("%w %s, not %s", errCredentialsNamespace, s.namespace, ref.Namespace)
	}
	secret := &corev1.Secret{}
	err := s.secrets.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, secret)
	switch {
	case apierrors.IsNotFound(err):
		return s3.Config{}, fmt.Errorf("%w: %s/%s", errCredentialsNotFound, ref.Namespace, ref.Name)
	case apierrors.IsForbidden(err):
		return s3.Config{}, fmt.Errorf("%w: %s/%s", errCredentialsForbidden, ref.Namespace, ref.Name)
	case err != nil:
		return s3.Config{}, fmt.Errorf("reading the credentials Secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	caBundle, err := s.caBundle(ctx, store)
	if err != nil {
		return s3.Config{}, err
	}
	return s3.Config{
		CABundle:  caBundle,
		Endpoint:  store.Spec.Endpoint,
		Region:    store.Spec.Region,
		PathStyle: ptr.Deref(store.Spec.PathStyle, false),
		AccessKey: string(secret.Data[AccessKeyIDKey]),
		SecretKey: string(secret.Data[SecretAccessKeyKey]),
		OnRequest: countRequests(store.Name),
	}, nil
}

// caBundle reads the store's CA bundle (nil when it names none) from the
// namespace of its credentials Secret, which config has held to the
// manager's own: uncached, like the credentials, a Secret or a ConfigMap
// alike (the cache holds only Trellis' own ConfigMaps, and no Secret).
func (s *Clients) caBundle(ctx context.Context, store *storagev1.ObjectStore) ([]byte, error) {
	ref := store.Spec.CABundleRef
	if ref == (storagev1.CABundleReference{}) {
		return nil, nil
	}
	key := ref.Key
	if key == "" {
		key = storagev1.DefaultCABundleKey
	}
	what := fmt.Sprintf("the CA bundle's %s %s/%s", ref.Kind, store.Spec.CredentialsSecretRef.Namespace, ref.Name)
	objKey := client.ObjectKey{Namespace: store.Spec.CredentialsSecretRef.Namespace, Name: ref.Name}
	var data []byte
	var found bool
	var err error
	switch ref.Kind {
	case storagev1.CABundleSecret:
		secret := &corev1.Secret{}
		if err = s.secrets.Get(ctx, objKey, secret); err == nil {
			data, found = secret.Data[key]
		}
	case storagev1.CABundleConfigMap:
		cm := &corev1.ConfigMap{}
		if err = s.secrets.Get(ctx, objKey, cm); err == nil {
			var text string
			if text, found = cm.Data[key]; found {
				data = []byte(text)
			} else {
				data, found = cm.BinaryData[key]
			}
		}
	default:
		return nil, fmt.Errorf("%w: the CA bundle's kind %q is neither Secret nor ConfigMap", errCABundleNotFound, ref.Kind)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("%s %w", what, errCABundleNotFound)
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("%s %w", what, errCABundleForbidden)
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", what, err)
	case !found:
		return nil, fmt.Errorf("%s %w %s", what, errCABundleNoKey, key)
	}
	certs, err := s3.Certificates(data)
	if err != nil {
		return nil, fmt.Errorf("%s, key %s, %w", what, key, err)
	}
	return certs, nil
}

// ClassifyError sorts an error met while talking to a store into a
// condition reason and a message safe to show (never a key).
func ClassifyError(err error) (s3.Reason, string) {
	var ce *CacheError
	switch {
	case errors.As(err, &ce):
		// Not the store's: the manager's cache failed; nothing was sent.
		return conditions.ReasonReconcileError, ce.Error()
	case errors.Is(err, errCredentialsNamespace), errors.Is(err, errCredentialsNotFound), errors.Is(err, errCredentialsForbidden):
		return s3.ReasonCredentialsMissing, err.Error()
	case errors.Is(err, s3.ErrCredentialsIncomplete):
		return s3.ReasonCredentialsMissing, fmt.Sprintf("the credentials Secret needs the keys %s and %s", AccessKeyIDKey, SecretAccessKeyKey)
	case errors.Is(err, s3.ErrAccessNotSupported):
		return s3.ReasonNotSupported, err.Error()
	case errors.Is(err, errCABundleNotFound), errors.Is(err, errCABundleNoKey), errors.Is(err, errCABundleForbidden):
		return s3.ReasonCABundleMissing, err.Error()
	}
	return s3.Classify(err)
}

// NeedsPerson reports the store reasons only a person can fix: keys missing
// or refused, a CA bundle missing or wrong, a certificate refused, an
// endpoint that cannot be addressed, a region the store refuses. Anything
// else (a store that does not
// answer) heals by itself.
func NeedsPerson(reason s3.Reason) bool {
	switch reason {
	case s3.ReasonCredentialsMissing, s3.ReasonAccessDenied, s3.ReasonCABundleMissing, s3.ReasonCABundleInvalid,
		s3.ReasonCertificateRejected, s3.ReasonInvalidEndpoint, s3.ReasonWrongRegion:
		return true
	}
	return false
}
