package children

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestLookupOwned(t *testing.T) {
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "owner", UID: "owner-uid"}}
	ref := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "owner-uid", Controller: new(true)}
	other := ref
	other.UID = "someone-else"
	cases := map[string]struct {
		cached, uncached []client.Object
		wantExists       bool
		wantNotOwned     bool
	}{
		"missing everywhere": {},
		"ours, in the cache": {
			cached:     []client.Object{child(ref)},
			wantExists: true,
		},
		"ours, cache behind": {
			uncached:   []client.Object{child(ref)},
			wantExists: true,
		},
		"foreign, outside the cache": {
			uncached:   []client.Object{child()},
			wantExists: true, wantNotOwned: true,
		},
		"controlled by another object": {
			cached:     []client.Object{child(other)},
			wantExists: true, wantNotOwned: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			c := Clients{
				Cached:   fake.NewClientBuilder().WithObjects(tc.cached...).Build(),
				Uncached: fake.NewClientBuilder().WithObjects(append(tc.cached, tc.uncached...)...).Build(),
			}
			obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
			exists, err := LookupOwned(context.Background(), c, owner, "ConfigMap", obj)
			g.Expect(exists).To(Equal(tc.wantExists))
			g.Expect(IsNotOwned(err)).To(Equal(tc.wantNotOwned), "err %v", err)
			if !tc.wantNotOwned {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err.Error()).To(ContainSubstring("ConfigMap c already exists"))
				g.Expect(IsNotOwned(fmt.Errorf("wrapped: %w", err))).To(BeTrue())
			}
		})
	}
}

// child is the ConfigMap "c" the lookups ask for, with the given owners.
func child(refs ...metav1.OwnerReference) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", OwnerReferences: refs}}
}

func TestOwnerReference(t *testing.T) {
	g := NewWithT(t)
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "docs", UID: "uid-1"}}
	ref := OwnerReference(owner, schema.GroupVersionKind{Group: "view.trellis.dev", Version: "v1", Kind: "MarkdownView"})
	g.Expect(*ref.APIVersion).To(Equal("view.trellis.dev/v1"))
	g.Expect(*ref.Kind).To(Equal("MarkdownView"))
	g.Expect(*ref.Name).To(Equal("docs"))
	g.Expect(string(*ref.UID)).To(Equal("uid-1"))
	g.Expect(*ref.Controller).To(BeTrue())
	g.Expect(*ref.BlockOwnerDeletion).To(BeTrue())
}
