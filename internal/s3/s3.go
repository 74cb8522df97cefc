// Package s3 is the small part of S3 that Trellis uses, behind an interface,
// with the errors it can meet sorted into reasons a person can act on. It has
// no Kubernetes dependency.
package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/tags"
)

// Bucket tags that record who a bucket belongs to: the UID of the
// StorageBucket that created or adopted it, that StorageBucket's
// namespace, and the namespace's UID. The namespace outlives the
// StorageBucket: a bucket kept by deletionPolicy Retain can be taken back
// by the namespace it belonged to, and by no other without the store's
// leave (docs/storage.md). The namespace is that one object, told by its
// UID: a namespace deleted and made again under the name is another.
const (
	OwnerTag             = "trellis.dev/owner-uid"
	OwnerNamespaceTag    = "trellis.dev/owner-namespace"
	OwnerNamespaceUIDTag = "trellis.dev/owner-namespace-uid"
)

// Owner is what a bucket's ownership tags say; empty fields for a tag that
// is not set.
type Owner struct {
	UID          string
	Namespace    string
	NamespaceUID string
}

// probeKey is the small object the optional write/read/delete probe uses.
const probeKey = ".trellis-health-probe"

const (
	schemeHTTP  = "http"
	schemeHTTPS = "https"
)

// Config is how to reach a store. Credentials stay in memory only.
type Config struct {
	Endpoint  string // http(s)://host[:port]
	Region    string
	PathStyle bool
	AccessKey string
	SecretKey string
	// CABundle, when set, is PEM certificates: the only roots trusted for
	// an https endpoint (tlsConfig).
	CABundle []byte
	// Timeout bounds every request; a store that does not answer in time is unreachable.
	Timeout time.Duration
	// OnRequest, when set, is called once for every operation a client
	// built from this config sends, with the operation's name
	// ("HeadBucket", "IssueKey", ...): the one place where the requests
	// to a store are counted.
	OnRequest func(op string)
}

// Client is what the controllers need from a store.
type Client interface {
	// Ping proves the store is reachable and accepts the credentials.
	Ping(ctx context.Context) error
	// BucketExists is S3 HeadBucket.
	BucketExists(ctx context.Context, bucket string) (bool, error)
	CreateBucket(ctx context.Context, bucket string) error
	DeleteBucket(ctx context.Context, bucket string) error
	// Owner returns the bucket's ownership tags.
	Owner(ctx context.Context, bucket string) (Owner, error)
	// SetOwner sets the ownership tags, keeping the bucket's other tags.
	SetOwner(ctx context.Context, bucket string, owner Owner) error
	// CountObjects counts objects and object versions, stopping at limit.
	CountObjects(ctx context.Context, bucket string, limit int) (int, error)
	// Probe writes, reads back and deletes a small object.
	Probe(ctx context.Context, bucket string) error

	// Settings reads what the bucket settings Trellis manages are in the store.
	Settings
}

// Settings are the bucket settings Trellis applies. Each getter returns the
// empty value (never an error) for a setting that was never made.
type Settings interface {
	// Versioning returns VersioningEnabled, VersioningSuspended or "" (never enabled).
	Versioning(ctx context.Context, bucket string) (string, error)
	SetVersioning(ctx context.Context, bucket, status string) error
	// Policy returns the bucket policy document, "" when the bucket has none.
	Policy(ctx context.Context, bucket string) (string, error)
	// SetPolicy stores the bucket policy; "" deletes it.
	SetPolicy(ctx context.Context, bucket, policy string) error
	// CORS returns the bucket's CORS rules, none when it has no configuration.
	CORS(ctx context.Context, bucket string) ([]CORSRule, error)
	// SetCORS replaces the CORS rules; no rules deletes the configuration.
	SetCORS(ctx context.Context, bucket string, rules []CORSRule) error
	// Lifecycle returns the bucket's lifecycle rules, none when it has no configuration.
	Lifecycle(ctx context.Context, bucket string) ([]ExpirationRule, error)
	// SetLifecycle replaces the lifecycle rules; no rules deletes the configuration.
	SetLifecycle(ctx context.Context, bucket string, rules []ExpirationRule) error
}

// Versioning states, as S3 names them.
const (
	VersioningEnabled   = "Enabled"
	VersioningSuspended = "Suspended"
)

