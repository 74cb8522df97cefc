//go:build tools

// Package sourcecontroller pins Flux's source-controller, which the Makefile
// builds into bin/ for the tests of MarkdownView's spec.source.
package sourcecontroller

import _ "github.com/fluxcd/source-controller"
