package s3

import (
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestValidateBucketName(t *testing.T) {
	tests := []struct {
		name  string
		input string
		valid bool
	}{
		{name: "three letters", input: "abc", valid: true},
		{name: "dots and dashes", input: "my-bucket.v2", valid: true},
		{name: "digits only", input: "123", valid: true},
		{name: "63 characters", input: strings.Repeat("a", 63), valid: true},
		{name: "2 characters", input: "ab", valid: false},
		{name: "empty", input: "", valid: false},
		{name: "64 characters", input: strings.Repeat("a", 64), valid: false},
		{name: "uppercase", input: "My-Bucket", valid: false},
		{name: "underscore", input: "my_bucket", valid: false},
		{name: "space", input: "my bucket", valid: false},
		{name: "leading dash", input: "-abc", valid: false},
		{name: "trailing dash", input: "abc-", valid: false},
		{name: "leading dot", input: ".abc", valid: false},
		{name: "trailing dot", input: "abc.", valid: false},
		{name: "double dot", input: "a..b", valid: false},
		{name: "dot dash", input: "a.-b", valid: false},
		{name: "dash dot", input: "a-.b", valid: false},
		{name: "IP address", input: "192.168.1.1", valid: false},
		{name: "xn-- prefix", input: "xn--abc", valid: false},
		{name: "sthree- prefix", input: "sthree-x", valid: false},
		{name: "-s3alias suffix", input: "abc-s3alias", valid: false},
		{name: "--ol-s3 suffix", input: "abc--ol-s3", valid: false},
		{name: "double dash elsewhere is fine", input: "a--b", valid: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := ValidateBucketName(tt.input)
			if tt.valid {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(HaveOccurred())
				// The error names the offending bucket so a person can find it.
				g.Expect(err.Error()).To(ContainSubstring("%q", tt.input))
			}
		})
	}
}

func TestDeriveBucketName(t *testing.T) {
	tests := []struct {
		name      string
		namespace string
		object    string
		want      string
	}{
		{name: "plain", namespace: "team-a", object: "assets", want: "team-a-assets"},
		// Anything that had to be changed gets a hash of the original, so
		// names that sanitise alike (assets.v2, assets-v2) stay apart.
		{name: "dots become dashes, plus a hash", namespace: "team-a", object: "assets.v2", want: "team-a-assets-v2-"},
		{name: "many dots collapse", namespace: "ns", object: "a..b", want: "ns-a-b-"},
		{name: "upper case is lowered", namespace: "Team", object: "Assets", want: "team-assets-"},
		{name: "underscores become dashes", namespace: "ns", object: "my_bucket", want: "ns-my-bucket-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := DeriveBucketName(tt.namespace, tt.object)
			if strings.HasSuffix(tt.want, "-") {
				g.Expect(got).To(MatchRegexp("^" + regexp.QuoteMeta(tt.want) + "[0-9a-f]{10}$"))
			} else {
				g.Expect(got).To(Equal(tt.want))
			}
			g.Expect(ValidateBucketName(got)).To(Succeed())
		})
	}
	g := NewWithT(t)
	g.Expect(DeriveBucketName("a", "b.c")).NotTo(Equal(DeriveBucketName("a", "b-c")), "names that sanitise alike must not collide")
}

func TestDeriveBucketNameLongNamesAreCutAndHashed(t *testing.T) {
	g := NewWithT(t)
	prefix := strings.Repeat("p", 60)
	ns := strings.Repeat("n", 63)

	a := DeriveBucketName(ns, prefix+"-first")
	b := DeriveBucketName(ns, prefix+"-second")

	for _, got := range []string{a, b} {
		g.Expect(len(got)).To(BeNumerically("<=", 63))
		g.Expect(ValidateBucketName(got)).To(Succeed())
		// It keeps a readable prefix of namespace-name.
		g.Expect(got).To(HavePrefix(ns[:40]))
		g.Expect(got).To(MatchRegexp(`-[0-9a-f]{10}$`))
	}
	g.Expect(a).NotTo(Equal(b), "a common prefix must not make two buckets share a name")
	// Deterministic: the same input always gives the same name.
	g.Expect(DeriveBucketName(ns, prefix+"-first")).To(Equal(a))

	// Inputs that only differ past the cut, with a namespace short enough that
	// the name itself is cut, also differ.
	c := DeriveBucketName("team-a", prefix+"-x")
	d := DeriveBucketName("team-a", prefix+"-y")
	g.Expect(c).NotTo(Equal(d))
	g.Expect(len(c)).To(BeNumerically("<=", 63))
	g.Expect(len(d)).To(BeNumerically("<=", 63))
}

func TestDeriveBucketNameIsAlwaysValid(t *testing.T) {
	tests := []struct{ namespace, name string }{
		{"", ""},
		{"a", ""},
		{"", "b"},
		{"a", "b"},
		{"-", "-"},
		{".", "."},
		{"___", "___"},
		{"xn", "-abc"},        // would start with the reserved "xn--"
		{"sthree", "bucket"},  // would start with the reserved "sthree-"
		{"team", "x-s3alias"}, // would end with the reserved "-s3alias"
		{"team", "x--ol-s3"},  // would end with the reserved "--ol-s3"
		{"192", "168.1.1"},    // dots become dashes: never an IP
		{"ünïcödé", "名前"},
		{"UPPER", "CASE.Name"},
		{"\x00\xff", "\xfe"},
		{strings.Repeat("a", 52), "b"},
		{strings.Repeat("a", 51), "-b"},
		{strings.Repeat("-", 100), strings.Repeat(".", 100)},
		{strings.Repeat("a", 200), strings.Repeat("b", 200)},
		{strings.Repeat("a-", 40), strings.Repeat("-b", 40)},
		{strings.Repeat("ab", 26) + "-", "c"}, // the cut lands on a dash
		{"xn--" + strings.Repeat("a", 80), "b"},
	}
	for _, tt := range tests {
		t.Run(tt.namespace+"/"+tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := DeriveBucketName(tt.namespace, tt.name)
			g.Expect(ValidateBucketName(got)).To(Succeed(), "DeriveBucketName(%q, %q) = %q", tt.namespace, tt.name, got)
			g.Expect(DeriveBucketName(tt.namespace, tt.name)).To(Equal(got))
		})
	}
}

func FuzzDeriveBucketName(f *testing.F) {
	f.Add("team-a", "assets")
	f.Add("", "")
	f.Add("xn", "-abc")
	f.Add(strings.Repeat("a", 60), strings.Repeat("b", 60))
	f.Fuzz(func(t *testing.T, namespace, name string) {
		got := DeriveBucketName(namespace, name)
		if err := ValidateBucketName(got); err != nil {
			t.Fatalf("DeriveBucketName(%q, %q) = %q: %v", namespace, name, got, err)
		}
		if again := DeriveBucketName(namespace, name); again != got {
			t.Fatalf("DeriveBucketName(%q, %q) is not deterministic: %q then %q", namespace, name, got, again)
		}
	})
}
