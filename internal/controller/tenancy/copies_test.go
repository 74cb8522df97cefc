package tenancy

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
)

// TestDesiredCopies: a copy holds its source's type and data, the tenant's
// marks and where it comes from, and none of the source's own labels or
// annotations; syncing brings a changed copy back and reports it.
func TestDesiredCopies(t *testing.T) {
	g := NewWithT(t)
	tenant := &tenancyv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}
	item := copyItem(tenancyv1.CopySecret, "pull", "shared", "regcred")
	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shared", Name: "regcred",
		Labels: map[string]string{"source": "x"}, Annotations: map[string]string{"kubernetes.io/service-account.name": "builder"}},
		Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{".dockerconfigjson": []byte("{}")}}
	got := desiredSecretCopy(tenant, item, src, "team-a-dev")
	g.Expect(got.Namespace).To(Equal("team-a-dev"))
	g.Expect(got.Name).To(Equal("pull"))
	g.Expect(got.Type).To(Equal(corev1.SecretTypeDockerConfigJson))
	g.Expect(got.Data).To(Equal(src.Data))
	g.Expect(got.Labels).To(Equal(childLabels(tenant)))
	g.Expect(got.Annotations).To(Equal(map[string]string{CopyOfAnnotation: "Secret/shared/regcred"}))
	src.Data[".dockerconfigjson"][0] = '['
	g.Expect(got.Data[".dockerconfigjson"]).To(Equal([]byte("{}")), "the copy holds its own data")

	live := got.DeepCopy()
	g.Expect(syncSecretCopy(live, got, tenant)).To(BeFalse(), "as wanted: nothing to write")
	live.Data["extra"] = []byte("x")
	delete(live.Labels, TenantLabel)
	g.Expect(syncSecretCopy(live, got, tenant)).To(BeTrue())
	g.Expect(live.Data).To(Equal(got.Data))
	g.Expect(live.Labels).To(HaveKeyWithValue(TenantLabel, "team-a"))

	cmItem := copyItem(tenancyv1.CopyConfigMap, "ca", "shared", "ca")
	cm := desiredConfigMapCopy(tenant, cmItem, &corev1.ConfigMap{Data: map[string]string{"ca.crt": "x"}, BinaryData: map[string][]byte{"b": {1}}}, "team-a-dev")
	liveCM := cm.DeepCopy()
	liveCM.BinaryData = nil
	g.Expect(syncConfigMapCopy(liveCM, cm, tenant)).To(BeTrue())
	g.Expect(liveCM.BinaryData).To(Equal(cm.BinaryData))
}

// TestCopyIsDue: which namespaces a copy is written to in a reconcile. An
// unchanged source, spec and namespace cost no read and no write.
func TestCopyIsDue(t *testing.T) {
	item := copyItem(tenancyv1.CopySecret, "pull", "shared", "regcred")
	for name, tc := range map[string]struct {
		plan    copyPlan
		settled bool
		ns      string
		due     bool
	}{
		"unchanged source, spec and namespace": {copyPlan{item: item, state: tenancyv1.CopyReady, version: "5", recorded: "5"}, true, "team-a-dev", false},
		"the source edited":                    {copyPlan{item: item, state: tenancyv1.CopyReady, version: "6", recorded: "5"}, true, "team-a-dev", true},
		"the spec changed":                     {copyPlan{item: item, state: tenancyv1.CopyReady, version: "5", recorded: "5"}, false, "team-a-dev", true},
		"a namespace new to the tenant":        {copyPlan{item: item, state: tenancyv1.CopyReady, version: "5", recorded: "5"}, true, "team-a-new", true},
		"a copy not made before (blocked)":     {copyPlan{item: item, state: tenancyv1.CopyReady, version: "5"}, true, "team-a-dev", true},
		"the source not granted":               {copyPlan{item: item, state: tenancyv1.CopySourceNotGranted}, false, "team-a-dev", false},
		"the source missing":                   {copyPlan{item: item, state: tenancyv1.CopySourceNotFound}, false, "team-a-dev", false},
		"the source's own namespace":           {copyPlan{item: copyItem(tenancyv1.CopySecret, "regcred", "team-a-dev", "regcred"), state: tenancyv1.CopyReady, version: "5"}, false, "team-a-dev", false},
	} {
		t.Run(name, func(t *testing.T) {
			s := &scope{settled: tc.settled, wasReady: map[string]bool{"team-a-dev": true}}
			NewWithT(t).Expect(tc.plan.due(s, tc.ns)).To(Equal(tc.due))
		})
	}
}

