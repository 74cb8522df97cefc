package s3

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/cors"
	"github.com/minio/minio-go/v7/pkg/lifecycle"
)

// CORSRule is one CORS rule of a bucket, the part of S3's CORSRule Trellis
// manages.
type CORSRule struct {
	AllowedOrigins []string
	AllowedMethods []string
	AllowedHeaders []string
	ExposeHeaders  []string
	MaxAgeSeconds  int
}

// ExpirationRule is a lifecycle rule that expires objects under a prefix a
// number of days after they were written. Foreign is set on a rule read from
// the store that does more or other than that (transitions, dates, tags):
// such a rule never equals a wanted one, so it is replaced, not kept by
// accident.
type ExpirationRule struct {
	ID      string
	Prefix  string
	Days    int
	Foreign bool
}

func (c *client) Versioning(ctx context.Context, bucket string) (string, error) {
	ctx, cancel := c.ctx(ctx, "GetBucketVersioning")
	defer cancel()
	v, err := c.mc.GetBucketVersioning(ctx, bucket)
	if err != nil {
		return "", err
	}
	return v.Status, nil
}

func (c *client) SetVersioning(ctx context.Context, bucket, status string) error {
	ctx, cancel := c.ctx(ctx, "PutBucketVersioning")
	defer cancel()
	return c.mc.SetBucketVersioning(ctx, bucket, minio.BucketVersioningConfiguration{Status: status})
}

func (c *client) Policy(ctx context.Context, bucket string) (string, error) {
	ctx, cancel := c.ctx(ctx, "GetBucketPolicy")
	defer cancel()
	p, err := c.mc.GetBucketPolicy(ctx, bucket)
	if err != nil && minio.ToErrorResponse(err).Code == "NoSuchBucketPolicy" {
		return "", nil
	}
	return p, err
}

func (c *client) SetPolicy(ctx context.Context, bucket, policy string) error {
	ctx, cancel := c.ctx(ctx, "PutBucketPolicy")
	defer cancel()
	return c.mc.SetBucketPolicy(ctx, bucket, policy)
}

func (c *client) CORS(ctx context.Context, bucket string) ([]CORSRule, error) {
	ctx, cancel := c.ctx(ctx, "GetBucketCors")
	defer cancel()
	cfg, err := c.mc.GetBucketCors(ctx, bucket)
	if err != nil {
		if minio.ToErrorResponse(err).Code == "NoSuchCORSConfiguration" {
			return nil, nil
		}
		return nil, err
	}
	if cfg == nil {
		return nil, nil
	}
	rules := make([]CORSRule, 0, len(cfg.CORSRules))
	for _, r := range cfg.CORSRules {
		rules = append(rules, CORSRule{
			AllowedOrigins: r.AllowedOrigin, AllowedMethods: r.AllowedMethod,
			AllowedHeaders: r.AllowedHeader, ExposeHeaders: r.ExposeHeader, MaxAgeSeconds: r.MaxAgeSeconds,
		})
	}
	return rules, nil
}

func (c *client) SetCORS(ctx context.Context, bucket string, rules []CORSRule) error {
	ctx, cancel := c.ctx(ctx, "PutBucketCors")
	defer cancel()
	if len(rules) == 0 {
		return c.mc.SetBucketCors(ctx, bucket, nil)
	}
	out := make([]cors.Rule, 0, len(rules))
	for _, r := range rules {
		out = append(out, cors.Rule{
			AllowedOrigin: r.AllowedOrigins, AllowedMethod: r.AllowedMethods,
			AllowedHeader: r.AllowedHeaders, ExposeHeader: r.ExposeHeaders, MaxAgeSeconds: r.MaxAgeSeconds,
		})
	}
	return c.mc.SetBucketCors(ctx, bucket, cors.NewConfig(out))
}

