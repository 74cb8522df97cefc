package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
)

// CPU profiles of the API server, one per measured run (--profile-apiserver):
// where a run's API server time goes, Trellis' next to the floor's.

// profileAPIServer starts a CPU profile of the API server over the first
// --profile-seconds of a run and returns a function that waits for it and
// writes it to <dir>/<what>.pprof. Without --profile-apiserver it does
// nothing. The profile covers the start of both runs alike: the floor's and
// Trellis' profiles compare by share, not by total.
func (b *bench) profileAPIServer(what string) (wait func()) {
	if b.cfg.profileDir == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		cs, err := kubernetes.NewForConfig(b.restCfg)
		if err != nil {
			log("profile %s: %v", what, err)
			return
		}
		seconds := int(b.cfg.profileFor / time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), b.cfg.profileFor+30*time.Second)
		defer cancel()
		data, err := cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(seconds)).DoRaw(ctx)
		if err != nil {
			log("profile %s: %v", what, err)
			return
		}
		if err := os.MkdirAll(b.cfg.profileDir, 0o755); err != nil {
			log("profile %s: %v", what, err)
			return
		}
		path := filepath.Join(b.cfg.profileDir, slug(what)+".pprof")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			log("profile %s: %v", what, err)
			return
		}
		log("API server CPU profile (first %ds) of %q: %s", seconds, what, path)
	}()
	return func() { <-done }
}

// slug turns a run's description into a file name.
func slug(s string) string {
	var out strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			out.WriteRune(r)
			dash = false
		} else if !dash && out.Len() > 0 {
			out.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimSuffix(out.String(), "-")
}