// TestCopyStatuses: an item's version is recorded only when every copy of
// it was made, the namespace it copies from whatever its state; the dropped
// items are those the status recorded that the spec no longer has.
func TestCopyStatuses(t *testing.T) {
	g := NewWithT(t)
	plans := []copyPlan{
		{item: copyItem(tenancyv1.CopySecret, "pull", "shared", "regcred"), state: tenancyv1.CopyReady, version: "7"},
		{item: copyItem(tenancyv1.CopyConfigMap, "ca", "shared", "ca"), state: tenancyv1.CopyReady, version: "8"},
		{item: copyItem(tenancyv1.CopySecret, "gone", "shared", "gone"), state: tenancyv1.CopySourceNotFound, message: "missing",
			origin: sourceOrigin{namespace: "shared", uid: "uid-b", generation: 4}},
	}
	got := copyStatuses(plans, map[string]bool{"ConfigMap/ca": true})
	g.Expect(got).To(Equal([]tenancyv1.TenantCopyStatus{
		{Kind: tenancyv1.CopySecret, Name: "pull", State: tenancyv1.CopyReady, SourceResourceVersion: "7"},
		{Kind: tenancyv1.CopyConfigMap, Name: "ca", State: tenancyv1.CopyReady},
		{Kind: tenancyv1.CopySecret, Name: "gone", State: tenancyv1.CopySourceNotFound, Message: "missing",
			SourceNamespace: "shared", SourceNamespaceUID: "uid-b", SourceNamespaceGeneration: 4},
	}))

	tenant := &tenancyv1.Tenant{
		Spec:   tenancyv1.TenantSpec{Copies: []tenancyv1.TenantCopy{plans[0].item}},
		Status: tenancyv1.TenantStatus{Copies: got},
	}
	g.Expect(droppedCopies(tenant)).To(Equal(got[1:]))
}

// TestJudgeOrigin: a source namespace is its UID. One found in place of the
// namespace copied from feeds no copy until the spec changes after it was
// found; a namespace recorded for the first time, or for an item moved to
// another namespace, is trusted.
func TestJudgeOrigin(t *testing.T) {
	trusted := sourceOrigin{namespace: "shared", uid: "uid-a", generation: 3}
	pending := sourceOrigin{namespace: "shared", uid: "uid-b", generation: 6}
	for name, tc := range map[string]struct {
		recorded   sourceOrigin
		from       string
		uid        types.UID
		generation int64
		want       sourceOrigin
		ok         bool
	}{
		"none recorded: trust on first copy":      {sourceOrigin{}, "shared", "uid-a", 3, trusted, true},
		"the namespace copied from":               {trusted, "shared", "uid-a", 3, trusted, true},
		"the namespace copied from, a later spec": {trusted, "shared", "uid-a", 9, trusted, true},
		"made again, the spec unchanged":          {trusted, "shared", "uid-b", 5, pending, false},
		"made again, still the same spec":         {pending, "shared", "uid-b", 5, pending, false},
		"made again, then the spec changed":       {pending, "shared", "uid-b", 6, pending, true},
		"made again twice before the spec changed": {pending, "shared", "uid-c", 6,
			sourceOrigin{namespace: "shared", uid: "uid-c", generation: 7}, false},
		"the item moved to another namespace": {trusted, "other", "uid-o", 4,
			sourceOrigin{namespace: "other", uid: "uid-o", generation: 4}, true},
		"moved away from a namespace made again": {pending, "other", "uid-o", 5,
			sourceOrigin{namespace: "other", uid: "uid-o", generation: 5}, true},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got, ok := judgeOrigin(tc.recorded, tc.from, tc.uid, tc.generation)
			g.Expect(got).To(Equal(tc.want))
			g.Expect(ok).To(Equal(tc.ok))
		})
	}
}
