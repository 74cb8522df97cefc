// Package shard is what a Trellis replica needs to be one shard of a
// kubernetes-controller-sharding ControllerRing (docs/scaling.md): the
// labels the sharder reads and writes, and the shard Lease a replica holds
// instead of competing for one leader lock. It follows the protocol in the
// sharding project's docs/implement-sharding.md, in code of our own; it
// does not import controller-runtime.
package shard

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// The sharder's label keys (its API group sharding.timebertt.dev, alpha).
const (
	// RingLabel on a shard Lease names the ControllerRing the shard is in.
	RingLabel = "alpha.sharding.timebertt.dev/controllerring"
	// shardLabelPrefix + ring is the key of the label the sharder's
	// webhook puts on every object of the ring: its value names the shard.
	shardLabelPrefix = "shard.alpha.sharding.timebertt.dev/"
	// drainLabelPrefix + ring is the key of the label the sharder sets on
	// an object that is to leave its shard; its value does not matter.
	drainLabelPrefix = "drain.alpha.sharding.timebertt.dev/"
)

// Member is one replica's place in a ring: the ControllerRing's name and
// the shard's own, which is also its Lease's name and holder identity.
type Member struct {
	Ring  string
	Shard string
}

// Validate checks that the ring name can be part of a label key and that
// the shard name can be a label value and a Lease's name.
func (m Member) Validate() error {
	var errs []error
	switch {
	case m.Ring == "":
		errs = append(errs, errors.New("the ControllerRing's name is empty"))
	case len(m.Ring) > validation.LabelValueMaxLength:
		errs = append(errs, fmt.Errorf("the ControllerRing's name %q is longer than %d characters, which the sharder's label keys do not allow", m.Ring, validation.LabelValueMaxLength))
	default:
		if msgs := validation.IsDNS1123Subdomain(m.Ring); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("the ControllerRing's name %q: %s", m.Ring, strings.Join(msgs, "; ")))
		}
	}
	if m.Shard == "" {
		errs = append(errs, errors.New("the shard's name is empty (it is the pod's name: --pod-name, $POD_NAME, or the host name)"))
	} else {
		msgs := append(validation.IsValidLabelValue(m.Shard), validation.IsDNS1123Subdomain(m.Shard)...)
		if len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("the shard's name %q must be a label value and a Lease's name: %s", m.Shard, strings.Join(msgs, "; ")))
		}
	}
	return errors.Join(errs...)
}

// ShardLabel is the key of the label that assigns an object of the ring to
// a shard.
func (m Member) ShardLabel() string { return shardLabelPrefix + m.Ring }

// DrainLabel is the key of the label that asks the shard holding an object
// of the ring to let it go.
func (m Member) DrainLabel() string { return drainLabelPrefix + m.Ring }

// LeaseLabels are the labels of the shard's Lease, by which the sharder
// finds the ring's shards.
func (m Member) LeaseLabels() map[string]string { return map[string]string{RingLabel: m.Ring} }

// Draining reports whether an object with these labels is to be let go:
// the sharder set its drain label. The shard then removes the shard and
// drain labels and does nothing else with it.
func (m Member) Draining(labels map[string]string) bool {
	_, ok := labels[m.DrainLabel()]
	return ok
}