// New builds a Client for cfg.
func New(cfg Config) (Client, error) {
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || (u.Scheme != schemeHTTP && u.Scheme != schemeHTTPS) || u.Host == "" {
		return nil, fmt.Errorf("endpoint %q is not an http(s) URL", cfg.Endpoint)
	}
	if cfg.AccessKey == "" || cfg.SecretKey == "" {
		return nil, ErrCredentialsIncomplete
	}
	lookup := minio.BucketLookupDNS
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	} else if net.ParseIP(u.Hostname()) != nil {
		// minio-go would send every bucket request to <bucket>.<IP>, which
		// no resolver knows, while ListBuckets (no bucket) works: a store
		// Ready whose every bucket fails.
		return nil, ErrVirtualHostIP
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	transport, err := minio.DefaultTransport(u.Scheme == schemeHTTPS)
	if err != nil {
		return nil, err
	}
	roots, err := tlsConfig(cfg)
	if err != nil {
		return nil, err
	}
	if roots != nil {
		transport.TLSClientConfig = roots
	}
	transport.DialContext = (&net.Dialer{Timeout: timeout}).DialContext
	transport.ResponseHeaderTimeout = timeout
	mc, err := minio.New(u.Host, &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure:       u.Scheme == schemeHTTPS,
		Region:       cfg.Region,
		BucketLookup: lookup,
		Transport:    transport,
		// One request per check: the controllers decide when to try again.
		MaxRetries: 1,
	})
	if err != nil {
		return nil, err
	}
	return &client{mc: mc, region: cfg.Region, timeout: timeout, onRequest: cfg.OnRequest}, nil
}

type client struct {
	mc        *minio.Client
	region    string
	timeout   time.Duration
	onRequest func(op string)
}

// ctx starts operation op: it is counted (Config.OnRequest) and bounded by
// the timeout.
func (c *client) ctx(ctx context.Context, op string) (context.Context, context.CancelFunc) {
	if c.onRequest != nil {
		c.onRequest(op)
	}
	return context.WithTimeout(ctx, c.timeout)
}

func (c *client) Ping(ctx context.Context) error {
	ctx, cancel := c.ctx(ctx, "ListBuckets")
	defer cancel()
	_, err := c.mc.ListBuckets(ctx)
	return err
}

func (c *client) BucketExists(ctx context.Context, bucket string) (bool, error) {
	ctx, cancel := c.ctx(ctx, "HeadBucket")
	defer cancel()
	return c.mc.BucketExists(ctx, bucket)
}

func (c *client) CreateBucket(ctx context.Context, bucket string) error {
	ctx, cancel := c.ctx(ctx, "CreateBucket")
	defer cancel()
	return c.mc.MakeBucket(ctx, bucket, minio.MakeBucketOptions{Region: c.region})
}

func (c *client) DeleteBucket(ctx context.Context, bucket string) error {
	ctx, cancel := c.ctx(ctx, "DeleteBucket")
	defer cancel()
	return c.mc.RemoveBucket(ctx, bucket)
}

func (c *client) Owner(ctx context.Context, bucket string) (Owner, error) {
	ctx, cancel := c.ctx(ctx, "GetBucketTagging")
	defer cancel()
	t, err := c.mc.GetBucketTagging(ctx, bucket)
	if err != nil {
		if isNoTagSet(err) {
			return Owner{}, nil
		}
		return Owner{}, err
	}
	m := t.ToMap()
	return Owner{UID: m[OwnerTag], Namespace: m[OwnerNamespaceTag], NamespaceUID: m[OwnerNamespaceUIDTag]}, nil
}

// isNoTagSet reports the store's answer for a bucket without tags.
func isNoTagSet(err error) bool {
	code := minio.ToErrorResponse(err).Code
	return code == "NoSuchTagSet" || code == "NoSuchTagSetError"
}

// SetOwner sets the ownership tags among the bucket's tags; an empty field
// removes its tag, so none is left saying what is no longer true. S3
// replaces a bucket's whole tag set at once, so the others are read first;
// if they cannot be read, nothing is written rather than someone's tags lost.
func (c *client) SetOwner(ctx context.Context, bucket string, owner Owner) error {
	ctx, cancel := c.ctx(ctx, "PutBucketTagging")
	defer cancel()
	existing := map[string]string{}
	t, err := c.mc.GetBucketTagging(ctx, bucket)
	switch {
	case err == nil:
		existing = t.ToMap()
	case !isNoTagSet(err):
		return err
	}
	for tag, value := range map[string]string{OwnerTag: owner.UID, OwnerNamespaceTag: owner.Namespace, OwnerNamespaceUIDTag: owner.NamespaceUID} {
		if value == "" {
			delete(existing, tag)
		} else {
			existing[tag] = value
		}
	}
	next, err := tags.NewTags(existing, false)
	if err != nil {
		return err
	}
	return c.mc.SetBucketTagging(ctx, bucket, next)
}

