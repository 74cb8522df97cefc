package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// S3Server is a real versitygw (bin/versitygw) on loopback, with internal
// IAM (accounts, for BucketAccesses) and versioning on, behind a counting
// reverse proxy so tests can assert how many requests Trellis sent, and can
// be stopped and started again to play an outage.
type S3Server struct {
	// Endpoint is the proxy's URL: what an ObjectStore should point at.
	// Over TLS it is versitygw's own, as Direct.
	Endpoint string
	// Direct is versitygw's own URL, for the test's checks (not counted).
	Direct    string
	AccessKey string
	SecretKey string

	dataDir  string
	port     int
	proxy    *http.Server
	requests atomic.Int64
	mu       sync.Mutex
	cmd      *exec.Cmd
	opts     S3Options
	faults   []fault
}

// S3Options are how versitygw is started; the zero value is plain HTTP in
// us-east-1.
type S3Options struct {
	// Webhook, if not empty, is its --event-webhook-url.
	Webhook string
	// Region is the region it serves and checks signatures against
	// (--region); us-east-1 when empty.
	Region string
	// CertFile and KeyFile, when set, serve S3 and the admin API (on the
	// same port) over TLS with that certificate (--cert, --key). There is
	// no counting proxy then: it would end the TLS a client must meet.
	CertFile, KeyFile string
}

// fault answers the next matching requests with an error status instead of
// passing them to versitygw.
type fault struct {
	match  func(*http.Request) bool
	status int
	left   int
}

// StartS3 starts versitygw with fresh credentials and data; webhook, if not
// empty, is its --event-webhook-url.
func StartS3(webhook string) (*S3Server, error) {
	return StartS3With(S3Options{Webhook: webhook})
}

// StartS3With starts versitygw with fresh credentials and data, as opts say.
func StartS3With(opts S3Options) (*S3Server, error) {
	dir, err := os.MkdirTemp("", "trellis-s3-")
	if err != nil {
		return nil, err
	}
	s := &S3Server{dataDir: dir, AccessKey: "trellis" + randomHex(6), SecretKey: randomHex(20), port: freePort(), opts: opts}
	scheme := "http"
	if opts.CertFile != "" {
		scheme = "https"
	}
	s.Direct = fmt.Sprintf("%s://127.0.0.1:%d", scheme, s.port)
	if err := s.Start(); err != nil {
		return nil, err
	}
	if opts.CertFile != "" {
		s.Endpoint = s.Direct
		return s, nil
	}
	target, _ := url.Parse(s.Direct)
	rp := httputil.NewSingleHostReverseProxy(target)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.Endpoint = "http://" + ln.Addr().String()
	s.proxy = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		if status := s.takeFault(r); status != 0 {
			w.WriteHeader(status)
			return
		}
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = s.proxy.Serve(ln) }()
	return s, nil
}

// Start (re)starts versitygw on its port and waits until it accepts connections.
func (s *S3Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	iamDir, versionsDir, dataDir := filepath.Join(s.dataDir, "iam"), filepath.Join(s.dataDir, "versions"), filepath.Join(s.dataDir, "data")
	for _, d := range []string{iamDir, versionsDir, dataDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	region := s.opts.Region
	if region == "" {
		region = "us-east-1"
	}
	args := []string{"--port", fmt.Sprintf("127.0.0.1:%d", s.port), "--region", region, "--iam-dir", iamDir}
	if s.opts.CertFile != "" {
		args = append(args, "--cert", s.opts.CertFile, "--key", s.opts.KeyFile)
	}
	args = append(args, "posix", "--versioning-dir", versionsDir, dataDir)
	cmd := exec.Command(filepath.Join(RepoRoot(), "bin", "versitygw"), args...)
	// Keys and the webhook URL (it carries a token) stay out of argv.
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.AccessKey, "ROOT_SECRET_ACCESS_KEY="+s.SecretKey)
	if s.opts.Webhook != "" {
		cmd.Env = append(cmd.Env, "VGW_EVENT_WEBHOOK_URL="+s.opts.Webhook)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting versitygw (run `make tools`): %w", err)
	}
	s.cmd = cmd
	for range 100 {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", s.port)); err == nil {
			_ = c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("versitygw did not start on port %d", s.port)
}

// Stop kills versitygw; its data stays for the next Start.
func (s *S3Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// Fail makes the proxy answer the next times requests for which match is
// true with status, instead of passing them on: a store that fails one step.
func (s *S3Server) Fail(match func(*http.Request) bool, status, times int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, fault{match: match, status: status, left: times})
}

func (s *S3Server) takeFault(r *http.Request) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.faults {
		if f := &s.faults[i]; f.left > 0 && f.match(r) {
			f.left--
			return f.status
		}
	}
	return 0
}

// Requests is how many requests reached the proxy so far.
func (s *S3Server) Requests() int64 { return s.requests.Load() }

// Close stops everything and removes the data.
func (s *S3Server) Close() {
	s.Stop()
	if s.proxy != nil {
		_ = s.proxy.Close()
	}
	_ = os.RemoveAll(s.dataDir)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// HaveVersitygw reports whether bin/versitygw was built.
func HaveVersitygw() bool {
	_, err := os.Stat(filepath.Join(RepoRoot(), "bin", "versitygw"))
	return err == nil
}
