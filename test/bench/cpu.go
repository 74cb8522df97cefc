package main

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// CPU time of the processes a run keeps busy, read from /proc, so a scenario
// can say what it cost the API server and etcd, not only how long it took.

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat; it
// is 100 on every Linux this runs on.
const clockTicks = 100

// components are the cluster's processes, by the name of their kwokctl pid file.
var components = []string{"kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kwok-controller"}

// cpuSample is the CPU seconds used so far by each process, by name.
type cpuSample map[string]float64

// minus is the CPU seconds each process used since before.
func (s cpuSample) minus(before cpuSample) cpuSample {
	out := cpuSample{}
	for k, v := range s {
		out[k] = v - before[k]
	}
	return out
}

func (s cpuSample) String() string {
	parts := make([]string, 0, len(s))
	for _, k := range append(append([]string{"manager"}, components...), bucketServers...) {
		if v, ok := s[k]; ok {
			parts = append(parts, fmt.Sprintf("%s %.1fs", k, v))
		}
	}
	return strings.Join(parts, ", ")
}

// cpu samples the cluster's components (from kwokctl's pid files) and the
// manager, if it runs.
func (b *bench) cpu() (cpuSample, error) {
	s := cpuSample{}
	pids := filepath.Join(b.root, ".dev", "kwok", "clusters", b.cluster, "pids")
	for _, c := range components {
		raw, err := os.ReadFile(filepath.Join(pids, c+".pid"))
		if err != nil {
			return nil, fmt.Errorf("pid of %s: %w", c, err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil {
			return nil, fmt.Errorf("pid of %s: %w", c, err)
		}
		if s[c], err = cpuSeconds(pid); err != nil {
			return nil, fmt.Errorf("%s: %w", c, err)
		}
	}
	// versitygw, once started: the bucket scenario's S3 work.
	if raw, err := os.ReadFile(filepath.Join(b.root, ".dev", b.cluster+"-s3", "pid")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil {
			if v, err := cpuSeconds(pid); err == nil {
				s["versitygw"] = v
			}
		}
	}
	// The bucket scenario's other servers, while they run.
	for name, pid := range b.storePids {
		if v, err := cpuSeconds(pid); err == nil {
			s[name] = v
		}
	}
	if b.mgr != nil && b.mgr.cmd != nil {
		v, err := cpuSeconds(b.mgr.cmd.Process.Pid)
		if err != nil {
			return nil, fmt.Errorf("manager: %w", err)
		}
		s["manager"] = v
	}
	return s, nil
}

// cpuSeconds is the user and system CPU time of a process so far.
func cpuSeconds(pid int) (float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces; the
	// fields after the last ')' start at field 3, so utime and stime (fields
	// 14 and 15) are the 12th and 13th of them.
	afterName := string(raw[strings.LastIndexByte(string(raw), ')')+1:])
	f := strings.Fields(afterName)
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("unreadable /proc/%d/stat", pid)
	}
	return (utime + stime) / clockTicks, nil
}

// writeCounter counts the mutating requests a client sends, by resource, as
// the manager's trellis_api_requests_total does for Trellis.
type writeCounter struct {
	mu sync.Mutex
	w  writeCounts
}

func (c *writeCounter) wrap(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			switch req.Method {
			case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
				c.mu.Lock()
				if c.w == nil {
					c.w = writeCounts{}
				}
				c.w[resourceOf(req.URL.Path)]++
				c.mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	return out
}

func (c *writeCounter) counts() writeCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.w)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// resourceOf is the plural resource of an API path:
// /api/v1/namespaces/NS/RES/... or /apis/G/V/namespaces/NS/RES/...
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) > 0 && parts[0] == "apis" && len(parts) > 3 {
		parts = parts[3:]
	} else if len(parts) > 2 {
		parts = parts[2:]
	}
	if len(parts) > 2 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) == 0 {
		return "other"
	}
	return parts[0]
}
