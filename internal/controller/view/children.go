package view

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
)

// DesiredChildren returns, as plain objects, the ConfigMap, Deployment and
// Service Trellis writes for mv when it is created with viewerImage as the
// manager's --viewer-image: the same labels, annotations, pod template and
// data, without the owner references (they name mv). For doing the same
// work without Trellis: the bench's floor creates these.
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
