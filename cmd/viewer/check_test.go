package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	const marker = "trellis-site-test-7"
	cases := map[string]struct {
		reason string
		// page answers the n-th request (from 1).
		page func(n int32, w http.ResponseWriter)
		url  string // "": the server's
		want error  // nil: passes; errNotServed: fails for what the server says
	}{
		"served at once": {
			reason: "the page holds the marker",
			page:   func(_ int32, w http.ResponseWriter) { _, _ = io.WriteString(w, "<p>"+marker+"</p>") },
		},
		"served once the viewer is up": {
			reason: "unavailable, then the page: the check retries while the viewer starts",
			page: func(n int32, w http.ResponseWriter) {
				if n < 3 {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				_, _ = io.WriteString(w, marker)
			},
		},
		"another page": {
			reason: "200 OK without the marker is not the site",
			page:   func(_ int32, w http.ResponseWriter) { _, _ = io.WriteString(w, "trellis-site-test-6") },
			want:   errNotServed,
		},
		"the marker in an error page": {
			reason: "only a 200 OK counts",
			page: func(_ int32, w http.ResponseWriter) {
				w.WriteHeader(http.StatusNotFound)
				_, _ = io.WriteString(w, marker)
			},
			want: errNotServed,
		},
		"a Service not in the environment": {
			reason: "the kubelet leaves $(VAR) as it is when the variable is missing: fail at once, the pod restarts with it",
			url:    "http://$(VIEWER_X_SERVICE_HOST):$(VIEWER_X_SERVICE_PORT)/",
			want:   errUnexpanded,
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if c.page != nil {
					c.page(n.Add(1), w)
				}
			}))
			defer srv.Close()
			url := c.url
			if url == "" {
				url = srv.URL + "/"
			}
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			started := time.Now()
			err := check(ctx, srv.Client(), url, marker, 10*time.Millisecond)
			switch {
			case c.want == nil && err != nil:
				t.Errorf("%s: %v", c.reason, err)
			case c.want == errNotServed && !errors.Is(err, context.DeadlineExceeded):
				t.Errorf("%s: got %v, want a failure once the timeout ran out", c.reason, err)
			case c.want == errUnexpanded && (!errors.Is(err, errUnexpanded) || time.Since(started) > 100*time.Millisecond):
				t.Errorf("%s: got %v after %s, want %v at once", c.reason, err, time.Since(started), errUnexpanded)
			}
		})
	}
}

// errNotServed marks a case that fails once the timeout runs out.
var errNotServed = errors.New("not served")

func TestRunCheck(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "<h1>Trellis</h1> marker-1")
	}))
	defer srv.Close()
	cases := map[string]struct {
		args []string
		want int
	}{
		"the marker":      {[]string{"--contains", "marker-1", "--timeout", "1s", srv.URL}, 0},
		"another marker":  {[]string{"--contains", "marker-2", "--timeout", "200ms", srv.URL}, 1},
		"no URL":          {[]string{"--contains", "marker-1"}, 2},
		"flags after URL": {[]string{srv.URL, "--contains", "marker-1"}, 2},
		"an unknown flag": {[]string{"--contain", "marker-1", srv.URL}, 2},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var out, errOut strings.Builder
			if got := runCheck(c.args, &out, &errOut); got != c.want {
				t.Errorf("viewer check %v: exit %d, want %d\nstdout: %s\nstderr: %s", c.args, got, c.want, out.String(), errOut.String())
			}
		})
	}
}
