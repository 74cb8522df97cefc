//go:build tools

// Package seaweedfs pins the SeaweedFS server (weed) that the Makefile
// builds into bin/ for the IAM account driver's tests.
package seaweedfs

import _ "github.com/seaweedfs/seaweedfs/weed"
