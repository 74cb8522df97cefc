//go:build tools

// Package etcd pins the etcd server that the Makefile builds into bin/.
package etcd

import _ "go.etcd.io/etcd/server/v3"
