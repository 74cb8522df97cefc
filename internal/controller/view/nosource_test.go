package view

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
)

// TestSourceWithoutFlux: this suite's cluster has no Flux. The manager runs
// all the same, and a view that names a source says that Flux is missing
// (Stalled: a person installs it), writing no ConfigMap it could not fill.
// With a source and markdowns both, or a path that climbs out, admission
// refuses the view.
func TestSourceWithoutFlux(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	mv := &viewv1.MarkdownView{}
	mv.Namespace, mv.Name = ns, "from-git"
	mv.Spec.Source = viewv1.SourceReference{Kind: "GitRepository", Name: "handbook", Path: "docs"}
	g.Expect(k8s.Create(ctx, mv)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &viewv1.MarkdownView{}
		g.Expect(k8s.Get(ctx, key(ns, "from-git"), got)).To(Succeed())
		ready := conditions.Get(got.Status.Conditions, conditions.Ready)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(ReasonFluxNotInstalled))
		g.Expect(ready.Message).To(ContainSubstring("Flux's source-controller is not installed"))
		g.Expect(conditions.IsTrue(got.Status.Conditions, conditions.Stalled)).To(BeTrue())
	}, timeout, interval).Should(Succeed())
	err := k8s.Get(ctx, key(ns, "markdowns-from-git"), &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "ConfigMap: %v", err)

	for _, tc := range []struct {
		name string
		spec viewv1.MarkdownViewSpec
		want string
	}{
		{"both", viewv1.MarkdownViewSpec{Markdowns: map[string]viewv1.MarkdownText{"a.md": "# A"}, Source: viewv1.SourceReference{Kind: "GitRepository", Name: "x"}}, "set exactly one"},
		{"neither", viewv1.MarkdownViewSpec{Replicas: 2}, "set exactly one"},
		{"dot-dot", viewv1.MarkdownViewSpec{Source: viewv1.SourceReference{Kind: "GitRepository", Name: "x", Path: "docs/../.."}}, "without '..'"},
		{"absolute", viewv1.MarkdownViewSpec{Source: viewv1.SourceReference{Kind: "GitRepository", Name: "x", Path: "/etc"}}, "no leading '/'"},
		{"kind", viewv1.MarkdownViewSpec{Source: viewv1.SourceReference{Kind: "HelmChart", Name: "x"}}, "Unsupported value"},
	} {
		bad := &viewv1.MarkdownView{Spec: tc.spec}
		bad.Namespace, bad.Name = ns, "bad"
		err := k8s.Create(ctx, bad)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", tc.name, err)
		g.Expect(err.Error()).To(ContainSubstring(tc.want), tc.name)
	}
}
