package shard

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Lease is the shard's own Lease in namespace, as the sharder expects it:
// named after the shard, held by the shard (holder identity = name), and
// labelled with the ring (set again on every renewal, should someone
// remove it). Leader election on it runs the controllers only while the
// shard holds it, and releasing it on shutdown tells the sharder to move
// the shard's objects at once; a Lease that is not renewed in time makes
// the sharder move them when it expires.
func (m Member) Lease(cfg *rest.Config, namespace string) (resourcelock.Interface, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	c, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("shard lease client: %w", err)
	}
	return &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: namespace, Name: m.Shard},
		Client:     c,
		LockConfig: resourcelock.ResourceLockConfig{Identity: m.Shard},
		Labels:     m.LeaseLabels(),
	}, nil
}
