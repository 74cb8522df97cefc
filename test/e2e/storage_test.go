//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStorageBucketOutageAndRecovery: the sample ObjectStore and StorageBucket
// become Ready against a real versitygw; stopping the server turns the bucket
// unhealthy within two check intervals, with the reason in words; starting it
// again heals it.
func TestStorageBucketOutageAndRecovery(t *testing.T) {
	useLocalManager(t)
	store, err := os.ReadFile(filepath.Join(root, "config", "samples", "storage_v1_objectstore.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	store = []byte(strings.Replace(string(store), "http://127.0.0.1:7070", s3Endpoint(), 1))
	if _, err := kubectlIn(store, "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	bucket, err := os.ReadFile(filepath.Join(root, "config", "samples", "storage_v1_storagebucket.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	bucket = []byte(strings.Replace(string(bucket), "intervalSeconds: 60", "intervalSeconds: 10", 1))
	if _, err := kubectlIn(bucket, "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	if _, err := kubectl("wait", "--for=condition=Ready", "objectstore/local-s3", "--timeout=60s"); err != nil {
		t.Fatal(err)
	}
	if _, err := kubectl("wait", "--for=condition=Ready", "storagebucket/assets", "-n", "default", "--timeout=60s"); err != nil {
		t.Fatal(err)
	}
	out, err := kubectl("get", "storagebuckets", "-n", "default")
	if err != nil {
		t.Fatal(err)
	}
	for _, col := range []string{"BUCKET", "STORE", "READY", "REASON", "default-assets", "local-s3"} {
		if !strings.Contains(out, col) {
			t.Errorf("kubectl get storagebuckets lacks %q:\n%s", col, out)
		}
	}

	if err := s3Down(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := kubectl("wait", "--for=condition=Ready=False", "storagebucket/assets", "-n", "default", "--timeout=25s"); err != nil {
		t.Fatalf("not unhealthy within two intervals: %v", err)
	}
	t.Logf("unhealthy %.1fs after the S3 server stopped", time.Since(start).Seconds())
	reason, _ := kubectl("get", "storagebucket", "assets", "-n", "default", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].message}`)
	if !strings.Contains(reason, "did not answer") && !strings.Contains(reason, "failed to answer") {
		t.Errorf("unhealthy without a reason in words: %q", reason)
	}

	if err := s3Up(); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if _, err := kubectl("wait", "--for=condition=Ready=True", "storagebucket/assets", "-n", "default", "--timeout=120s"); err != nil {
		t.Fatalf("did not heal: %v", err)
	}
	t.Logf("healthy again %.1fs after the S3 server came back", time.Since(start).Seconds())
}
