package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// SeaweedFS is a real SeaweedFS (bin/weed, `make seaweedfs`) on loopback:
// master, volume server, filer, and the S3 gateway with its IAM API on the
// same port, writable, and one admin identity.
type SeaweedFS struct {
	// Endpoint is the S3 gateway's URL, where the IAM API is served too.
	Endpoint  string
	AccessKey string
	SecretKey string
	// Pid is the server's process, for a benchmark's CPU figures.
	Pid int
}

// lockedBuffer keeps weed's output for a failed start; weed writes it from
// two goroutines of exec.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// StartSeaweedFS starts SeaweedFS with fresh data and an admin identity,
// waits until its S3 gateway answers that identity, and stops it when the
// test ends. It skips the test when bin/weed was not built.
func StartSeaweedFS(t testing.TB) *SeaweedFS {
	t.Helper()
	if !HaveSeaweedFS() {
		t.Skipf("SeaweedFS not found at %s (run `make seaweedfs`)", weedBin())
	}
	s, stop, err := RunSeaweedFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return s
}

func weedBin() string { return filepath.Join(RepoRoot(), "bin", "weed") }

// HaveSeaweedFS reports whether bin/weed was built.
func HaveSeaweedFS() bool {
	_, err := os.Stat(weedBin())
	return err == nil
}

// RunSeaweedFS starts SeaweedFS as StartSeaweedFS does, keeping its data in
// dir, for a suite that shares one among its tests; stop ends it.
func RunSeaweedFS(dir string) (*SeaweedFS, func(), error) {
	s := &SeaweedFS{AccessKey: "seaweedadmin" + randomHex(4), SecretKey: randomHex(20)}
	// All eight at once: ports taken one by one, each closed before the
	// next, can come back the same (the S3 port and its gRPC port once did).
	ports, err := freePorts(8)
	if err != nil {
		return nil, nil, err
	}
	port := func() string {
		p := ports[0]
		ports = ports[1:]
		return strconv.Itoa(p)
	}
	s3Port := port()
	s.Endpoint = "http://127.0.0.1:" + s3Port
	args := []string{
		"-logtostderr", "server",
		"-ip", "127.0.0.1", "-ip.bind", "127.0.0.1", "-dir", dir,
		// Every listener on a port of its own: left alone, the gRPC ports
		// are the HTTP ports plus 10000, and some have fixed defaults.
		"-master.port", port(), "-master.port.grpc", port(),
		"-volume.port", port(), "-volume.port.grpc", port(),
		"-filer", "-filer.port", port(), "-filer.port.grpc", port(),
		"-s3", "-s3.port", s3Port, "-s3.port.grpc", port(),
		"-s3.port.iceberg", "0", "-s3.port.lance", "0",
		// The IAM API is read-only unless told.
		"-s3.iam.readOnly=false",
		// Small volumes, and no report to SeaweedFS' telemetry server.
		"-master.volumeSizeLimitMB", "64", "-volume.max", "100",
		// A test writes kilobytes: a nearly full disk (below the default
		// 1% free) must not turn every volume read-only, which SeaweedFS
		// answers with 500 InternalError to every write.
		"-volume.minFreeSpace", "64MiB",
		"-master.telemetry=false",
	}
	cmd := exec.Command(weedBin(), args...)
	// The admin identity, out of argv: SeaweedFS takes these as an admin.
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+s.AccessKey, "AWS_SECRET_ACCESS_KEY="+s.SecretKey)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("starting SeaweedFS: %w", err)
	}
	s.Pid = cmd.Process.Pid
	stop := func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	if err := s.waitReady(60 * time.Second); err != nil {
		stop()
		return nil, nil, fmt.Errorf("SeaweedFS did not get ready: %w; its output:\n%s", err, out.String())
	}
	return s, stop, nil
}

// waitReady waits until the S3 gateway answers a signed ListBuckets of the
// admin: the filer and the gateway's identities are loaded by then.
func (s *SeaweedFS) waitReady(within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	mc, err := minio.New(strings.TrimPrefix(s.Endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		return err
	}
	for {
		_, err := mc.ListBuckets(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}
