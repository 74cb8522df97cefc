package s3

import (
	"bytes"
	"context"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/lifecycle"
	. "github.com/onsi/gomega"
)

// TestSettingsAgainstVersitygw: each bucket setting Trellis manages, against
// the real server: what reads back is what was set, "no setting" reads as
// the empty value, and what versitygw v1.8.0 does not implement says so.
func TestSettingsAgainstVersitygw(t *testing.T) {
	gw := startGateway(t)
	ctx := context.Background()
	g := NewWithT(t)
	c, err := New(gw.config())
	g.Expect(err).NotTo(HaveOccurred())
	const bucket = "trellis-settings-test"
	g.Expect(c.CreateBucket(ctx, bucket)).To(Succeed())

	t.Run("versioning", func(t *testing.T) {
		g := NewWithT(t)
		v, err := c.Versioning(ctx, bucket)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(v).To(BeEmpty(), "never enabled")
		g.Expect(c.SetVersioning(ctx, bucket, VersioningEnabled)).To(Succeed())
		v, err = c.Versioning(ctx, bucket)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(v).To(Equal(VersioningEnabled))

		// A versioned bucket whose only object was deleted holds versions:
		// not empty, as the store agrees.
		mc := gw.direct(t)
		_, err = mc.PutObject(ctx, bucket, "v.txt", bytes.NewReader([]byte("v1")), 2, minio.PutObjectOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(mc.RemoveObject(ctx, bucket, "v.txt", minio.RemoveObjectOptions{})).To(Succeed())
		n, err := c.CountObjects(ctx, bucket, 10)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(BeNumerically(">=", 1), "the old version and the delete marker count")
		g.Expect(c.DeleteBucket(ctx, bucket)).NotTo(Succeed())

		g.Expect(c.SetVersioning(ctx, bucket, VersioningSuspended)).To(Succeed())
		v, err = c.Versioning(ctx, bucket)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(v).To(Equal(VersioningSuspended))
	})

	t.Run("policy", func(t *testing.T) {
		g := NewWithT(t)
		p, err := c.Policy(ctx, bucket)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p).To(BeEmpty())
		doc := `{"Version":"2012-10-17","Statement":[{"Sid":"Public","Effect":"Allow","Principal":"*","Action":["s3:GetObject"],"Resource":["arn:aws:s3:::` + bucket + `/public/*"]}]}`
		g.Expect(c.SetPolicy(ctx, bucket, doc)).To(Succeed())
		p, err = c.Policy(ctx, bucket)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(SamePolicy(p, doc)).To(BeTrue(), p)

		// The store judges what statements say: an unknown principal is refused.
		err = c.SetPolicy(ctx, bucket, `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":["NOSUCHACCOUNT0000"]},"Action":["s3:GetObject"],"Resource":["arn:aws:s3:::`+bucket+`/*"]}]}`)
		g.Expect(err).To(HaveOccurred())
		reason, msg := Classify(err)
		g.Expect(reason).To(Equal(ReasonInvalidRequest), "%v", err)
		g.Expect(msg).To(ContainSubstring("principal"))

		g.Expect(c.SetPolicy(ctx, bucket, "")).To(Succeed())
		p, err = c.Policy(ctx, bucket)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p).To(BeEmpty())
	})

	t.Run("cors", func(t *testing.T) {
		g := NewWithT(t)
		rules, err := c.CORS(ctx, bucket)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rules).To(BeEmpty())
		want := []CORSRule{
			{AllowedOrigins: []string{"https://app.example.com"}, AllowedMethods: []string{"GET", "PUT"}, AllowedHeaders: []string{"*"}, ExposeHeaders: []string{"ETag"}, MaxAgeSeconds: 300},
			{AllowedOrigins: []string{"*"}, AllowedMethods: []string{"GET"}},
		}
		g.Expect(c.SetCORS(ctx, bucket, want)).To(Succeed())
		rules, err = c.CORS(ctx, bucket)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(SameCORS(rules, want)).To(BeTrue(), "%+v", rules)
		g.Expect(c.SetCORS(ctx, bucket, nil)).To(Succeed())
		rules, err = c.CORS(ctx, bucket)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rules).To(BeEmpty())
	})

	t.Run("lifecycle is not implemented by versitygw", func(t *testing.T) {
		g := NewWithT(t)
		_, err := c.Lifecycle(ctx, bucket)
		g.Expect(err).To(HaveOccurred())
		reason, msg := Classify(err)
		g.Expect(reason).To(Equal(ReasonNotSupported), "%v", err)
		g.Expect(msg).To(ContainSubstring("NotImplemented"))
		err = c.SetLifecycle(ctx, bucket, []ExpirationRule{{ID: "tmp", Prefix: "tmp/", Days: 7}})
		reason, _ = Classify(err)
		g.Expect(reason).To(Equal(ReasonNotSupported), "%v", err)
	})
}

