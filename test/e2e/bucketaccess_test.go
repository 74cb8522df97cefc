//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/internal/s3"
)

// s3Root is the root account of the suite's versitygw, as hack/cluster.sh generated it.
func s3Root(t *testing.T) s3.Config {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, ".dev", cluster+"-s3", "credentials"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := s3.Config{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", s3Port), Region: "us-east-1", PathStyle: true}
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			switch k {
			case "AWS_ACCESS_KEY_ID":
				cfg.AccessKey = v
			case "AWS_SECRET_ACCESS_KEY":
				cfg.SecretKey = v
			}
		}
	}
	return cfg
}

// accountsOf lists the store's accounts whose access key id starts with prefix.
func accountsOf(t *testing.T, prefix string) []string {
	t.Helper()
	a, err := s3.NewVersitygwAccounts(s3Root(t), "")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := a.ListAccounts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, id := range ids {
		if strings.HasPrefix(id, prefix) {
			out = append(out, id)
		}
	}
	return out
}

// workloadEnv is the environment a pod with envFrom on the Secret gets.
func workloadEnv(t *testing.T, ns, secret string) []string {
	t.Helper()
	out, err := kubectl("get", "secret", secret, "-n", ns, "--as", "e2e-dev", "-o", "jsonpath={.data}")
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]string
	if err := json.Unmarshal([]byte(out), &data); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range data {
		if strings.ToUpper(k) != k {
			continue // the plain keys; the workload reads the AWS_… form
		}
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			t.Fatal(err)
		}
		env = append(env, k+"="+string(b))
	}
	return env
}

