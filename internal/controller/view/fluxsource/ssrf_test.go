package fluxsource

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/view"
	"github.com/trellis-dev/trellis/internal/testenv"
	"github.com/trellis-dev/trellis/internal/viewer"
)

// fluxEdit is Flux's flux-edit ClusterRole as Flux installs it
// (manifests/rbac/edit.yaml), aggregated into every namespace's edit and
// admin: "*" covers the status subresource of every source kind.
var fluxEdit = &rbacv1.ClusterRole{
	ObjectMeta: metav1.ObjectMeta{Name: "flux-edit", Labels: map[string]string{
		"rbac.authorization.k8s.io/aggregate-to-admin": "true",
		"rbac.authorization.k8s.io/aggregate-to-edit":  "true",
	}},
	Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"notification.toolkit.fluxcd.io", "source.toolkit.fluxcd.io", "helm.toolkit.fluxcd.io",
			"image.toolkit.fluxcd.io", "kustomize.toolkit.fluxcd.io"},
		Resources: []string{"*"},
		Verbs:     []string{"create", "delete", "deletecollection", "patch", "update"},
	}},
}

// TestEditorCannotAimTheManagerAtAnInternalAddress: a namespace editor
// (Flux's flux-edit and Trellis' markdownview-editor-role, as aggregation
// gives them) writes an ExternalArtifact's status naming an address only
// the manager's network reaches, with the digest of what it serves, and a
// view of it. The manager sends that address nothing, the viewers are not
// pointed at it, and the view says why, Stalled.
func TestEditorCannotAimTheManagerAtAnInternalAddress(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()

	var hits atomic.Int32
	secret := tarball(g, map[string][]byte{"README.md": []byte("# Internal")})
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write(secret)
	}))
	defer internal.Close()

	ns := newNamespace(ctx, t)
	if err := k8s.Create(ctx, fluxEdit.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	g.Expect(testenv.ApplyClusterRoles(ctx, k8s, "config/rbac/markdownview_editor_role.yaml")).To(Succeed())
	cfg, err := testenv.AsNamespaceEditor(ctx, suite.Config, k8s, "mallory", []string{ns}, "flux-edit", "markdownview-editor-role")
	g.Expect(err).NotTo(HaveOccurred())
	mallory, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())

	externalArtifactAs(ctx, g, mallory, ns, "internal", internal.URL+"/latest/meta-data", digestOf(secret), int64(len(secret)))
	g.Expect(mallory.Create(ctx, markdownView(ns, "probe", viewv1.SourceReference{Kind: "ExternalArtifact", Name: "internal"}))).To(Succeed())

	g.Eventually(func(g Gomega) {
		mv := getView(ctx, g, ns, "probe")
		g.Expect(mv.Status.ObservedGeneration).To(Equal(mv.Generation))
		g.Expect(readyReason(mv)).To(Equal(view.ReasonArtifactHostRefused))
		g.Expect(conditions.IsTrue(mv.Status.Conditions, conditions.Stalled)).To(BeTrue())
	}, timeout, interval).Should(Succeed())
	g.Consistently(hits.Load, 2*time.Second, interval).Should(BeZero())
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "markdowns-probe"}, cm); err == nil {
		g.Expect(cm.Data).NotTo(HaveKey(viewer.ArtifactFile))
	}
}
