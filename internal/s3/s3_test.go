package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/tags"
	. "github.com/onsi/gomega"
)

func TestNewRejectsBadConfig(t *testing.T) {
	valid := Config{Endpoint: "http://127.0.0.1:9000", AccessKey: "ak", SecretKey: "sk"}
	tests := []struct {
		name    string
		mutate  func(*Config)
		noCreds bool
	}{
		{name: "ftp scheme", mutate: func(c *Config) { c.Endpoint = "ftp://127.0.0.1:9000" }},
		{name: "no scheme", mutate: func(c *Config) { c.Endpoint = "127.0.0.1:9000" }},
		{name: "bare host", mutate: func(c *Config) { c.Endpoint = "s3.example.com" }},
		{name: "empty endpoint", mutate: func(c *Config) { c.Endpoint = "" }},
		{name: "no host", mutate: func(c *Config) { c.Endpoint = "http://" }},
		{name: "path without host", mutate: func(c *Config) { c.Endpoint = "https:///bucket" }},
		{name: "unparsable", mutate: func(c *Config) { c.Endpoint = "http://[::1" }},
		{name: "empty access key", mutate: func(c *Config) { c.AccessKey = "" }, noCreds: true},
		{name: "empty secret key", mutate: func(c *Config) { c.SecretKey = "" }, noCreds: true},
		{name: "no keys", mutate: func(c *Config) { c.AccessKey, c.SecretKey = "", "" }, noCreds: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			cfg := valid
			tt.mutate(&cfg)
			c, err := New(cfg)
			g.Expect(err).To(HaveOccurred())
			g.Expect(c).To(BeNil())
			if tt.noCreds {
				g.Expect(errors.Is(err, ErrCredentialsIncomplete)).To(BeTrue(), "got %v", err)
			} else {
				g.Expect(errors.Is(err, ErrCredentialsIncomplete)).To(BeFalse())
				g.Expect(err.Error()).To(ContainSubstring("not an http(s) URL"))
			}
		})
	}
}

func TestNewAcceptsValidConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Endpoint: "http://127.0.0.1:9000", PathStyle: true},
		{Endpoint: "https://s3.example.com"},
		{Endpoint: "http://localhost:1/"},
		{Endpoint: "https://[::1]:9000", PathStyle: true},
	} {
		t.Run(cfg.Endpoint, func(t *testing.T) {
			g := NewWithT(t)
			cfg.AccessKey, cfg.SecretKey = "ak", "sk"
			c, err := New(cfg)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c).NotTo(BeNil())
		})
	}
}

// TestNewRefusesVirtualHostsOnAnIP: virtual-hosted addressing on an IP
// address would send every bucket request to <bucket>.<IP>, no host at
// all, while the store check (no bucket) passes; it is refused, with a
// reason a person acts on.
func TestNewRefusesVirtualHostsOnAnIP(t *testing.T) {
	for _, endpoint := range []string{"http://127.0.0.1:9000", "https://[::1]:9000", "https://10.0.0.7"} {
		t.Run(endpoint, func(t *testing.T) {
			g := NewWithT(t)
			_, err := New(Config{Endpoint: endpoint, AccessKey: "ak", SecretKey: "sk"})
			g.Expect(err).To(MatchError(ErrVirtualHostIP))
			reason, msg := Classify(err)
			g.Expect(reason).To(Equal(ReasonInvalidEndpoint))
			g.Expect(msg).To(ContainSubstring("set pathStyle: true"))
		})
	}
}

// gateway is a real versitygw on loopback, for this test only.
type gateway struct {
	endpoint  string
	host      string
	accessKey string
	secretKey string
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port
}

func startGateway(t *testing.T) gateway { return startGatewayWith(t, true) }

