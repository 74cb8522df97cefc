//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// The deployed manager with the bucket-event receiver on (`make deploy
// BUCKET_EVENTS=1`): its Service selects the pod labelled as the leader's.

const (
	eventsService = "trellis-bucket-events"
	leaderLabel   = "trellis.dev/leader"
)

// TestBucketEventsReachTheDeployedLeader runs a versitygw of its own whose
// webhook is the receiver's Service, exposed on the real node by a NodePort
// Service with the same selector. A bucket checked once an hour is checked
// again, by the leader pod, when an object is written to it. Then the leader
// pod is deleted: the pod that takes the lease takes the label, the other
// (the replacement, or the replica that lost the race) is neither labelled
// nor an endpoint, and the next write is checked by the new leader.
func TestBucketEventsReachTheDeployedLeader(t *testing.T) {
	useDeployedManager(t)
	deployBucketEvents(t)
	leader := labelledLeader(t, "")
	t.Logf("leader %s labelled, the only endpoint of %s", leader, eventsService)

	// The receiver's Service as the host reaches it: the node's address and a
	// NodePort of a Service with the shipped selector.
	selector, err := kubectl("-n", managerNS, "get", "service", eventsService, "-o", "jsonpath={.spec.selector}")
	if err != nil {
		t.Fatal(err)
	}
	nodePortSvc := fmt.Sprintf(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"e2e-bucket-events-nodeport","namespace":%q},
"spec":{"type":"NodePort","selector":%s,"ports":[{"port":80,"targetPort":"bucket-events"}]}}`, managerNS, selector)
	if _, err := kubectlIn([]byte(nodePortSvc), "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = kubectl("-n", managerNS, "delete", "service", "e2e-bucket-events-nodeport") })
	nodePort, err := kubectl("-n", managerNS, "get", "service", "e2e-bucket-events-nodeport", "-o", "jsonpath={.spec.ports[0].nodePort}")
	if err != nil {
		t.Fatal(err)
	}
	nodeNet, err := clusterSh("node-net", cluster)
	if err != nil {
		t.Fatal(err)
	}
	receiver := fmt.Sprintf("http://%s:%s/bucket-events", strings.Fields(nodeNet)[1], strings.TrimSpace(nodePort))
	// The leader answers through it: without a token, 401.
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Post(receiver, "application/json", strings.NewReader(`{"Records":[]}`))
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized {
				break
			}
			err = fmt.Errorf("%s", resp.Status)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the receiver does not answer at %s: %v", receiver, err)
		}
		time.Sleep(500 * time.Millisecond)
	}

	// A store of this test's own, its webhook the receiver's Service.
	store := cluster + "-events"
	addr := fmt.Sprintf("%s:%d", hostIP, freePort())
	if _, err := clusterSh("s3-up", store, addr, receiver+"?token="+eventsToken); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = clusterSh("s3-down", store) })
	access, secret := storeRoot(t, store)
	if _, err := kubectl("-n", managerNS, "create", "secret", "generic", "e2e-events-s3-credentials",
		"--from-literal=accessKeyID="+access, "--from-literal=secretAccessKey="+secret); err != nil {
		t.Fatal(err)
	}
	manifest := fmt.Sprintf(`apiVersion: storage.trellis.dev/v1
kind: ObjectStore
metadata: {name: e2e-events}
spec:
  type: Versitygw
  endpoint: http://%s
  region: us-east-1
  pathStyle: true
  credentialsSecretRef: {namespace: %s, name: e2e-events-s3-credentials}
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: default}}
---
apiVersion: storage.trellis.dev/v1
kind: StorageBucket
metadata: {name: hooked, namespace: default}
spec:
  storeRef: {name: e2e-events}
  deletionPolicy: Retain
  healthCheck: {intervalSeconds: 3600}
