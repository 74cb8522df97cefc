package view

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
)

// TestViewMetadataDoesNotGrowTheManager: the promise of at most 64 KiB of
// manager memory per MarkdownView, whatever it holds, attacked through the
// metadata the cache transform did not drop. A MarkdownView-only user puts
// 256 KiB of finalizers and as much of owner references on a view (the API
// server bounds neither list, only the object's size): the manager's copy
// must hold neither.
func TestViewMetadataDoesNotGrowTheManager(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	user := editorAs(t, "mv-only-"+ns, ns)
	mv := newMarkdownView(ns, "meta", map[string]string{"a.md": "# A"})
	g.Expect(user.Create(ctx, mv)).To(Succeed())

	// Each a qualified name of 300 bytes; the owner references name
	// ConfigMaps of the namespace, which a real garbage collector would
	// wait for before deleting the view.
	const n = 850
	prefix := strings.Repeat("a", 230) + ".example.com/"
	finalizers := make([]string, 0, n)
	owners := make([]map[string]any, 0, n)
	for i := range n {
		finalizers = append(finalizers, fmt.Sprintf("%sf-%s-%04d", prefix, strings.Repeat("x", 50), i))
		owners = append(owners, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"name": fmt.Sprintf("owner-%s-%04d", strings.Repeat("y", 220), i), "uid": fmt.Sprintf("00000000-0000-4000-8000-%012d", i)})
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": finalizers, "ownerReferences": owners}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(patch)).To(BeNumerically(">", 512<<10))
	g.Expect(user.Patch(ctx, mv, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
	defer func() {
		g.Expect(k8s.Patch(ctx, mv, client.RawPatch(types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null,"ownerReferences":null}}`)))).To(Succeed())
		g.Expect(k8s.Delete(ctx, mv)).To(Succeed())
	}()

	g.Eventually(func(g Gomega) {
		cached := &viewv1.MarkdownView{}
		g.Expect(reconciler.client.Get(ctx, client.ObjectKeyFromObject(mv), cached)).To(Succeed())
		g.Expect(cached.ResourceVersion).To(Equal(mv.ResourceVersion), "the cache has seen the patch")
		raw, err := json.Marshal(cached)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(len(raw)).To(BeNumerically("<=", maxBytesPerView/16), "the cached view, in bytes")
		g.Expect(cached.Finalizers).To(BeEmpty())
		g.Expect(cached.OwnerReferences).To(BeEmpty())
	}, timeout, interval).Should(Succeed())
}

// TestARecreatedViewTakesNoChildOfTheOldOne: a view's children are known by
// the UID of their controller, never by a name. Someone who may create
// Ingresses exposes a view; a MarkdownView-only user deletes it and makes
// one of the same name at once, before the garbage collector has removed
// the old children (envtest runs none, so they stay, controlled by the old
// view). The new view reports them as a conflict, and the old Ingress is
// neither written nor deleted by Trellis.
func TestARecreatedViewTakesNoChildOfTheOldOne(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	exposed := newMarkdownView(ns, "docs", map[string]string{"a.md": "# A"})
	exposed.Spec.Expose.Ingress = viewv1.IngressExpose{Host: "docs.example.com"}
	g.Expect(k8s.Create(ctx, exposed)).To(Succeed())
	ingress := &networkingv1.Ingress{}
	g.Eventually(func() error {
		return k8s.Get(ctx, key(ns, "viewer-docs"), ingress)
	}, timeout, interval).Should(Succeed())
	g.Expect(metav1.IsControlledBy(ingress, exposed)).To(BeTrue())

	user := editorAs(t, "mv-only-"+ns, ns)
	g.Expect(user.Delete(ctx, exposed)).To(Succeed())
	again := newMarkdownView(ns, "docs", map[string]string{"a.md": "# Mine"})
	g.Eventually(func() error { return user.Create(ctx, again) }, timeout, interval).Should(Succeed())
	g.Expect(expectStalled(g, ns, "docs", ReasonChildConflict)).To(ContainSubstring("markdowns-docs"))

	after := &networkingv1.Ingress{}
	g.Consistently(func(g Gomega) {
		g.Expect(k8s.Get(ctx, key(ns, "viewer-docs"), after)).To(Succeed())
		g.Expect(after.ResourceVersion).To(Equal(ingress.ResourceVersion), "never written")
	}, "2s", interval).Should(Succeed())
	g.Expect(metav1.IsControlledBy(after, again)).To(BeFalse())
	g.Expect(k8s.Delete(ctx, again)).To(Succeed())
}