func (c *client) CountObjects(ctx context.Context, bucket string, limit int) (int, error) {
	ctx, cancel := c.ctx(ctx, "ListObjects")
	defer cancel()
	if limit <= 0 {
		return 0, fmt.Errorf("count limit must be positive, got %d", limit)
	}
	n := 0
	// Versions too: a versioned bucket holding only old versions or delete
	// markers is not empty, and the store refuses to delete it.
	for obj := range c.mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true, MaxKeys: limit, WithVersions: true}) {
		if obj.Err != nil {
			return n, obj.Err
		}
		n++
		if n >= limit {
			cancel()
			break
		}
	}
	return n, nil
}

func (c *client) Probe(ctx context.Context, bucket string) error {
	ctx, cancel := c.ctx(ctx, "Probe")
	defer cancel()
	payload := []byte("trellis health probe " + time.Now().UTC().Format(time.RFC3339Nano))
	if _, err := c.mc.PutObject(ctx, bucket, probeKey, bytes.NewReader(payload), int64(len(payload)),
		minio.PutObjectOptions{ContentType: "text/plain"}); err != nil {
		return &ProbeError{Step: "writing", Err: err}
	}
	obj, err := c.mc.GetObject(ctx, bucket, probeKey, minio.GetObjectOptions{})
	if err != nil {
		return &ProbeError{Step: "reading", Err: err}
	}
	got, err := io.ReadAll(obj)
	_ = obj.Close()
	if err != nil {
		return &ProbeError{Step: "reading", Err: err}
	}
	if !bytes.Equal(got, payload) {
		return &ProbeError{Step: "comparing", Err: ErrProbeMismatch}
	}
	if err := c.mc.RemoveObject(ctx, bucket, probeKey, minio.RemoveObjectOptions{}); err != nil {
		return &ProbeError{Step: "deleting", Err: err}
	}
	return nil
}

// ProbeError says which step of the write/read/delete probe failed.
type ProbeError struct {
	Step string // writing, reading, comparing or deleting
	Err  error
}

func (e *ProbeError) Error() string { return e.Step + " the probe object: " + e.Err.Error() }

// Unwrap gives the store's error, so a store that stopped answering is still
// recognised as such.
func (e *ProbeError) Unwrap() error { return e.Err }

// Errors the package returns itself.
var (
	ErrCredentialsIncomplete = errors.New("the credentials have no access key id or no secret access key")
	ErrProbeMismatch         = errors.New("the probe object read back differs from what was written")
	// ErrVirtualHostIP: virtual-hosted addressing puts the bucket in the
	// host name, and an IP address has no names under it.
	ErrVirtualHostIP = errors.New("virtual-hosted addressing (pathStyle false) needs a DNS name as the endpoint's host: <bucket>.<IP address> is no host; set pathStyle: true")
)

// Reason sorts an error into something a person can act on.
type Reason string

// The reasons, used as condition reasons in status.
const (
	ReasonStoreUnreachable   Reason = "StoreUnreachable"
	ReasonAccessDenied       Reason = "AccessDenied"
	ReasonBucketMissing      Reason = "BucketMissing"
	ReasonBucketNameTaken    Reason = "BucketNameTaken"
	ReasonInvalidBucketName  Reason = "InvalidBucketName"
	ReasonProbeFailed        Reason = "ProbeFailed"
	ReasonCredentialsMissing Reason = "CredentialsMissing"
	ReasonStoreError         Reason = "StoreError"
	// ReasonNotSupported: the store does not implement what was asked (an
	// S3 call answered NotImplemented, or versitygw's admin API without IAM).
	ReasonNotSupported Reason = "NotSupported"
	// ReasonInvalidRequest: the store refused a bucket policy (one naming
	// an unknown principal, say).
	ReasonInvalidRequest Reason = "InvalidRequest"
	// ReasonCertificateRejected: the store's TLS certificate did not
	// verify against the trusted roots (an unknown authority, another
	// host's name, expired).
	ReasonCertificateRejected Reason = "CertificateRejected"
	// ReasonCABundleMissing: the CA bundle's Secret or ConfigMap, or its
	// key, does not exist (or may not be read).
	ReasonCABundleMissing Reason = "CABundleMissing"
	// ReasonCABundleInvalid: the CA bundle holds no PEM certificate.
	ReasonCABundleInvalid Reason = "CABundleInvalid"
	// ReasonWrongRegion: the store serves another region than the
	// ObjectStore's (it refused a signature for it).
	ReasonWrongRegion Reason = "WrongRegion"
	// ReasonInvalidEndpoint: the endpoint cannot be addressed as the spec
	// says (virtual-hosted addressing on an IP address).
	ReasonInvalidEndpoint Reason = "InvalidEndpoint"
)

