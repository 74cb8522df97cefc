package s3

import (
	"regexp"
	"slices"
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
		want      string // ending in "--": that prefix, then the hash
	}{
		{name: "readable", namespace: "team", object: "assets", want: "team-assets"},
		{name: "readable, a name with single dashes", namespace: "acme", object: "dev-data", want: "acme-dev-data"},
		// The pair the previous rule gave the same name: the namespace has a
		// '-', so "acme-dev-data" could be read two ways; it is hashed.
		{name: "a namespace with a dash is hashed", namespace: "acme-dev", object: "data", want: "acme-dev-data--"},
		{name: "dots are hashed", namespace: "team", object: "assets.v2", want: "team-assets-v2--"},
		{name: "a double dash is hashed", namespace: "ns", object: "a--b", want: "ns-a-b--"},
		{name: "many dots collapse", namespace: "ns", object: "a..b", want: "ns-a-b--"},
		{name: "upper case is lowered", namespace: "Team", object: "Assets", want: "team-assets--"},
		{name: "underscores become dashes", namespace: "ns", object: "my_bucket", want: "ns-my-bucket--"},
		{name: "a reserved suffix is hashed", namespace: "team", object: "x-s3alias", want: "team-x-s3alias--"},
		{name: "a reserved prefix falls back", namespace: "sthree", object: "x", want: "trellis--"},
		{name: "xn alone would make xn--", namespace: "xn", object: "", want: "trellis--"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := DeriveBucketName(tt.namespace, tt.object)
			if strings.HasSuffix(tt.want, "--") {
				g.Expect(got).To(MatchRegexp("^" + regexp.QuoteMeta(tt.want) + "[0-9a-f]{20}$"))
			} else {
				g.Expect(got).To(Equal(tt.want))
			}
			g.Expect(ValidateBucketName(got)).To(Succeed())
		})
	}
	g := NewWithT(t)
	g.Expect(DeriveBucketName("a", "b.c")).NotTo(Equal(DeriveBucketName("a", "b-c")), "names that sanitise alike must not collide")
	g.Expect(DeriveBucketName("acme", "dev-data")).NotTo(Equal(DeriveBucketName("acme-dev", "data")), "namespaces must not take each other's names")
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
		g.Expect(got).To(MatchRegexp(`[a-z0-9]--[0-9a-f]{20}$`))
	}
	g.Expect(a).NotTo(Equal(b), "a common prefix must not make two buckets share a name")
	// Deterministic: the same input always gives the same name.
	g.Expect(DeriveBucketName(ns, prefix+"-first")).To(Equal(a))

	// Inputs that only differ past the cut, with a namespace short enough that
	// the name itself is cut, also differ.
	c := DeriveBucketName("team", prefix+"-x")
	d := DeriveBucketName("team", prefix+"-y")
	g.Expect(c).NotTo(Equal(d))
	g.Expect(len(c)).To(BeNumerically("<=", 63))
	g.Expect(len(d)).To(BeNumerically("<=", 63))
}

// TestDerivedNamesNeverCollide: every (namespace, name) pair over a small
// alphabet that holds every character class the rule treats apart (letters,
// '-', '.', upper case), up to a length where both forms and every
// ambiguous split occur, derives a name no other pair derives.
func TestDerivedNamesNeverCollide(t *testing.T) {
	var words func(alphabet string, n int) []string
	words = func(alphabet string, n int) []string {
		if n == 0 {
			return []string{""}
		}
		shorter := words(alphabet, n-1)
		out := slices.Clone(shorter)
		for _, w := range shorter {
			if len(w) == n-1 {
				for _, c := range alphabet {
					out = append(out, w+string(c))
				}
			}
		}
		return out
	}
	type pair struct{ namespace, name string }
	seen := map[string]pair{}
	check := func(p pair) {
		t.Helper()
		got := DeriveBucketName(p.namespace, p.name)
		if other, ok := seen[got]; ok && other != p {
			t.Fatalf("%q/%q and %q/%q both derive %q", other.namespace, other.name, p.namespace, p.name, got)
		}
		seen[got] = p
	}
	for _, alphabet := range []struct {
		chars string
		n     int
	}{{"ab-", 5}, {"a-.A_", 3}} {
		all := words(alphabet.chars, alphabet.n)
		for _, ns := range all {
			for _, name := range all {
				check(pair{ns, name})
			}
		}
	}
	readable, hashed := 0, 0
	for name := range seen {
		if strings.Contains(name, "--") {
			hashed++
		} else {
			readable++
		}
	}
	t.Logf("%d pairs: %d readable names, %d hashed", len(seen), readable, hashed)
	if readable == 0 || hashed == 0 {
		t.Fatal("the corpus must hold both forms")
	}
}

// TestDerivedNamesResistChosenNames: an attacker who knows the name another
// namespace will derive picks a namespace and a name to derive it first.
// Every way of cutting the victim's name into namespace and name, with and
// without the hash, derives something else.
func TestDerivedNamesResistChosenNames(t *testing.T) {
	victims := [][2]string{
		{"acme-dev", "data"}, {"acme", "dev-data"}, {"team-a", "assets"}, {"team", "a-assets"},
		{"ns", "a.b"}, {"x", strings.Repeat("y", 70)}, {"sthree", "x"},
	}
	for _, v := range victims {
		target := DeriveBucketName(v[0], v[1])
		hash := ""
		if i := strings.LastIndex(target, "--"); i >= 0 {
			hash = target[i+2:]
		}
		var tries [][2]string
		for i := range len(target) + 1 {
			tries = append(tries, [2]string{target[:i], target[i:]})
			if i < len(target) && target[i] == '-' {
				tries = append(tries, [2]string{target[:i], target[i+1:]})
			}
		}
		if hash != "" {
			// A name that ends like the hash, with the victim's own base.
			base := strings.TrimSuffix(target, "--"+hash)
			tries = append(tries, [2]string{v[0], v[1] + "--" + hash}, [2]string{"acme", "dev-data--" + hash},
				[2]string{base, hash}, [2]string{base + "-", hash}, [2]string{strings.ToUpper(v[0]), v[1]})
		}
		for _, try := range tries {
			if try == v {
				continue
			}
			if got := DeriveBucketName(try[0], try[1]); got == target {
				t.Errorf("%q/%q derives %q, the name of %q/%q", try[0], try[1], got, v[0], v[1])
			}
		}
	}
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
