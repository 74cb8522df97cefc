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

	corev1 "k8s.io/api/core/v1"

	"github.com/trellis-dev/trellis/internal/s3"
)

// s3Root is the root account of the suite's versitygw, as hack/cluster.sh generated it.
func s3Root(t *testing.T) s3.Config {
	t.Helper()
	cfg := s3.Config{Endpoint: s3Endpoint(), Region: "us-east-1", PathStyle: true}
	cfg.AccessKey, cfg.SecretKey = storeRoot(t, cluster)
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

// buildWorkload builds test/e2e/s3client as a static linux/amd64 binary (it
// runs on this host too) and, as `make images` builds the manager's, an image
// of it, imported into the real node. It returns the binary and the image.
func buildWorkload(t *testing.T) (string, string) {
	t.Helper()
	const image = "trellis-e2e-s3client:dev"
	dir := t.TempDir()
	binary, archive := filepath.Join(dir, "s3client"), filepath.Join(dir, "s3client.tar")
	build := exec.Command("go", "build", "-trimpath", "-o", binary, "./test/e2e/s3client")
	build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the workload: %v\n%s", err, out)
	}
	img := exec.Command("go", "run", ".", "image", "-binary", "linux/amd64="+binary, "-entrypoint", "/s3client", "-ref", image, "-out", archive)
	img.Dir = filepath.Join(root, "hack", "images")
	if out, err := img.CombinedOutput(); err != nil {
		t.Fatalf("building the workload's image: %v\n%s", err, out)
	}
	if out, err := clusterSh("node-import", cluster, archive); err != nil {
		t.Fatal(err, out)
	}
	return binary, image
}

// runPod runs the workload image as a pod of the editor e2e-dev that takes
// the Secret app-s3 with envFrom (bucket, when set, overrides BUCKET_NAME),
// waits for it to end, and returns its phase and log.
func runPod(t *testing.T, ns, name, image, bucket string) (string, string) {
	t.Helper()
	env := ""
	if bucket != "" {
		env = fmt.Sprintf("\n    env: [{name: BUCKET_NAME, value: %s}]", bucket)
	}
	pod := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  restartPolicy: Never
  containers:
  - name: s3client
    image: %s
    imagePullPolicy: Never
    envFrom: [{secretRef: {name: app-s3}}]%s
    securityContext: {runAsNonRoot: true, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
`, name, image, env)
	asEditor(t, pod, ns)
	var phase string
	deadline := time.Now().Add(3 * time.Minute)
	for phase != string(corev1.PodSucceeded) && phase != string(corev1.PodFailed) {
		if time.Now().After(deadline) {
			out, _ := kubectl("describe", "pod", name, "-n", ns)
			t.Fatalf("pod %s did not end (phase %q):\n%s", name, phase, tail(out, 30))
		}
		time.Sleep(time.Second)
		phase, _ = kubectl("get", "pod", name, "-n", ns, "-o", "jsonpath={.status.phase}")
	}
	if node, _ := kubectl("get", "pod", name, "-n", ns, "-o", "jsonpath={.spec.nodeName}"); node != "real-node" {
		t.Fatalf("pod %s ran on %q, want real-node", name, node)
	}
	logs, err := kubectl("logs", name, "-n", ns)
	if err != nil {
		t.Fatal(err)
	}
	return phase, logs
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

// TestBucketAccessWorkload is the whole story on a real cluster, with the
// manager deployed as the README installs it: the platform team opens a
// store to a team's namespace; an editor of that namespace (the built-in
// edit role, with Trellis' rules aggregated into it) asks for buckets and a
// read-write key; a pod on the real node takes the Secret with envFrom and
// writes, reads back and deletes an object with minio-go; a pod of the same
// namespace aimed at another bucket is refused. Another namespace cannot use
// the store. Deleting the namespace revokes the key before the buckets go,
// and leaves no account behind.
func TestBucketAccessWorkload(t *testing.T) {
	useDeployedManager(t)
	workload, image := buildWorkload(t)
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

	// "e2e-access" has a '-': its buckets' derived names are hashed.
	data, other := s3.DeriveBucketName(ns, "data"), s3.DeriveBucketName(ns, "other")
	env := workloadEnv(t, ns, "app-s3")
	if got := envValue(env, "BUCKET_NAME"); got != data {
		t.Fatalf("BUCKET_NAME = %q", got)
	}
	start := time.Now()
	phase, logs := runPod(t, ns, "writer", image, "")
	if phase != string(corev1.PodSucceeded) || !strings.Contains(logs, "wrote, read back and deleted "+data+"/") {
		t.Fatalf("the pod could not use its key: %s\n%s", phase, logs)
	}
	t.Logf("pod on the real node: %s (%.1fs from creation to its end)", strings.TrimSpace(logs), time.Since(start).Seconds())
	if phase, logs := runPod(t, ns, "intruder", image, other); phase != "Failed" || !strings.Contains(logs, "status 403") {
		t.Fatalf("the key reached another bucket of the same namespace: %s\n%s", phase, logs)
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
	// in it at once): the key is revoked first, then the bucket goes. The
	// pods go with it; the same program, as a process on the host, tries the
	// old key afterwards.
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
	for _, b := range []string{data, other} {
		if exists, err := c.BucketExists(context.Background(), b); err != nil || exists {
			t.Errorf("bucket %s (deletionPolicy Delete) still exists: %v", b, err)
		}
	}

	// The secret key never reached the manager's log, Events or any status.
	saveDeployedManagerLogs()
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
  endpoint: %s
  pathStyle: true
  credentialsSecretRef: {namespace: trellis-system, name: local-s3-credentials}
  namespaceSelector: {matchLabels: {e2e-s3: open}}
`, s3Endpoint())
	if _, err := kubectlIn([]byte(store), "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	// The open namespace's pods run on the real node (steer creates it).
	if out, err := clusterSh("steer", cluster, open); err != nil {
		t.Fatal(err, out)
	}
	for _, n := range others {
		if _, err := kubectl("create", "namespace", n); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range append([]string{open}, others...) {
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
