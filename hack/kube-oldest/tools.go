//go:build tools

// Package kubeoldest pins the kube-apiserver of the oldest supported
// Kubernetes minor, which the Makefile builds into bin/.
package kubeoldest

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