// startGatewayWith starts versitygw with or without internal IAM.
func startGatewayWith(t *testing.T, iam bool) gateway {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(filepath.Dir(file), "..", "..", "bin", "versitygw")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("versitygw not found at %s (run `make tools`): %v", bin, err)
	}
	gw := gateway{accessKey: "trellistest", secretKey: "trellis-test-secret-0123456789"}
	port := freePort(t)
	gw.host = fmt.Sprintf("127.0.0.1:%d", port)
	gw.endpoint = "http://" + gw.host
	// Internal IAM (accounts) and versioning on, as `make dev` and the
	// controllers' tests run it.
	dir := t.TempDir()
	for _, sub := range []string{"iam", "versions", "data"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"--port", gw.host}
	if iam {
		args = append(args, "--iam-dir", filepath.Join(dir, "iam"))
	}
	args = append(args, "posix", "--versioning-dir", filepath.Join(dir, "versions"), filepath.Join(dir, "data"))
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+gw.accessKey, "ROOT_SECRET_ACCESS_KEY="+gw.secretKey)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting versitygw: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", gw.host, 200*time.Millisecond); err == nil {
			_ = c.Close()
			return gw
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw did not listen on %s; output:\n%s", gw.host, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (gw gateway) config() Config {
	return Config{Endpoint: gw.endpoint, Region: "us-east-1", PathStyle: true,
		AccessKey: gw.accessKey, SecretKey: gw.secretKey, Timeout: 5 * time.Second}
}

// direct is a plain minio-go client, for what the Client under test does not do.
func (gw gateway) direct(t *testing.T) *minio.Client {
	t.Helper()
	mc, err := minio.New(gw.host, &minio.Options{
		Creds:        credentials.NewStaticV4(gw.accessKey, gw.secretKey, ""),
		Region:       "us-east-1",
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		t.Fatalf("direct client: %v", err)
	}
	return mc
}

func TestClientAgainstVersitygw(t *testing.T) {
	gw := startGateway(t)
	ctx := context.Background()
	const bucket = "trellis-client-test"

	g := NewWithT(t)
	c, err := New(gw.config())
	g.Expect(err).NotTo(HaveOccurred())
	mc := gw.direct(t)

	t.Run("ping", func(t *testing.T) {
		NewWithT(t).Expect(c.Ping(ctx)).To(Succeed())
	})

	t.Run("ping with wrong keys", func(t *testing.T) {
		tests := []struct {
			name   string
			mutate func(*Config)
		}{
			{name: "unknown access key", mutate: func(cfg *Config) { cfg.AccessKey = "nobody" }},
			{name: "wrong secret", mutate: func(cfg *Config) { cfg.SecretKey = "not-the-secret-0123456789" }},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				g := NewWithT(t)
				cfg := gw.config()
				tt.mutate(&cfg)
				bad, err := New(cfg)
				g.Expect(err).NotTo(HaveOccurred())
				err = bad.Ping(ctx)
				g.Expect(err).To(HaveOccurred())
				reason, msg := Classify(err)
				g.Expect(reason).To(Equal(ReasonAccessDenied), "error %v", err)
				g.Expect(msg).NotTo(ContainSubstring(cfg.SecretKey))
				g.Expect(msg).NotTo(ContainSubstring(gw.secretKey))
			})
		}
	})

	t.Run("bucket lifecycle", func(t *testing.T) {
		g := NewWithT(t)

		exists, err := c.BucketExists(ctx, bucket)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(exists).To(BeFalse())

		_, err = c.Owner(ctx, bucket)
		g.Expect(err).To(HaveOccurred())
		reason, _ := Classify(err)
		g.Expect(reason).To(Equal(ReasonBucketMissing), "error %v", err)

		g.Expect(c.CreateBucket(ctx, bucket)).To(Succeed())
		exists, err = c.BucketExists(ctx, bucket)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(exists).To(BeTrue())

		owner, err := c.Owner(ctx, bucket)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(owner).To(BeZero())

		// A tag someone else set survives SetOwner.
		other, err := tags.NewTags(map[string]string{"team": "a"}, false)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(mc.SetBucketTagging(ctx, bucket, other)).To(Succeed())
		owner, err = c.Owner(ctx, bucket)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(owner).To(BeZero())

		g.Expect(c.SetOwner(ctx, bucket, Owner{UID: "uid-1", Namespace: "team-a", NamespaceUID: "ns-uid-1"})).To(Succeed())
		owner, err = c.Owner(ctx, bucket)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(owner).To(Equal(Owner{UID: "uid-1", Namespace: "team-a", NamespaceUID: "ns-uid-1"}))
		got, err := mc.GetBucketTagging(ctx, bucket)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.ToMap()).To(Equal(map[string]string{"team": "a", OwnerTag: "uid-1", OwnerNamespaceTag: "team-a", OwnerNamespaceUIDTag: "ns-uid-1"}))

		// An empty field takes its tag off: no tag says what is no longer true.
		g.Expect(c.SetOwner(ctx, bucket, Owner{UID: "uid-2", Namespace: "team-b"})).To(Succeed())
		owner, err = c.Owner(ctx, bucket)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(owner).To(Equal(Owner{UID: "uid-2", Namespace: "team-b"}))
	})

	t.Run("count objects", func(t *testing.T) {
		g := NewWithT(t)
		n, err := c.CountObjects(ctx, bucket, 10)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(Equal(0))

		for _, key := range []string{"a.txt", "dir/b.txt", "dir/sub/c.txt"} {
			body := strings.NewReader("hello " + key)
			_, err := mc.PutObject(ctx, bucket, key, body, body.Size(), minio.PutObjectOptions{})
			g.Expect(err).NotTo(HaveOccurred())
		}
		tests := []struct{ limit, want int }{{1, 1}, {2, 2}, {3, 3}, {10, 3}}
		for _, tt := range tests {
			n, err := c.CountObjects(ctx, bucket, tt.limit)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n).To(Equal(tt.want), "limit %d", tt.limit)
		}

		_, err = c.CountObjects(ctx, "no-such-bucket-here", 10)
		g.Expect(err).To(HaveOccurred())
		reason, _ := Classify(err)
		g.Expect(reason).To(Equal(ReasonBucketMissing), "error %v", err)
	})

	t.Run("probe", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(c.Probe(ctx, bucket)).To(Succeed())
		n, err := c.CountObjects(ctx, bucket, 10)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(Equal(3), "the probe must leave no object behind")
		_, err = mc.StatObject(ctx, bucket, probeKey, minio.StatObjectOptions{})
		g.Expect(minio.ToErrorResponse(err).Code).To(Equal("NoSuchKey"))

		err = c.Probe(ctx, "no-such-bucket-here")
		g.Expect(err).To(HaveOccurred())
		reason, _ := Classify(err)
		// The probe step's error is the store's NoSuchBucket.
		g.Expect(reason).To(Equal(ReasonBucketMissing), "error %v", err)
		var probe *ProbeError
		g.Expect(errors.As(err, &probe)).To(BeTrue())
	})

	t.Run("delete", func(t *testing.T) {
		g := NewWithT(t)
		err := c.DeleteBucket(ctx, bucket)
		g.Expect(err).To(HaveOccurred(), "a bucket with objects must not be deleted")
		exists, err := c.BucketExists(ctx, bucket)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(exists).To(BeTrue())

		for obj := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
			g.Expect(obj.Err).NotTo(HaveOccurred())
			g.Expect(mc.RemoveObject(ctx, bucket, obj.Key, minio.RemoveObjectOptions{})).To(Succeed())
		}
		g.Expect(c.DeleteBucket(ctx, bucket)).To(Succeed())
		exists, err = c.BucketExists(ctx, bucket)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(exists).To(BeFalse())
	})
}

