package tenantquota

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func list(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func TestPlan(t *testing.T) {
	g := NewWithT(t)
	limit := list("requests.cpu", "1", "requests.memory", "1Gi", "pods", "2.5")
	perNamespace := list("pods", "2", "services", "3")
	nss := []Namespace{
		{Name: "a", Exists: true, Spec: list("requests.cpu", "500m", "requests.memory", "512Mi", "pods", "1", "services", "3"),
			Status: list("requests.cpu", "500m", "requests.memory", "512Mi", "pods", "1", "services", "3"),
			Used:   list("requests.cpu", "100m", "requests.memory", "0", "pods", "1", "services", "0")},
		{Name: "b"},
	}
	out := Plan(limit, perNamespace, nss)
	// cpu: used 100m, remainder 900m: a gets 100m+450m, b 450m, both out
	// of the slack of 500m. memory: 1Gi split in bytes. pods: the limit is
	// 2 (2.5 rounded down), used 1: the one left goes to a, the first.
	g.Expect(qty(out.Hard["a"], "requests.cpu")).To(Equal("550m"))
	g.Expect(qty(out.Hard["b"], "requests.cpu")).To(Equal("450m"))
	g.Expect(qty(out.Hard["a"], "requests.memory")).To(Equal("512Mi"))
	g.Expect(qty(out.Hard["a"], "pods")).To(Equal("2"))
	g.Expect(qty(out.Hard["b"], "pods")).To(Equal("0"))
	g.Expect(qty(out.Hard["b"], "services")).To(Equal("3"))
	g.Expect(out.Raises).To(BeTrue(), "b's quota is created")
	g.Expect(out.Held).To(BeFalse())
	g.Expect(out.Over).To(BeEmpty())
	g.Expect(qty(out.Used, "requests.cpu")).To(Equal("100m"))

	g.Expect(nss[0].Counted(limit)).To(BeTrue())
	g.Expect(nss[1].Counted(limit)).To(BeFalse())
	g.Expect(Namespace{Exists: true, Status: list("pods", "1"), Used: list("pods", "0")}.Counted(limit)).To(BeFalse(),
		"a quota counted for pods only does not yet enforce cpu")
}

func TestPlanOverLimit(t *testing.T) {
	g := NewWithT(t)
	nss := []Namespace{
		{Name: "a", Exists: true, Spec: list("pods", "4"), Status: list("pods", "4"), Used: list("pods", "3")},
		{Name: "b", Exists: true, Spec: list("pods", "4"), Status: list("pods", "4"), Used: list("pods", "2")},
	}
	out := Plan(list("pods", "4"), nil, nss)
	g.Expect(out.Over).To(ConsistOf(corev1.ResourceName("pods")))
	g.Expect(qty(out.Hard["a"], "pods")).To(Equal("3"))
	g.Expect(qty(out.Hard["b"], "pods")).To(Equal("2"))
	g.Expect(out.Raises).To(BeFalse())
}

// TestFreezeRaisesNoQuota: frozen, a plan lowers what it lowers and raises
// nothing; a quota still to be created, or an entry a quota lacks, gets
// zero.
func TestFreezeRaisesNoQuota(t *testing.T) {
	g := NewWithT(t)
	limit := list("pods", "10", "requests.cpu", "2")
	nss := []Namespace{
		// Uses 4 of 4 pods: its target is above its spec.
		{Name: "a", Exists: true, Spec: list("pods", "4", "requests.cpu", "1"), Status: list("pods", "4", "requests.cpu", "1"),
			Used: list("pods", "4", "requests.cpu", "0")},
		{Name: "b", Exists: true, Spec: list("pods", "2", "requests.cpu", "1"), Status: list("pods", "2", "requests.cpu", "1"),
			Used: list("pods", "0", "requests.cpu", "0")},
		// A quota naming pods only.
		{Name: "c", Exists: true, Spec: list("pods", "0"), Status: list("pods", "0"), Used: list("pods", "0")},
		{Name: "d"},
	}
	// Unfrozen: pods 4 + 6 split, a raised to 6 and c to 1 out of the
	// slack of 4; cpu split four ways, a and b lowered to 500m.
	plain := Plan(limit, nil, nss)
	g.Expect(qty(plain.Hard["a"], "pods")).To(Equal("6"))
	g.Expect(qty(plain.Hard["c"], "pods")).To(Equal("1"))
	g.Expect(qty(plain.Hard["a"], "requests.cpu")).To(Equal("500m"))
	g.Expect(qty(plain.Hard["b"], "requests.cpu")).To(Equal("500m"))

	out := Plan(limit, nil, nss)
	out.Freeze(limit, nss)
	g.Expect(qty(out.Hard["a"], "pods")).To(Equal("4"), "held at its spec")
	g.Expect(qty(out.Hard["b"], "pods")).To(Equal("2"))
	g.Expect(qty(out.Hard["a"], "requests.cpu")).To(Equal("500m"), "a lowering stays")
	g.Expect(qty(out.Hard["b"], "requests.cpu")).To(Equal("500m"))
	g.Expect(qty(out.Hard["c"], "pods")).To(Equal("0"))
	g.Expect(qty(out.Hard["c"], "requests.cpu")).To(Equal("0"), "an entry c lacks is created at zero")
	g.Expect(qty(out.Hard["d"], "pods")).To(Equal("0"), "a new quota gets nothing")
	g.Expect(qty(out.Hard["d"], "requests.cpu")).To(Equal("0"))
	g.Expect(out.Raises).To(BeTrue(), "c's entry and d's quota are created")
	for _, n := range nss[:3] {
		for r := range limit {
			if spec, ok := n.Spec[r]; ok {
				got := out.Hard[n.Name][r]
				g.Expect(got.Cmp(spec)).To(BeNumerically("<=", 0), "%s %s goes up", n.Name, r)
			}
		}
	}

	// Nothing to create: nothing raised, no live read needed.
	out = Plan(limit, nil, nss[:2])
	out.Freeze(limit, nss[:2])
	g.Expect(out.Raises).To(BeFalse())
}

// qty is a quantity of list in its canonical form, "" when absent.
func qty(l corev1.ResourceList, name corev1.ResourceName) string {
	v, ok := l[name]
	if !ok {
		return ""
	}
	return v.String()
}

func TestRemainingCountsWhatLeftQuotasMayStillAdmit(t *testing.T) {
	limit := corev1.ResourceList{"pods": resource.MustParse("10"), "requests.cpu": resource.MustParse("2")}
	left := []Namespace{
		// Released: spec 3, synced, 1 used; it may still admit up to 3.
		{Name: "gone-a", Exists: true, Spec: corev1.ResourceList{"pods": resource.MustParse("3"), "requests.cpu": resource.MustParse("500m")},
			Status: corev1.ResourceList{"pods": resource.MustParse("3"), "requests.cpu": resource.MustParse("500m")},
			Used:   corev1.ResourceList{"pods": resource.MustParse("1"), "requests.cpu": resource.MustParse("100m")}},
		// Lowered, not yet synced, and over: the most of the three counts.
		{Name: "gone-b", Exists: true, Spec: corev1.ResourceList{"pods": resource.MustParse("1")},
			Status: corev1.ResourceList{"pods": resource.MustParse("2")}, Used: corev1.ResourceList{"pods": resource.MustParse("4")}},
	}
	got := Remaining(limit, left)
	if p := got["pods"]; p.Value() != 3 {
		t.Errorf("pods left: %v, want 10-3-4 = 3", p.String())
	}
	if c := got["requests.cpu"]; c.MilliValue() != 1500 {
		t.Errorf("cpu left: %v, want 2-0.5 (gone-b does not limit cpu)", c.String())
	}
	if p := Remaining(corev1.ResourceList{"pods": resource.MustParse("2")}, left)["pods"]; p.Value() != 0 {
		t.Errorf("over the limit: %v, want 0", p.String())
	}
}
