package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// MinIO is a real MinIO server (bin/minio, `make minio`) on loopback, one
// drive in a temporary directory, with its root user: S3 and the admin API
// on one port. MinIO is AGPL-3.0; it runs in tests only.
type MinIO struct {
	// Endpoint is the S3 URL, where the admin API is served too.
	Endpoint  string
	AccessKey string
	SecretKey string
	// Pid is the server's process, for a benchmark's CPU figures.
	Pid int
}

// StartMinIO starts MinIO with fresh data and a root user, waits until it
// answers that user, and stops it when the test ends. It skips the test
// when bin/minio was not built.
func StartMinIO(t testing.TB) *MinIO {
	t.Helper()
	if !HaveMinIO() {
		t.Skipf("MinIO not found at %s (run `make minio`)", minioBin())
	}
	m, stop, err := RunMinIO(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return m
}

func minioBin() string { return filepath.Join(RepoRoot(), "bin", "minio") }

// HaveMinIO reports whether bin/minio was built.
func HaveMinIO() bool {
	_, err := os.Stat(minioBin())
	return err == nil
}

// RunMinIO starts MinIO as StartMinIO does, keeping its data in dir, for a
// suite that shares one among its tests; stop ends it.
func RunMinIO(dir string) (*MinIO, func(), error) {
	m := &MinIO{AccessKey: "minioadmin" + randomHex(4), SecretKey: randomHex(20)}
	ports, err := freePorts(2) // two distinct ports, as for SeaweedFS
	if err != nil {
		return nil, nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	m.Endpoint = "http://" + addr
	cmd := exec.Command(minioBin(), "server", "--quiet", "--address", addr,
		"--console-address", "127.0.0.1:"+strconv.Itoa(ports[1]), filepath.Join(dir, "data"))
	// The root user, out of argv; no console, no update checks.
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+m.AccessKey, "MINIO_ROOT_PASSWORD="+m.SecretKey,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off", "HOME="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("starting MinIO: %w", err)
	}
	m.Pid = cmd.Process.Pid
	stop := func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	if err := m.waitReady(60 * time.Second); err != nil {
		stop()
		return nil, nil, fmt.Errorf("MinIO did not get ready: %w; its output:\n%s", err, out.String())
	}
	return m, stop, nil
}

// waitReady waits until MinIO answers a signed ListBuckets of the root user:
// its IAM is loaded by then.
func (m *MinIO) waitReady(within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	mc, err := minio.New(strings.TrimPrefix(m.Endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(m.AccessKey, m.SecretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath,
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
