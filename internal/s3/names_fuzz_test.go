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
