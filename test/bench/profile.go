package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
)

// CPU profiles, one per measured run (--profile-apiserver): where a run's
// API server time goes, Trellis' next to the floor's, and, for Trellis' runs,
// where the manager's goes.

// profileAPIServer starts a CPU profile of the API server over the first
// --profile-seconds of a run and returns a function that waits for it and
// writes it to <dir>/<what>.pprof. Without --profile-apiserver it does
// nothing. The profile covers the start of both runs alike: the floor's and
// Trellis' profiles compare by share, not by total.
func (b *bench) profileAPIServer(what string) (wait func()) {
	return b.profile(what, "API server", func(ctx context.Context, seconds int) ([]byte, error) {
		cs, err := kubernetes.NewForConfig(b.restCfg)
		if err != nil {
			return nil, err
		}
		return cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(seconds)).DoRaw(ctx)
	})
}

// profileTrellisRun profiles the API server and the manager (its pprof
// handlers are served when --profile-apiserver is set) over the same first
// seconds of one of Trellis' runs.
func (b *bench) profileTrellisRun(what string) (wait func()) {
	server := b.profileAPIServer(what)
	manager := b.profile(what+" manager", "manager", func(ctx context.Context, seconds int) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet,
			fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", b.mgr.pprofAddr, seconds), nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("manager pprof: %s", resp.Status)
		}
		return io.ReadAll(resp.Body)
	})
	return func() { server(); manager() }
}

// profile takes one CPU profile with get in the background and returns a
// function that waits until it is written to <dir>/<slug of what>.pprof.
func (b *bench) profile(what, of string, get func(ctx context.Context, seconds int) ([]byte, error)) (wait func()) {
	if b.cfg.profileDir == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		seconds := int(b.cfg.profileFor / time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), b.cfg.profileFor+30*time.Second)
		defer cancel()
		data, err := get(ctx, seconds)
		if err != nil {
			log("%s profile %s: %v", of, what, err)
			return
		}
		if err := os.MkdirAll(b.cfg.profileDir, 0o755); err != nil {
			log("%s profile %s: %v", of, what, err)
			return
		}
		path := filepath.Join(b.cfg.profileDir, slug(what)+".pprof")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			log("%s profile %s: %v", of, what, err)
			return
		}
		log("%s CPU profile (first %ds) of %q: %s", of, seconds, what, path)
	}()
	return func() { <-done }
}

// heapProfile runs a GC in the manager and takes its heap profile (in-use
// and allocated bytes by call site); with --profile-apiserver it writes it
// to <dir>/<slug of what>.pprof. The GC is what makes the heap figures read
// after it the live heap, not the live heap plus garbage not yet collected.
func (b *bench) heapProfile(what string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		fmt.Sprintf("http://%s/debug/pprof/heap?gc=1", b.mgr.pprofAddr), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("manager heap profile: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("manager pprof: %s", resp.Status)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if b.cfg.profileDir == "" {
		return nil
	}
	if err := os.MkdirAll(b.cfg.profileDir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(b.cfg.profileDir, slug(what)+".pprof")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return err
	}
	log("manager heap profile of %q: %s", what, path)
	return nil
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
