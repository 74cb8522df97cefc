//go:build tools

// Package minio pins the MinIO server that the Makefile builds into bin/
// for the MinIO account driver's tests. MinIO is AGPL-3.0: it runs in tests
// only, and no Trellis binary links it (this module is none of theirs).
package minio

import _ "github.com/minio/minio"