func TestClientUnreachableWithinTimeout(t *testing.T) {
	// silent accepts connections and never answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		held []net.Conn
	)
	go func() {
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, conn)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = silent.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	})

	tests := []struct {
		name     string
		endpoint string
	}{
		{name: "closed port", endpoint: fmt.Sprintf("http://127.0.0.1:%d", freePort(t))},
		{name: "silent server", endpoint: "http://" + silent.Addr().String()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c, err := New(Config{Endpoint: tt.endpoint, Region: "us-east-1", PathStyle: true,
				AccessKey: "ak", SecretKey: fakeSecretKey, Timeout: time.Second})
			g.Expect(err).NotTo(HaveOccurred())

			for _, op := range []struct {
				name string
				call func() error
			}{
				{"Ping", func() error { return c.Ping(context.Background()) }},
				{"BucketExists", func() error { _, err := c.BucketExists(context.Background(), "some-bucket"); return err }},
			} {
				start := time.Now()
				err := op.call()
				elapsed := time.Since(start)

				g.Expect(err).To(HaveOccurred(), op.name)
				g.Expect(elapsed).To(BeNumerically("<", 3*time.Second), op.name)
				reason, msg := Classify(err)
				g.Expect(reason).To(Equal(ReasonStoreUnreachable), "%s: %v", op.name, err)
				g.Expect(msg).NotTo(ContainSubstring(fakeSecretKey))
				g.Expect(msg).NotTo(ContainSubstring("http://"))
			}
		})
	}
}