func TestSameCORS(t *testing.T) {
	base := CORSRule{AllowedOrigins: []string{"https://a", "https://b"}, AllowedMethods: []string{"GET", "PUT"}, AllowedHeaders: []string{"X-A"}, MaxAgeSeconds: 10}
	with := func(f func(*CORSRule)) []CORSRule { r := base; f(&r); return []CORSRule{r} }
	cases := map[string]struct {
		a, b []CORSRule
		want bool
	}{
		"same":                  {a: []CORSRule{base}, b: []CORSRule{base}, want: true},
		"origins reordered":     {a: []CORSRule{base}, b: with(func(r *CORSRule) { r.AllowedOrigins = []string{"https://b", "https://a"} }), want: true},
		"method case":           {a: []CORSRule{base}, b: with(func(r *CORSRule) { r.AllowedMethods = []string{"get", "put"} }), want: true},
		"header case":           {a: []CORSRule{base}, b: with(func(r *CORSRule) { r.AllowedHeaders = []string{"x-a"} }), want: true},
		"another origin":        {a: []CORSRule{base}, b: with(func(r *CORSRule) { r.AllowedOrigins = []string{"https://a"} })},
		"origin case matters":   {a: []CORSRule{base}, b: with(func(r *CORSRule) { r.AllowedOrigins = []string{"https://A", "https://b"} })},
		"max age":               {a: []CORSRule{base}, b: with(func(r *CORSRule) { r.MaxAgeSeconds = 11 })},
		"rule order matters":    {a: []CORSRule{base, {AllowedOrigins: []string{"*"}}}, b: []CORSRule{{AllowedOrigins: []string{"*"}}, base}},
		"none and none":         {a: nil, b: []CORSRule{}, want: true},
		"none and one":          {a: nil, b: []CORSRule{base}},
		"empty lists and unset": {a: []CORSRule{{AllowedOrigins: []string{"*"}, ExposeHeaders: []string{}}}, b: []CORSRule{{AllowedOrigins: []string{"*"}}}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(SameCORS(tc.a, tc.b)).To(Equal(tc.want))
		})
	}
}

func TestSameLifecycle(t *testing.T) {
	a := ExpirationRule{ID: "a", Prefix: "tmp/", Days: 7}
	b := ExpirationRule{ID: "b", Prefix: "logs/", Days: 30}
	cases := map[string]struct {
		x, y []ExpirationRule
		want bool
	}{
		"same":          {x: []ExpirationRule{a, b}, y: []ExpirationRule{a, b}, want: true},
		"any order":     {x: []ExpirationRule{a, b}, y: []ExpirationRule{b, a}, want: true},
		"other days":    {x: []ExpirationRule{a}, y: []ExpirationRule{{ID: "a", Prefix: "tmp/", Days: 8}}},
		"other prefix":  {x: []ExpirationRule{a}, y: []ExpirationRule{{ID: "a", Prefix: "tmp", Days: 7}}},
		"one more":      {x: []ExpirationRule{a}, y: []ExpirationRule{a, b}},
		"foreign rule":  {x: []ExpirationRule{a}, y: []ExpirationRule{{ID: "a", Prefix: "tmp/", Days: 7, Foreign: true}}},
		"none and none": {x: nil, y: []ExpirationRule{}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(SameLifecycle(tc.x, tc.y)).To(Equal(tc.want))
		})
	}
}

func TestExpirationRuleOf(t *testing.T) {
	plain := lifecycle.Rule{ID: "a", Status: "Enabled", RuleFilter: lifecycle.Filter{Prefix: "tmp/"}, Expiration: lifecycle.Expiration{Days: 7}}
	cases := map[string]struct {
		rule        func(r *lifecycle.Rule)
		wantForeign bool
	}{
		"expiration by days":   {rule: func(*lifecycle.Rule) {}},
		"old-style prefix":     {rule: func(r *lifecycle.Rule) { r.RuleFilter.Prefix, r.Prefix = "", "tmp/" }},
		"disabled":             {rule: func(r *lifecycle.Rule) { r.Status = "Disabled" }, wantForeign: true},
		"a transition too":     {rule: func(r *lifecycle.Rule) { r.Transition = lifecycle.Transition{Days: 3, StorageClass: "GLACIER"} }, wantForeign: true},
		"noncurrent versions":  {rule: func(r *lifecycle.Rule) { r.NoncurrentVersionExpiration.NoncurrentDays = 3 }, wantForeign: true},
		"abort uploads":        {rule: func(r *lifecycle.Rule) { r.AbortIncompleteMultipartUpload.DaysAfterInitiation = 2 }, wantForeign: true},
		"tag filter":           {rule: func(r *lifecycle.Rule) { r.RuleFilter.Tag = lifecycle.Tag{Key: "k", Value: "v"} }, wantForeign: true},
		"no expiration by day": {rule: func(r *lifecycle.Rule) { r.Expiration.Days = 0 }, wantForeign: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := plain
			tc.rule(&r)
			got := expirationRuleOf(r)
			g.Expect(got.Foreign).To(Equal(tc.wantForeign))
			if !tc.wantForeign {
				g.Expect(got).To(Equal(ExpirationRule{ID: "a", Prefix: "tmp/", Days: 7}))
			}
		})
	}
}
