package view

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func TestDeploymentChanged(t *testing.T) {
	base := func() *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "viewer-docs", Generation: 2, Labels: map[string]string{"a": "b"}},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1,
				Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"}}},
		}
	}
	cases := map[string]struct {
		change func(*appsv1.Deployment)
		want   bool
	}{
		"nothing":              {change: func(*appsv1.Deployment) {}, want: false},
		"heartbeat only":       {change: func(d *appsv1.Deployment) { d.Status.Conditions[0].LastUpdateTime = metav1.Now() }, want: false},
		"resourceVersion only": {change: func(d *appsv1.Deployment) { d.ResourceVersion = "99" }, want: false},
		"spec (generation)":    {change: func(d *appsv1.Deployment) { d.Generation++ }, want: true},
		"labels":               {change: func(d *appsv1.Deployment) { d.Labels["a"] = "c" }, want: true},
		"owner references":     {change: func(d *appsv1.Deployment) { d.OwnerReferences = []metav1.OwnerReference{{Name: "x"}} }, want: true},
		"observed generation":  {change: func(d *appsv1.Deployment) { d.Status.ObservedGeneration = 3 }, want: true},
		"available replicas":   {change: func(d *appsv1.Deployment) { d.Status.AvailableReplicas = 0 }, want: true},
		"updated replicas":     {change: func(d *appsv1.Deployment) { d.Status.UpdatedReplicas = 0 }, want: true},
		"replicas":             {change: func(d *appsv1.Deployment) { d.Status.Replicas = 2 }, want: true},
		"a condition's reason": {change: func(d *appsv1.Deployment) { d.Status.Conditions[0].Reason = "Other" }, want: true},
		"a condition's status": {change: func(d *appsv1.Deployment) { d.Status.Conditions[0].Status = corev1.ConditionFalse }, want: true},
		"a condition added": {change: func(d *appsv1.Deployment) {
			d.Status.Conditions = append(d.Status.Conditions, appsv1.DeploymentCondition{})
		}, want: true},
		"ready replicas (unused)": {change: func(d *appsv1.Deployment) { d.Status.ReadyReplicas = 5 }, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			old, updated := base(), base()
			tc.change(updated)
			g.Expect(deploymentChanged.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: updated})).To(Equal(tc.want))
		})
	}
	t.Run("create and delete always pass", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(deploymentChanged.Create(event.CreateEvent{Object: base()})).To(BeTrue())
		g.Expect(deploymentChanged.Delete(event.DeleteEvent{Object: base()})).To(BeTrue())
	})
}
