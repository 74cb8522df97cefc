package view

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
)

// DesiredChildren returns, as plain objects, the ConfigMap, Deployment and
// Service Trellis writes for mv when it is created with viewerImage as the
// manager's --viewer-image: the same labels, annotations, pod template and
// data, without the owner references (they name mv).
//
// It is exported for one caller, the bench's floor (test/bench), which
// creates exactly these objects without Trellis to measure Trellis against
// the same work. It is the controller's own builders behind one function,
// so the floor cannot drift from what the controller writes: a copy in the
// bench would, and moving the builders to a package of their own would
// export a dozen functions the controller alone needs. Being under
// internal/, it is visible to this module only.
func DesiredChildren(mv *viewv1.MarkdownView, viewerImage string) (*corev1.ConfigMap, *appsv1.Deployment, *corev1.Service, error) {
	data, binaryData := desiredContent(mv)
	cm := desiredConfigMap(mv, data, binaryData, contentHash(data, binaryData))
	applied, err := desiredDeployment(mv, viewerImage)
	if err != nil {
		return nil, nil, nil, err
	}
	d, err := viaJSON[appsv1.Deployment](applied)
	if err != nil {
		return nil, nil, nil, err
	}
	svc, err := viaJSON[corev1.Service](desiredService(mv))
	if err != nil {
		return nil, nil, nil, err
	}
	d.OwnerReferences, svc.OwnerReferences = nil, nil
	return cm, d, svc, nil
}
