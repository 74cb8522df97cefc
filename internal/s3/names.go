package s3

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
)

var (
	bucketNameChars = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`)
	// ipLike is the CRD's rule: four dot-separated numbers, valid IP or not.
	ipLike = regexp.MustCompile(`^[0-9]+[.][0-9]+[.][0-9]+[.][0-9]+$`)
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

// Derived bucket names. A StorageBucket that gives no bucketName gets one
// made from its namespace and name, and no two (namespace, name) pairs may
// derive the same one: the first to create a bucket would hold a name another
// namespace derives, and the other would find it taken. So a derived name is
// either
//
//   - readable, "<namespace>-<name>", only where that cannot be read two ways:
//     a namespace without '-' (so the first '-' ends it), a name of letters,
//     digits and single '-' (no '.', no "--"), the whole a valid bucket name;
//     such a name never contains "--"; or
//   - hashed, "<base>--<hash>": base is namespace-name made S3-safe (runs of
//     anything but letters and digits become one '-') and cut to fit; hash is
//     the first 20 hex digits (80 bits) of the SHA-256 of the length-prefixed
//     namespace and name, which no one can grind to meet another's. It always
//     contains "--", so it never equals a readable name.
//
// acme/dev-data is readable, acme-dev-data; acme-dev/data is hashed,
// acme-dev-data--<hash>. Explicit bucketNames containing "--" are never a
// namespace's own names (the controller's ownBucketName), so no namespace
// can name another's hashed bucket either.

// DerivedHashLen is the length of the hash that ends a hashed derived name.
const DerivedHashLen = 20

var (
	readableNamespace = regexp.MustCompile(`^[a-z0-9]+$`)
	readableName      = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	notAlnum          = regexp.MustCompile(`[^a-z0-9]+`)
)

// DeriveBucketName names the bucket of a StorageBucket that gives none:
// readable "<namespace>-<name>" where that is unambiguous, else
// "<base>--<hash>" (see above). Distinct (namespace, name) pairs never derive
// the same name.
func DeriveBucketName(namespace, name string) string {
	if readableNamespace.MatchString(namespace) && readableName.MatchString(name) {
		if r := namespace + "-" + name; ValidateBucketName(r) == nil {
			return r
		}
	}
	return hashedBucketName(namespace, name)
}

func hashedBucketName(namespace, name string) string {
	// The length prefix makes the encoding one-to-one whatever the strings
	// hold: ("a/b", "c") and ("a", "b/c") hash apart.
	sum := sha256.Sum256([]byte(strconv.Itoa(len(namespace)) + ":" + namespace + "/" + name))
	hash := hex.EncodeToString(sum[:])[:DerivedHashLen]
	base := strings.Trim(notAlnum.ReplaceAllString(strings.ToLower(namespace+"-"+name), "-"), "-")
	if room := 63 - 2 - DerivedHashLen; len(base) > room {
		base = strings.TrimRight(base[:room], "-")
	}
	// A base the rules refuse as a prefix (xn, sthree-…) falls back to a
	// fixed one; the hash still tells the buckets apart.
	if candidate := base + "--" + hash; base != "" && ValidateBucketName(candidate) == nil {
		return candidate
	}
	return "trellis--" + hash
}
