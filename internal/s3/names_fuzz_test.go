package s3

import (
	"strings"
	"testing"
)

// FuzzValidateBucketName: whatever it accepts obeys the rules S3 states.
func FuzzValidateBucketName(f *testing.F) {
	for _, seed := range []string{"abc", "my-bucket.v2", "192.168.1.1", "xn--abc", "a..b", "-abc", "ABC", strings.Repeat("a", 64)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if ValidateBucketName(name) != nil {
			return
		}
		if len(name) < 3 || len(name) > 63 {
			t.Fatalf("accepted %q of length %d", name, len(name))
		}
		for _, r := range name {
			if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' && r != '.' {
				t.Fatalf("accepted %q with %q", name, r)
			}
		}
		if strings.Contains(name, "..") || ipLike.MatchString(name) {
			t.Fatalf("accepted %q", name)
		}
	})
}

// FuzzDerivedBucketNamesDiffer: two distinct (namespace, name) pairs never
// derive the same bucket name. The seeds are the pair the previous rule
// confused, and names chosen to end like the other's hash.
func FuzzDerivedBucketNamesDiffer(f *testing.F) {
	victim := DeriveBucketName("acme-dev", "data")
	hash := victim[strings.LastIndex(victim, "--")+2:]
	f.Add("acme", "dev-data", "acme-dev", "data")
	f.Add("acme", "dev-data--"+hash, "acme-dev", "data")
	f.Add("acme-dev-data", hash, "acme-dev", "data")
	f.Add("acme-dev-data-", hash, "acme-dev", "data")
	f.Add("a", "b.c", "a", "b-c")
	f.Add("a/b", "c", "a", "b/c")
	f.Add("team", "a-assets", "team-a", "assets")
	f.Fuzz(func(t *testing.T, ns1, name1, ns2, name2 string) {
		if ns1 == ns2 && name1 == name2 {
			return
		}
		if a, b := DeriveBucketName(ns1, name1), DeriveBucketName(ns2, name2); a == b {
			t.Fatalf("%q/%q and %q/%q both derive %q", ns1, name1, ns2, name2, a)
		}
	})
}