func (c *client) Lifecycle(ctx context.Context, bucket string) ([]ExpirationRule, error) {
	ctx, cancel := c.ctx(ctx, "GetBucketLifecycle")
	defer cancel()
	cfg, err := c.mc.GetBucketLifecycle(ctx, bucket)
	if err != nil {
		if minio.ToErrorResponse(err).Code == "NoSuchLifecycleConfiguration" {
			return nil, nil
		}
		return nil, err
	}
	if cfg == nil {
		return nil, nil
	}
	rules := make([]ExpirationRule, 0, len(cfg.Rules))
	for _, r := range cfg.Rules {
		rules = append(rules, expirationRuleOf(r))
	}
	return rules, nil
}

// expirationRuleOf reads a store's lifecycle rule as an ExpirationRule,
// marking it Foreign when it holds anything an ExpirationRule cannot say.
func expirationRuleOf(r lifecycle.Rule) ExpirationRule {
	prefix := r.RuleFilter.Prefix
	if prefix == "" {
		prefix = r.Prefix
	}
	out := ExpirationRule{ID: r.ID, Prefix: prefix, Days: int(r.Expiration.Days)}
	out.Foreign = r.Status != "Enabled" || !r.Expiration.IsDateNull() || r.Expiration.DeleteMarker.IsEnabled() ||
		!r.Transition.IsNull() || !r.NoncurrentVersionExpiration.IsDaysNull() || !r.NoncurrentVersionTransition.IsStorageClassEmpty() ||
		!r.AbortIncompleteMultipartUpload.IsDaysNull() || !r.RuleFilter.And.IsEmpty() || !r.RuleFilter.Tag.IsEmpty() ||
		r.Expiration.Days == 0
	return out
}

func (c *client) SetLifecycle(ctx context.Context, bucket string, rules []ExpirationRule) error {
	ctx, cancel := c.ctx(ctx, "PutBucketLifecycle")
	defer cancel()
	cfg := lifecycle.NewConfiguration()
	for _, r := range rules {
		cfg.Rules = append(cfg.Rules, lifecycle.Rule{
			ID:         r.ID,
			Status:     "Enabled",
			RuleFilter: lifecycle.Filter{Prefix: r.Prefix},
			Expiration: lifecycle.Expiration{Days: lifecycle.ExpirationDays(r.Days)},
		})
	}
	// An empty configuration makes minio-go delete the bucket's lifecycle.
	return c.mc.SetBucketLifecycle(ctx, bucket, cfg)
}

// SameCORS reports whether two rule lists say the same: the same rules in the
// same order (S3 applies the first that matches), lists within a rule
// compared as sets, methods and header names without regard to case.
func SameCORS(a, b []CORSRule) bool {
	return slices.EqualFunc(a, b, func(x, y CORSRule) bool {
		return x.MaxAgeSeconds == y.MaxAgeSeconds &&
			sameSet(x.AllowedOrigins, y.AllowedOrigins, false) &&
			sameSet(x.AllowedMethods, y.AllowedMethods, true) &&
			sameSet(x.AllowedHeaders, y.AllowedHeaders, true) &&
			sameSet(x.ExposeHeaders, y.ExposeHeaders, true)
	})
}

// SameLifecycle reports whether two rule lists say the same, in any order.
func SameLifecycle(a, b []ExpirationRule) bool {
	if len(a) != len(b) {
		return false
	}
	key := func(r ExpirationRule) string {
		if r.Foreign {
			return "\x00foreign"
		}
		return r.ID + "\x00" + r.Prefix + "\x00" + strconv.Itoa(r.Days)
	}
	left := make([]string, 0, len(a))
	for _, r := range a {
		if r.Foreign {
			return false
		}
		left = append(left, key(r))
	}
	right := make([]string, 0, len(b))
	for _, r := range b {
		if r.Foreign {
			return false
		}
		right = append(right, key(r))
	}
	slices.Sort(left)
	slices.Sort(right)
	return slices.Equal(left, right)
}

func sameSet(a, b []string, foldCase bool) bool {
	norm := func(in []string) []string {
		out := make([]string, 0, len(in))
		for _, s := range in {
			if foldCase {
				s = strings.ToLower(s)
			}
			out = append(out, s)
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return slices.Equal(norm(a), norm(b))
}