// Classify maps an S3 or network error to a Reason and a message safe to show
// in status (it never contains credentials).
func Classify(err error) (Reason, string) {
	if err == nil {
		return "", ""
	}
	if errors.Is(err, ErrCredentialsIncomplete) {
		return ReasonCredentialsMissing, err.Error()
	}
	if errors.Is(err, ErrProbeMismatch) {
		return ReasonProbeFailed, err.Error()
	}
	if errors.Is(err, ErrCABundleNoCertificate) {
		return ReasonCABundleInvalid, err.Error()
	}
	if errors.Is(err, ErrVirtualHostIP) {
		return ReasonInvalidEndpoint, err.Error()
	}
	// Before the network errors, which wrap it: the store answered, and a
	// person must say whom to trust.
	if cert := certificateError(err); cert != nil {
		return ReasonCertificateRejected, "the object store's TLS certificate was refused: " + cert.Error() +
			"; if a private CA signed it, name that CA in the ObjectStore's caBundleRef"
	}
	var scope *CannotScopeError
	if errors.As(err, &scope) {
		return ReasonNotSupported, scope.Error()
	}
	var netErr net.Error
	if errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) || isConnectionError(err) {
		return ReasonStoreUnreachable, "the object store did not answer: " + shortNetError(err)
	}
	// errors.As, not minio.ToErrorResponse: the probe wraps the store's error,
	// and a 5xx inside it must still reach the store-level back-off.
	var resp minio.ErrorResponse
	if !errors.As(err, &resp) {
		resp = minio.ToErrorResponse(err)
	}
	switch resp.Code {
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "XAdminUserNotFound", "XAdminAccessDenied", "InvalidToken", "ExpiredToken":
		return ReasonAccessDenied, "the object store refused the credentials or the request (" + resp.Code + ")"
	case "NoSuchBucket":
		return ReasonBucketMissing, "the bucket does not exist in the object store"
	case "BucketAlreadyExists":
		return ReasonBucketNameTaken, "the bucket name is taken by another account of the object store"
	case "InvalidBucketName":
		return ReasonInvalidBucketName, "the object store refused the bucket name"
	case "AuthorizationHeaderMalformed":
		// The store names the region it expects in fixed words; anything
		// longer is not shown.
		msg := resp.Message
		if len(msg) > 200 || strings.Contains(msg, "://") {
			msg = ""
		}
		return ReasonWrongRegion, strings.TrimSuffix("the object store refused the region the requests are signed for (AuthorizationHeaderMalformed): "+msg, ": ")
	case "NotImplemented":
		return ReasonNotSupported, "the object store does not implement this (NotImplemented)"
	case "XAdminMethodNotSupported":
		return ReasonNotSupported, "the store's admin API manages no accounts: versitygw runs without IAM (start it with --iam-dir or another IAM backend)"
	case "MalformedPolicy":
		// The store says what is wrong with the policy in fixed words
		// ("Invalid principal in policy"); anything longer is not shown.
		msg := resp.Message
		if len(msg) > 200 || strings.Contains(msg, "://") {
			msg = ""
		}
		return ReasonInvalidRequest, strings.TrimSuffix("the object store refused the bucket policy (MalformedPolicy): "+msg, ": ")
	}
	if resp.StatusCode == 403 {
		return ReasonAccessDenied, "the object store refused the request (HTTP 403)"
	}
	if resp.StatusCode >= 500 || resp.StatusCode == 0 && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
		return ReasonStoreUnreachable, "the object store failed to answer (" + firstNonEmpty(resp.Code, fmt.Sprintf("HTTP %d", resp.StatusCode)) + ")"
	}
	var probe *ProbeError
	if errors.As(err, &probe) {
		return ReasonProbeFailed, err.Error()
	}
	return ReasonStoreError, "the object store answered with an error: " + firstNonEmpty(resp.Code, resp.Message, err.Error())
}

func isConnectionError(err error) bool {
	var opErr *net.OpError
	var urlErr *url.Error
	return errors.As(err, &opErr) || errors.As(err, &urlErr)
}

// shortNetError keeps the cause ("connection refused", "i/o timeout") without
// the request URL.
func shortNetError(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		return msg[i+2:]
	}
	return msg
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
