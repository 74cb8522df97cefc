package children

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/utils/ptr"

	"github.com/trellis-dev/trellis/internal/controller/setup"
)

// appliedDeployment is a Deployment as the API server returns it after
// Trellis applied its replicas and image and someone else (fields) set
// the rest: Trellis' managedFields entry names the fields Trellis owns.
func appliedDeployment(trellisFields string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "viewer", Namespace: "team", Generation: 3,
			Labels: map[string]string{"app": "viewer"},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: setup.FieldManager, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "apps/v1",
					FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(trellisFields)}},
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apps/v1",
					FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:replicas":{}}}`)}, Subresource: "status"},
			}},
		Spec:   appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), RevisionHistoryLimit: ptr.To[int32](10)},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 2, AvailableReplicas: 2},
	}
}

const ownsReplicas = `{"f:spec":{"f:replicas":{}}}`

func desiredReplicas(n int32) *appsv1ac.DeploymentApplyConfiguration {
	return appsv1ac.Deployment("viewer", "team").WithSpec(appsv1ac.DeploymentSpec().WithReplicas(n))
}

func TestTrimAppliedKeepsTheHashOfWhatTrellisApplied(t *testing.T) {
	g := NewWithT(t)
	trim := TrimApplied(appsv1ac.ExtractDeployment, func(d *appsv1.Deployment) { d.Spec = appsv1.DeploymentSpec{} })

	full := appliedDeployment(ownsReplicas)
	out, err := trim(full.DeepCopy())
	g.Expect(err).NotTo(HaveOccurred())
	d := out.(*appsv1.Deployment)
	g.Expect(d.ManagedFields).To(BeNil())
	g.Expect(d.Spec).To(Equal(appsv1.DeploymentSpec{}), "the spec is not kept")
	g.Expect(d.Status).To(Equal(full.Status), "the status is")
	g.Expect(d.Labels).To(Equal(full.Labels))
	g.Expect(d.Generation).To(Equal(full.Generation))
	g.Expect(d.Annotations).To(HaveKey(AppliedHashAnnotation))

	// The trimmed object and the full one answer alike.
	for _, live := range []*appsv1.Deployment{d, full} {
		same, err := alreadyApplied(live, desiredReplicas(2), appsv1ac.ExtractDeployment)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(same).To(BeTrue(), "what Trellis applied")
		same, err = alreadyApplied(live, desiredReplicas(3), appsv1ac.ExtractDeployment)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(same).To(BeFalse(), "a changed spec is applied")
	}

	// Trimming again changes nothing.
	again, err := trim(d.DeepCopy())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(d))
}

func TestTrimAppliedSeesDrift(t *testing.T) {
	g := NewWithT(t)
	trim := TrimApplied(appsv1ac.ExtractDeployment, func(d *appsv1.Deployment) { d.Spec = appsv1.DeploymentSpec{} })
	// Someone else set the replicas: the field moved to their manager, and
	// Trellis' entry no longer holds it.
	out, err := trim(appliedDeployment(`{"f:metadata":{"f:labels":{"f:app":{}}}}`))
	g.Expect(err).NotTo(HaveOccurred())
	same, err := alreadyApplied(out.(*appsv1.Deployment), desiredReplicas(2), appsv1ac.ExtractDeployment)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(same).To(BeFalse(), "the replicas Trellis no longer owns are applied back")

	// The value Trellis owns changed under its own name (a client that
	// writes as "trellis"): the hash follows the value.
	drifted := appliedDeployment(ownsReplicas)
	drifted.Spec.Replicas = ptr.To[int32](5)
	out, err = trim(drifted)
	g.Expect(err).NotTo(HaveOccurred())
	same, err = alreadyApplied(out.(*appsv1.Deployment), desiredReplicas(2), appsv1ac.ExtractDeployment)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(same).To(BeFalse())
}

// The hash the cache keeps cannot be put on a live object to make Trellis
// skip an apply: its key is one the API server refuses.
func TestAppliedHashKeyCannotBeOnALiveObject(t *testing.T) {
	NewWithT(t).Expect(validation.IsQualifiedName(AppliedHashAnnotation)).NotTo(BeEmpty())
}