// runWorkload runs test/e2e/s3client, a separate process, with env.
func runWorkload(t *testing.T, workload string, env []string) (string, error) {
	t.Helper()
	cmd := exec.Command(workload)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

func withEnv(env []string, key, value string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// TestBucketAccessWorkload is the whole story on a real cluster: the
// platform team opens a store to a team's namespace; an editor of that
// namespace (the built-in edit role, with Trellis' rules aggregated into it)
// asks for a bucket and a read-write key; a workload process uses the
// Secret's AWS_… environment with minio-go to write and read an object, and
// is refused on another bucket. Another namespace cannot use the store.
// Deleting the namespace revokes the key before the bucket goes, and leaves
// no account behind.
func TestBucketAccessWorkload(t *testing.T) {
	workload := filepath.Join(t.TempDir(), "s3client")
	if out, err := exec.Command("go", "build", "-o", workload, filepath.Join(root, "test", "e2e", "s3client")).CombinedOutput(); err != nil {
		t.Fatalf("building the workload: %v\n%s", err, out)
	}
	const ns, closedNS = "e2e-access", "e2e-access-closed"
	openStoreTo(t, ns, closedNS)
	bucket := `apiVersion: storage.trellis.dev/v1
kind: StorageBucket
metadata: {name: data}
spec:
  storeRef: {name: e2e-access-s3}
  deletionPolicy: Delete
`
	access := `apiVersion: storage.trellis.dev/v1
kind: BucketAccess
metadata: {name: app}
spec:
  bucketRef: {name: data}
  mode: ReadWrite
  secretName: app-s3
`
	other := strings.Replace(bucket, "name: data", "name: other", 1)
	asEditor(t, bucket, ns)
	asEditor(t, other, ns)
	asEditor(t, access, ns)
	asEditor(t, bucket, closedNS)
	for _, obj := range []string{"storagebucket/data", "storagebucket/other", "bucketaccess/app"} {
		if _, err := kubectl("wait", "--for=condition=Ready", obj, "-n", ns, "--timeout=120s"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kubectl("wait", "--for=condition=Stalled", "storagebucket/data", "-n", closedNS, "--timeout=60s"); err != nil {
		t.Fatalf("a namespace the store is not open to: %v", err)
	}
	reason, _ := kubectl("get", "storagebucket", "data", "-n", closedNS, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].reason}`)
	if reason != "NamespaceNotAllowed" {
		t.Errorf("closed namespace: Ready reason %q, want NamespaceNotAllowed", reason)
	}
	out, err := kubectl("get", "bucketaccesses", "-n", ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, col := range []string{"BUCKET", "MODE", "SECRET", "READY", "REASON", "app-s3", "ReadWrite", "Granted"} {
		if !strings.Contains(out, col) {
			t.Errorf("kubectl get bucketaccesses lacks %q:\n%s", col, out)
		}
	}

	env := workloadEnv(t, ns, "app-s3")
	if got := envValue(env, "BUCKET_NAME"); got != ns+"-data" {
		t.Fatalf("BUCKET_NAME = %q", got)
	}
	start := time.Now()
	if out, err := runWorkload(t, workload, env); err != nil {
		t.Fatalf("the workload could not use its key: %v\n%s", err, out)
	} else {
		t.Logf("workload: %s (%.2fs)", strings.TrimSpace(out), time.Since(start).Seconds())
	}
	if out, err := runWorkload(t, workload, withEnv(env, "BUCKET_NAME", ns+"-other")); err == nil || !strings.Contains(out, "status 403") {
		t.Fatalf("the key reached another bucket of the same namespace: %v\n%s", err, out)
	}
	uid, err := kubectl("get", "bucketaccess", "app", "-n", ns, "-o", "jsonpath={.metadata.uid}")
	if err != nil {
		t.Fatal(err)
	}
	keyID := envValue(env, "AWS_ACCESS_KEY_ID")
	prefix := strings.TrimRight(keyID, "0123456789") // the key's account prefix, "…V"
	if got := accountsOf(t, prefix); len(got) != 1 || got[0] != keyID {
		t.Fatalf("the store's accounts of the access: %v, want [%s] (uid %s)", got, keyID, uid)
	}

	// Deleting the namespace (the namespace controller deletes everything
	// in it at once): the key is revoked first, then the bucket goes.
	start = time.Now()
	if _, err := kubectl("delete", "namespace", ns, "--wait=true", "--timeout=180s"); err != nil {
		t.Fatalf("namespace deletion did not finish: %v", err)
	}
	t.Logf("namespace with a bucket and a key deleted in %.1fs", time.Since(start).Seconds())
	if got := accountsOf(t, prefix); len(got) != 0 {
		t.Errorf("accounts left behind: %v", got)
	}
	if out, err := runWorkload(t, workload, env); err == nil || !strings.Contains(out, "status 403") {
		t.Errorf("the revoked key still works: %v\n%s", err, out)
	}
	c, err := s3.New(s3Root(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{ns + "-data", ns + "-other"} {
		if exists, err := c.BucketExists(context.Background(), b); err != nil || exists {
			t.Errorf("bucket %s (deletionPolicy Delete) still exists: %v", b, err)
		}
	}

	// The secret key never reached the manager's log, Events or any status.
	expectNowhere(t, envValue(env, "AWS_SECRET_ACCESS_KEY"))

	if _, err := kubectl("delete", "namespace", closedNS, "--wait=true", "--timeout=120s"); err != nil {
		t.Fatal(err)
	}
	if _, err := kubectl("delete", "objectstore", "e2e-access-s3", "--wait=true", "--timeout=60s"); err != nil {
		t.Fatal(err)
	}
}

// openStoreTo makes the store of the test, open to namespaces labelled
// e2e-s3=open, and the namespaces, each with the user e2e-dev as an editor
// (the built-in edit role); only the first is labelled in, by the admin.
func openStoreTo(t *testing.T, open string, others ...string) {
	t.Helper()
	store := fmt.Sprintf(`apiVersion: storage.trellis.dev/v1
kind: ObjectStore
metadata: {name: e2e-access-s3}
spec:
  type: Versitygw
  endpoint: http://127.0.0.1:%d
  pathStyle: true
  credentialsSecretRef: {namespace: trellis-system, name: local-s3-credentials}
  namespaceSelector: {matchLabels: {e2e-s3: open}}
`, s3Port)
	if _, err := kubectlIn([]byte(store), "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	for _, n := range append([]string{open}, others...) {
		if _, err := kubectl("create", "namespace", n); err != nil {
			t.Fatal(err)
		}
		if _, err := kubectl("create", "rolebinding", "e2e-dev-edit", "-n", n, "--clusterrole=edit", "--user=e2e-dev"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kubectl("label", "namespace", open, "e2e-s3=open"); err != nil {
		t.Fatal(err)
	}
	// What the editor may not do: open the store to another namespace.
	for _, n := range others {
		if _, err := kubectl("label", "namespace", n, "e2e-s3=open", "--as", "e2e-dev"); err == nil {
			t.Fatal("a namespace editor labelled a namespace")
		}
	}
}

// asEditor applies a manifest in a namespace as the editor e2e-dev.
func asEditor(t *testing.T, manifest, namespace string) {
	t.Helper()
	// The aggregation controller adds Trellis' rules to edit shortly after
	// the roles exist; a few tries cover that.
	var err error
	for range 30 {
		if _, err = kubectlIn([]byte(manifest), "apply", "--server-side", "-n", namespace, "--as", "e2e-dev", "-f", "-"); err == nil {
			return
		}
		time.Sleep(time.Second)
	}
	t.Fatal(err)
}

// expectNowhere checks a secret value is in no manager log, Event or status.
func expectNowhere(t *testing.T, secret string) {
	t.Helper()
	if len(secret) < 20 {
		t.Fatalf("secret %q too short to grep for", secret)
	}
	var logs []byte
	for _, l := range managerLogs {
		b, _ := os.ReadFile(l)
		logs = append(logs, b...)
	}
	events, _ := kubectl("get", "events", "-A", "-o", "yaml")
	objects, _ := kubectl("get", "storagebuckets,bucketaccesses,objectstores", "-A", "-o", "yaml")
	for name, text := range map[string]string{"manager log": string(logs), "Events": events, "object status": objects} {
		if strings.Contains(text, secret) {
			t.Errorf("a workload's secret key appears in the %s", name)
		}
	}
}