`, addr, managerNS)
	if _, err := kubectlIn([]byte(manifest), "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = kubectl("-n", "default", "delete", "storagebucket", "hooked", "--timeout=60s")
		_, _ = kubectl("delete", "objectstore", "e2e-events", "--timeout=60s")
		_, _ = kubectl("-n", managerNS, "delete", "secret", "e2e-events-s3-credentials")
	})
	if _, err := kubectl("wait", "--for=condition=Ready", "storagebucket/hooked", "-n", "default", "--timeout=120s"); err != nil {
		t.Fatalf("%v\n%s", err, describeManagerPods())
	}
	bucket, err := kubectl("-n", "default", "get", "storagebucket", "hooked", "-o", "jsonpath={.status.bucketName}")
	if err != nil {
		t.Fatal(err)
	}
	s3c, err := minio.New(addr, &minio.Options{Creds: credentials.NewStaticV4(access, secret, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	scraper := metricsScraper(t)

	// writeIsChecked writes an object and waits for pod's count of the
	// bucket's checks to grow: the next periodic check is half an hour away.
	writeIsChecked := func(pod, object string) {
		t.Helper()
		port := portForward(t, managerNS, "pod/"+pod, 8443)
		checks := func() float64 { return bucketChecks(t, scraper, port, "default", "hooked") }
		// Settled: no check under way from the bucket's creation or an earlier write.
		before := checks()
		for settled := time.Now(); time.Since(settled) < 3*time.Second; time.Sleep(500 * time.Millisecond) {
			if n := checks(); n != before {
				before, settled = n, time.Now()
			}
		}
		written := time.Now()
		if _, err := s3c.PutObject(context.Background(), strings.TrimSpace(bucket), object, bytes.NewReader([]byte("hello")), 5,
			minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		for checks() <= before {
			if time.Since(written) > 30*time.Second {
				t.Fatalf("no check of the bucket by %s within 30s of writing %s (checks: %v)", pod, object, before)
			}
			time.Sleep(300 * time.Millisecond)
		}
		t.Logf("%s checked the bucket %.2fs after the write of %s", pod, time.Since(written).Seconds(), object)
	}
	writeIsChecked(leader, "first.txt")

	// Hand-over: delete the leader pod.
	before := map[string]bool{}
	for _, p := range managerPods() {
		before[p] = true
	}
	saveDeployedManagerLogs()
	if _, err := kubectl("-n", managerNS, "delete", "pod", leader, "--wait=false"); err != nil {
		t.Fatal(err)
	}
	next := labelledLeader(t, leader)
	if _, err := kubectl("-n", managerNS, "rollout", "status", "deployment/"+deployment, "--timeout=180s"); err != nil {
		t.Fatalf("the Deployment did not recover: %v\n%s", err, describeManagerPods())
	}
	// With the replacement Ready, the pod that does not lead is still neither
	// labelled nor an endpoint. Which replica leads is a race: the deleted
	// pod releases the lease as it stops, and the other replica (retrying
	// every 2s) or the replacement (starting) takes it.
	if again := labelledLeader(t, leader); again != next {
		t.Fatalf("the lease moved again, from %s to %s", next, again)
	}
	who := "the other replica"
	if !before[next] {
		who = "the replacement pod"
	}
	t.Logf("after deleting %s: %s, %s, leads and alone is labelled and an endpoint", leader, who, next)
	writeIsChecked(next, "second.txt")
}

// deployBucketEvents applies `make deploy BUCKET_EVENTS=1` over the deployed
// manager and waits for the rollout. The test's end puts back `make deploy`
// as it was, the receiver off, as the tests after it expect (a chart taking
// the manager over must find the Deployment it renders).
func deployBucketEvents(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		if _, err := kubectl("-n", managerNS, "delete", "service", eventsService, "--ignore-not-found"); err != nil {
			t.Error(err)
		}
		deployed = false
		useDeployedManager(t)
	})
	cmd := exec.Command("make", "--no-print-directory", "-C", root, "deploy", "IMG="+deployedImage, "BUCKET_EVENTS=1")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make deploy BUCKET_EVENTS=1: %v\n%s", err, out)
	}
	saveDeployedManagerLogs()
	if _, err := kubectl("-n", managerNS, "rollout", "status", "deployment/"+deployment, "--timeout=180s"); err != nil {
		t.Fatalf("the deployed manager did not become Available: %v\n%s", err, describeManagerPods())
	}
}

// labelledLeader waits until the lease is held by a pod other than not,
// that pod alone carries the leader label, and its address alone is an
// endpoint of the receiver's Service; it returns the pod's name.
func labelledLeader(t *testing.T, not string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var state string
	for time.Now().Before(deadline) {
		holder, _, _ := strings.Cut(leaseHolder(), "_")
		labelled, _ := kubectl("-n", managerNS, "get", "pods", "-l", leaderLabel+"=true", "-o", "jsonpath={.items[*].metadata.name}")
		ip, _ := kubectl("-n", managerNS, "get", "pod", holder, "-o", "jsonpath={.status.podIP}")
		endpoints, _ := kubectl("-n", managerNS, "get", "endpointslices", "-l", "kubernetes.io/service-name="+eventsService,
			"-o", `jsonpath={range .items[*].endpoints[?(@.conditions.ready==true)]}{.addresses[0]} {end}`)
		state = fmt.Sprintf("lease %q, labelled %q, pod IP %q, endpoints %q", holder, labelled, ip, endpoints)
		if holder != "" && holder != not && strings.TrimSpace(labelled) == holder && ip != "" && strings.TrimSpace(endpoints) == ip {
			return holder
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("no labelled leader as the only endpoint within 60s: %s\n%s", state, describeManagerPods())
	return ""
}

// storeRoot reads the root keys hack/cluster.sh generated for the S3 server NAME.
func storeRoot(t *testing.T, name string) (access, secret string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, ".dev", name+"-s3", "credentials"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			switch k {
			case "AWS_ACCESS_KEY_ID":
				access = v
			case "AWS_SECRET_ACCESS_KEY":
				secret = v
			}
		}
	}
	return access, secret
}

// metricsScraper returns the token of a ServiceAccount bound to
// trellis-metrics-reader.
func metricsScraper(t *testing.T) string {
	t.Helper()
	for _, create := range [][]string{
		{"-n", "default", "create", "serviceaccount", "e2e-events-scraper"},
		{"create", "clusterrolebinding", "e2e-events-scraper-metrics", "--clusterrole=trellis-metrics-reader", "--serviceaccount=default:e2e-events-scraper"},
	} {
		manifest, err := kubectl(append(create, "--dry-run=client", "-o", "yaml")...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kubectlIn([]byte(manifest), "apply", "--server-side", "-f", "-"); err != nil {
			t.Fatal(err)
		}
	}
	out, err := kubectl("-n", "default", "create", "token", "e2e-events-scraper", "--duration=30m")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// bucketChecks sums trellis_storagebucket_checks_total of one StorageBucket
// on the metrics endpoint forwarded to localhost:port (one pod's own).
func bucketChecks(t *testing.T, token string, port int, ns, name string) float64 {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // the manager's self-signed serving certificate
	}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return sumSeries(string(body), "trellis_storagebucket_checks_total", fmt.Sprintf(`name=%q`, name), fmt.Sprintf(`namespace=%q`, ns))
			}
			err = fmt.Errorf("%s", resp.Status) // the binding may not have reached the authorizer yet
		}
		if time.Now().After(deadline) {
			t.Fatalf("scraping the metrics: %v", err)
		}
		time.Sleep(time.Second)
	}
}

// sumSeries adds the values of metric's series whose labels contain every one of want.
func sumSeries(exposition, metric string, want ...string) float64 {
	total := 0.0
	s := bufio.NewScanner(strings.NewReader(exposition))
	for s.Scan() {
		line := s.Text()
		if !strings.HasPrefix(line, metric+"{") {
			continue
		}
		labels, value, ok := strings.Cut(strings.TrimPrefix(line, metric), " ")
		if !ok {
			continue
		}
		match := true
		for _, w := range want {
			match = match && strings.Contains(labels, w)
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil && match {
			total += v
		}
	}
	return total
}
