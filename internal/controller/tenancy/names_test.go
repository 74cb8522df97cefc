package tenancy

import (
	"errors"
	"regexp/syntax"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
)

// unitTenant builds a Tenant for the pure (no API server) tests of this package.
func unitTenant(name, uid, prefix string, namespaces ...string) *tenancyv1.Tenant {
	return &tenancyv1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid), Generation: 1},
		Spec: tenancyv1.TenantSpec{
			Namespaces:      namespaces,
			NamespacePrefix: ptr.To(prefix),
			Admins:          []tenancyv1.Subject{{Kind: rbacv1.GroupKind, Name: name + "-admins", APIGroup: rbacv1.GroupName}},
		},
	}
}

func TestNamesNamespaceNames(t *testing.T) {
	tests := []struct {
		name       string
		prefix     string
		namespaces []string
		want       []string
	}{
		{name: "prefix in spec order", prefix: "team-a-", namespaces: []string{"prod", "dev", "ci"}, want: []string{"team-a-prod", "team-a-dev", "team-a-ci"}},
		{name: "no prefix", prefix: "", namespaces: []string{"b", "a"}, want: []string{"b", "a"}},
		{name: "single", prefix: "x-", namespaces: []string{"y"}, want: []string{"x-y"}},
		{name: "empty spec", prefix: "x-", namespaces: nil, want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := namespaceNames(unitTenant("t", "uid", tt.prefix, tt.namespaces...))
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestNamesTenantRoleName(t *testing.T) {
	g := NewWithT(t)
	g.Expect(tenantRoleName(unitTenant("acme", "uid", ""))).To(Equal("trellis:tenant:acme"))
}

func TestProtectionProtected(t *testing.T) {
	extra, err := CompileProtectedPattern("protected-.*|legacy")
	if err != nil {
		t.Fatal(err)
	}
	p := Protection{ManagerNamespace: "trellis-system", Extra: extra}

	tests := []struct {
		name string
		ns   string
		// want is a substring of the reason; "" means the name is allowed.
		want string
	}{
		{name: "kube-system", ns: "kube-system", want: "kube-"},
		{name: "kube-public", ns: "kube-public", want: "kube-"},
		{name: "kube-anything", ns: "kube-anything", want: "kube-"},
		{name: "default", ns: "default", want: "default namespace"},
		{name: "manager namespace", ns: "trellis-system", want: "Trellis runs in"},
		{name: "extra pattern prefix", ns: "protected-a", want: `protected pattern`},
		{name: "extra pattern alternative", ns: "legacy", want: `protected pattern`},
		{name: "upper case and underscore", ns: "Bad_Name", want: "not a valid namespace name"},
		{name: "64 characters", ns: strings.Repeat("a", 64), want: "not a valid namespace name"},
		{name: "trailing dash", ns: "dev-", want: "not a valid namespace name"},
		{name: "empty", ns: "", want: "not a valid namespace name"},
		{name: "plain name", ns: "team-a-dev", want: ""},
		{name: "63 characters", ns: strings.Repeat("a", 63), want: ""},
		{name: "kube without dash", ns: "kubeflow", want: ""},
		{name: "contains default", ns: "default-2", want: ""},
		{name: "contains manager namespace", ns: "my-trellis-system", want: ""},
		{name: "pattern only matches whole names", ns: "not-protected-a", want: ""},
		{name: "pattern alternative is anchored too", ns: "legacy-2", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := p.Protected(tt.ns)
			if tt.want == "" {
				g.Expect(got).To(BeEmpty())
				return
			}
			g.Expect(got).To(ContainSubstring(tt.want))
		})
	}
}

func TestProtectionWithoutExtraPattern(t *testing.T) {
	g := NewWithT(t)
	p := Protection{ManagerNamespace: "trellis-system"}
	g.Expect(p.Protected("protected-a")).To(BeEmpty())
	g.Expect(p.Protected("kube-system")).NotTo(BeEmpty())
	g.Expect(p.Protected("trellis-system")).NotTo(BeEmpty())
}

func TestProtectedPatternCompile(t *testing.T) {
	tests := []struct {
		pattern string
		name    string
		match   bool
	}{
		{pattern: "team", name: "team", match: true},
		{pattern: "team", name: "myteam-x", match: false},
		{pattern: "team", name: "team-x", match: false},
		{pattern: "team", name: "my-team", match: false},
		{pattern: "prod-.*", name: "prod-a", match: true},
		{pattern: "prod-.*", name: "preprod-a", match: false},
		{pattern: "a|b", name: "a", match: true},
		{pattern: "a|b", name: "b", match: true},
		{pattern: "a|b", name: "ab", match: false},
		{pattern: "a|b", name: "xa", match: false},
		{pattern: "a|b", name: "bx", match: false},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+" "+tt.name, func(t *testing.T) {
			g := NewWithT(t)
			re, err := CompileProtectedPattern(tt.pattern)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(re).NotTo(BeNil())
			g.Expect(re.MatchString(tt.name)).To(Equal(tt.match))
		})
	}
}

func TestProtectedPatternEmptyIsNil(t *testing.T) {
	g := NewWithT(t)
	re, err := CompileProtectedPattern("")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(re).To(BeNil())
}

func TestProtectedPatternInvalid(t *testing.T) {
	for _, pattern := range []string{"(", "[a-", "a**", `\`} {
		t.Run(pattern, func(t *testing.T) {
			g := NewWithT(t)
			re, err := CompileProtectedPattern(pattern)
			g.Expect(err).To(HaveOccurred())
			g.Expect(re).To(BeNil())
			g.Expect(err.Error()).To(ContainSubstring("--tenant-protected-namespaces"))
			var syntaxErr *syntax.Error
			g.Expect(errors.As(err, &syntaxErr)).To(BeTrue(), "the regexp error is wrapped")
		})
	}
}

func TestProtectedPatternUsedByProtection(t *testing.T) {
	g := NewWithT(t)
	re, err := CompileProtectedPattern("team")
	g.Expect(err).NotTo(HaveOccurred())
	p := Protection{ManagerNamespace: "trellis-system", Extra: re}
	g.Expect(p.Protected("team")).To(ContainSubstring("protected pattern"))
	g.Expect(p.Protected("myteam-x")).To(BeEmpty())
}

func TestNamesIsMarkedBy(t *testing.T) {
	tenant := unitTenant("acme", "uid-1", "")
	tests := []struct {
		name        string
		annotations map[string]string
		want        bool
	}{
		{name: "matching uid", annotations: map[string]string{TenantUIDAnnotation: "uid-1"}, want: true},
		{name: "matching uid among others", annotations: map[string]string{"x": "y", TenantUIDAnnotation: "uid-1"}, want: true},
		{name: "other uid", annotations: map[string]string{TenantUIDAnnotation: "uid-2"}, want: false},
		{name: "empty uid", annotations: map[string]string{TenantUIDAnnotation: ""}, want: false},
		{name: "nil annotations", annotations: nil, want: false},
		{name: "label key instead of annotation", annotations: map[string]string{TenantLabel: "acme"}, want: false},
		{name: "uid under another key", annotations: map[string]string{"other": "uid-1"}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(isMarkedBy(tt.annotations, tenant)).To(Equal(tt.want))
		})
	}
}

// TestNamesReleasedBy: a namespace is the Tenant object's release by its
// name and its UID; one labelled with the name alone is no one's for sure
// (releaseUnrecorded), not the Tenant's.
func TestNamesReleasedBy(t *testing.T) {
	tenant := unitTenant("acme", "uid-1", "")
	ns := func(labels, annotations map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: labels, Annotations: annotations}}
	}
	released := map[string]string{ReleasedFromLabel: "acme"}
	tests := map[string]struct {
		ns                   *corev1.Namespace
		released, unrecorded bool
	}{
		"its name and UID":                 {ns: ns(released, map[string]string{ReleasedFromUIDAnnotation: "uid-1"}), released: true},
		"released before the UID was kept": {ns: ns(released, nil), unrecorded: true},
		"an earlier Tenant of the name":    {ns: ns(released, map[string]string{ReleasedFromUIDAnnotation: "uid-0"})},
		"an empty UID":                     {ns: ns(released, map[string]string{ReleasedFromUIDAnnotation: ""})},
		"another Tenant's":                 {ns: ns(map[string]string{ReleasedFromLabel: "bolt"}, map[string]string{ReleasedFromUIDAnnotation: "uid-1"})},
		"another Tenant's, unrecorded":     {ns: ns(map[string]string{ReleasedFromLabel: "bolt"}, nil)},
		"its UID without the label":        {ns: ns(nil, map[string]string{ReleasedFromUIDAnnotation: "uid-1"})},
		"held, not released":               {ns: ns(map[string]string{TenantLabel: "acme"}, map[string]string{TenantUIDAnnotation: "uid-1"})},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(releasedBy(tt.ns, tenant)).To(Equal(tt.released))
			g.Expect(releaseUnrecorded(tt.ns, tenant)).To(Equal(tt.unrecorded))
		})
	}
}
