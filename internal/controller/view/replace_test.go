package view

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// TestOlderTrellisViewerDeploymentIsReplaced: older versions selected a
// view's viewer pods by app.kubernetes.io/{name,instance}, the instance
// being the view's name. A Deployment's selector is immutable, so one an
// older Trellis applied cannot be brought to the UID selector: it is
// deleted (Trellis' own, by its controller reference and UID) and made
// again at once, and its Service, whose selector may change, is applied in
// place. Here the older Trellis' Deployment and Service are applied as it
// applied them (its field manager, its shapes) while the view is held by a
// refused image, then the view is let go.
func TestOlderTrellisViewerDeploymentIsReplaced(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	mv := newMarkdownView(ns, "legacy", map[string]string{"index.md": "# Legacy"})
	mv.Spec.ViewerImage = "example.com/elsewhere:1" // outside the allow-list: nothing is written
	g.Expect(k8s.Create(ctx, mv)).To(Succeed())
	expectStalled(g, ns, "legacy", ReasonImageNotAllowed)

	older := map[string]string{"app.kubernetes.io/name": "markdown-viewer", "app.kubernetes.io/instance": "legacy"}
	held := mv.DeepCopy()
	held.Spec.ViewerImage = ""
	deployment, err := desiredDeployment(held, testViewerImage)
	g.Expect(err).NotTo(HaveOccurred())
	deployment.Spec.Selector = metav1ac.LabelSelector().WithMatchLabels(older)
	deployment.Spec.Template.Labels = childLabels(held) // the older pod labels: name and instance among them
	g.Expect(k8s.Apply(ctx, deployment, client.FieldOwner(setup.FieldManager), client.ForceOwnership)).To(Succeed())
	service := desiredService(held)
	service.Spec.Selector = older
	g.Expect(k8s.Apply(ctx, service, client.FieldOwner(setup.FieldManager), client.ForceOwnership)).To(Succeed())
	before := &appsv1.Deployment{}
	g.Expect(k8s.Get(ctx, key(ns, "viewer-legacy"), before)).To(Succeed())
	g.Expect(before.Spec.Selector.MatchLabels).To(Equal(older))
	markAvailable(g, ns, "viewer-legacy")
	serviceBefore := &corev1.Service{}
	g.Expect(k8s.Get(ctx, key(ns, "viewer-legacy"), serviceBefore)).To(Succeed())

	mgrWrites.Reset()
	editView(g, ns, "legacy", func(mv *viewv1.MarkdownView) { mv.Spec.ViewerImage = "" })
	after := &appsv1.Deployment{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, key(ns, "viewer-legacy"), after)).To(Succeed())
		g.Expect(after.UID).NotTo(Equal(before.UID), "not replaced")
	}, timeout, interval).Should(Succeed())
	g.Expect(metav1.IsControlledBy(after, mv)).To(BeTrue())
	g.Expect(after.Spec.Selector).To(Equal(&metav1.LabelSelector{MatchLabels: map[string]string{viewUIDLabel: string(mv.UID)}}))
	g.Expect(after.Spec.Template.Labels).NotTo(HaveKey("app.kubernetes.io/instance"))
	g.Expect(after.Labels).To(Equal(childLabels(mv)), "the Deployment itself keeps its labels")
	g.Expect(testenv.FieldManagers(after)[""]).To(ConsistOf(setup.FieldManager))

	g.Eventually(func(g Gomega) {
		svc := &corev1.Service{}
		g.Expect(k8s.Get(ctx, key(ns, "viewer-legacy"), svc)).To(Succeed())
		g.Expect(svc.UID).To(Equal(serviceBefore.UID), "the Service is changed in place")
		g.Expect(svc.Spec.Selector).To(Equal(map[string]string{viewUIDLabel: string(mv.UID)}))
	}, timeout, interval).Should(Succeed())

	// One delete, of the older Deployment, and the new one right after it.
	_, paths := mgrWrites.Writes()
	var here []string
	for _, p := range paths {
		if strings.Contains(p, "/namespaces/"+ns+"/deployments/") {
			here = append(here, p)
		}
	}
	g.Expect(here).To(HaveLen(3), "the Deployment writes: %v", here)
	g.Expect(here[0]).To(HavePrefix("PATCH "), "the apply the API server refused")
	g.Expect(here[1]).To(Equal("DELETE /apis/apps/v1/namespaces/"+ns+"/deployments/viewer-legacy"), "%v", here)
	g.Expect(here[2]).To(HavePrefix("PATCH "), "the apply that creates it again")

	markAvailable(g, ns, "viewer-legacy")
	g.Eventually(func(g Gomega) {
		g.Expect(readyCondition(g, ns, "legacy").Status).To(Equal(metav1.ConditionTrue))
	}, timeout, interval).Should(Succeed())
	expectQuiet(g, ns, "legacy")
}
