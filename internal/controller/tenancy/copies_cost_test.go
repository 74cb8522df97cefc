package tenancy

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// secretWrites counts the manager's writes of Secrets since the last reset.
func secretWrites() int {
	_, paths := mgrWrites.Writes()
	n := 0
	for _, p := range paths {
		if strings.Contains(p, "/secrets") {
			n++
		}
	}
	return n
}

// TestCopyCost measures what copies cost the manager (make bench reports it;
// make test runs it small): writes per copy made, writes per source edit,
// and the live heap per copy. A copy is one write per namespace when made,
// one per namespace per source edit, and nothing while nothing changes.
//
//	TRELLIS_COPY_NAMESPACES=40 go test -run TestCopyCost -v ./internal/controller/tenancy/
func TestCopyCost(t *testing.T) {
	namespaces, copies := 4, 2
	if v := os.Getenv("TRELLIS_COPY_NAMESPACES"); v != "" {
		var err error
		if namespaces, err = strconv.Atoi(v); err != nil || namespaces < 1 || namespaces > 64 {
			t.Fatalf("TRELLIS_COPY_NAMESPACES=%q: want 1 to 64 (a Tenant's namespaces)", v)
		}
	}
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cost-src"}})).To(Succeed())
	grantCopySource(g, "cost-src")
	tenant := newTenant("cost", "cost-")
	tenant.Spec.Namespaces = nil
	for i := range namespaces {
		tenant.Spec.Namespaces = append(tenant.Spec.Namespaces, fmt.Sprintf("n%02d", i))
	}
	for i := range copies {
		name := fmt.Sprintf("s%d", i)
		g.Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "cost-src", Name: name},
			Data: map[string][]byte{"key": []byte(strings.Repeat("x", 1<<10))}})).To(Succeed())
		tenant.Spec.Copies = append(tenant.Spec.Copies, copyItem(tenancyv1.CopySecret, name, "cost-src", name))
	}
	before := testenv.LiveHeap()
	mgrWrites.Reset()
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	eventuallyReady(g, "cost")
	made := namespaces * copies
	g.Eventually(secretWrites, timeout, interval).Should(Equal(made), "one write per copy made")
	madeWrites := secretWrites()
	heap := testenv.LiveHeap() - before

	mgrWrites.Reset()
	src := &corev1.Secret{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "cost-src", Name: "s0"}, src)).To(Succeed())
	src.Data = map[string][]byte{"key": []byte("edited")}
	g.Expect(k8s.Update(ctx, src)).To(Succeed())
	g.Eventually(func(g Gomega) {
		for _, ns := range tenant.Spec.Namespaces {
			got := &corev1.Secret{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "cost-" + ns, Name: "s0"}, got)).To(Succeed())
			g.Expect(got.Data).To(Equal(src.Data))
		}
	}, timeout, interval).Should(Succeed())
	eventuallyReady(g, "cost")
	perEdit := secretWrites()
	g.Expect(perEdit).To(Equal(namespaces), "one write per namespace per source edit")

	t.Logf("copies: %d namespaces × %d Secrets of 1 KiB: %.2f writes per copy, %d writes per source edit (%d namespaces), "+
		"%.1f KiB live heap per copy (the manager and this test share the process: an upper bound)",
		namespaces, copies, float64(madeWrites)/float64(made), perEdit, namespaces, float64(heap)/float64(made)/1024)
	deleteTenant(g, "cost")
}
