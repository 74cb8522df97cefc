package s3

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"regexp"
	"strings"
)

var (
	bucketNameChars = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`)
	// ipLike is the CRD's rule: four dot-separated numbers, valid IP or not.
	ipLike        = regexp.MustCompile(`^[0-9]+[.][0-9]+[.][0-9]+[.][0-9]+$`)
	notBucketChar = regexp.MustCompile(`[^a-z0-9-]+`)
)

// ValidateBucketName applies S3's bucket-naming rules (the same ones the CRD
// enforces at admission).
func ValidateBucketName(name string) error {
	switch {
	case len(name) < 3 || len(name) > 63:
		return fmt.Errorf("bucket name %q must be 3 to 63 characters", name)
	case !bucketNameChars.MatchString(name):
		return fmt.Errorf("bucket name %q must be lower-case letters, digits, '.' or '-', starting and ending with a letter or digit", name)
	case strings.Contains(name, "..") || strings.Contains(name, ".-") || strings.Contains(name, "-."):
		return fmt.Errorf("bucket name %q must not contain '..', '.-' or '-.'", name)
	case ipLike.MatchString(name) || net.ParseIP(name) != nil:
		return fmt.Errorf("bucket name %q must not be an IP address", name)
	case strings.HasPrefix(name, "xn--") || strings.HasPrefix(name, "sthree-") ||
		strings.HasSuffix(name, "-s3alias") || strings.HasSuffix(name, "--ol-s3"):
		return fmt.Errorf("bucket name %q uses a prefix or suffix S3 reserves", name)
	}
	return nil
}

// DeriveBucketName names the bucket of a StorageBucket that gives none:
// "<namespace>-<name>" when that is already a valid bucket name; otherwise
// made S3-safe, cut if too long, and ended with a hash of the full
// namespace/name, so two StorageBuckets never derive the same name (a.b and
// a-b in the same namespace would both sanitise to a-b).
func DeriveBucketName(namespace, name string) string {
	raw := namespace + "-" + name
	base := strings.Trim(notBucketChar.ReplaceAllString(strings.ToLower(raw), "-"), "-")
	if base == raw && len(base) >= 3 && len(base) <= 63 && ValidateBucketName(base) == nil {
		return base
	}
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	suffix := hex.EncodeToString(sum[:])[:10]
	if len(base) > 52 {
		base = strings.TrimRight(base[:52], "-")
	}
	if candidate := base + "-" + suffix; base != "" && ValidateBucketName(candidate) == nil {
		return candidate
	}
	return "trellis-" + suffix
}
