//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

// Upgrades from the release before this tree (N-1) to this tree (HEAD), and
// back, by install.yaml and by the Helm chart; and the migration from what
// users had before the first release (`make deploy` of the baseline commit)
// to the chart. RELEASES names both commits; the test builds each from a git
// worktree of its commit (cached under bin/upgrade/COMMIT), installs it as
// its users did, creates the samples (one of each kind), changes to HEAD,
// then back (upgradeAndBackTo). Each side is an installation: one version
// installed one way.

// installation is one way of installing one version of Trellis.
type installation struct {
	name string
	// apply installs it, over whatever Trellis is installed.
	apply func(t *testing.T)
	// managerImage and viewerImage are the images its manager Deployment
	// and --viewer-image name.
	managerImage, viewerImage string
	// marksKeys: its manager puts the ObjectStore's mark in the access key
	// ids it issues (internal/controller/storage/stores/marks.go; since issue 23).
	marksKeys bool
	// viewersByUID: its viewer Deployments and Services select the pods by
	// the view's UID (since issue 34), not by its name. A Deployment's
	// selector cannot change, so a change across it replaces them.
	viewersByUID bool
	// recordsNamespaceUIDs: its per-tenant ClusterRole records the UIDs of
	// the tenant's namespaces (since issue 34), which a change across it
	// writes once.
	recordsNamespaceUIDs bool
	// policies are the admission policies and bindings it installs, "Kind/name".
	policies []string
	// clusterScoped are the cluster-scoped objects it installs (CRDs, RBAC,
	// admission policies), "Kind/name".
	clusterScoped []string
	// dist is the release's directory (install.yaml, images, the chart).
	dist string
	// importImages puts its images on the real node; applyOver installs it
	// over objects another field manager (Helm) owns, taking their fields.
	importImages, applyOver func(t *testing.T)
	// handBack, when set, readies the cluster for `make deploy` after the
	// test went back to this installation.
	handBack func(t *testing.T)
	// samplesFrom is the commit whose config/samples its users applied
	// ("": this tree's): an older version's CRDs refuse fields added since.
	samplesFrom string
}

// TestUpgradeFromPreviousRelease installs N-1 by kubectl apply of its
// install.yaml, upgrades it to HEAD's release install.yaml, and downgrades
// it back.
func TestUpgradeFromPreviousRelease(t *testing.T) {
	old := buildPrevious(t, previousRelease(t))
	upgradeAndBack(t, old, buildHeadRelease(t))
}

// TestUpgradeFromPreviousReleaseByHelm installs N-1's chart, upgrades it to
// HEAD's chart with `helm upgrade`, and goes back with `helm rollback`: the
// commands a Helm user runs.
func TestUpgradeFromPreviousReleaseByHelm(t *testing.T) {
	old := byHelm(t, buildPrevious(t, previousRelease(t)))
	head := byHelm(t, buildHeadRelease(t))
	// A cluster that ran N-1's chart holds none of the cluster-scoped
	// objects new since (admission policies, CRDs, roles): the `make deploy`
	// of this tree the tests before left installed them, and Helm would
	// refuse to upgrade over objects it does not own.
	installOld := old.apply
	old.apply = func(t *testing.T) {
		t.Helper()
		for _, p := range head.clusterScoped {
			if !slices.Contains(old.clusterScoped, p) {
				kind, name, _ := strings.Cut(p, "/")
				if _, err := kubectl("delete", strings.ToLower(kind), name, "--ignore-not-found"); err != nil {
					t.Fatal(err)
				}
			}
		}
		installOld(t)
	}
	old.applyOver = old.apply
	head.apply = func(t *testing.T) {
		t.Helper()
		head.importImages(t)
		helm(t, "upgrade", helmRelease, head.chart(t), "-n", managerNS, "--wait", "--timeout=3m")
	}
	back := old
	back.apply = func(t *testing.T) {
		t.Helper()
		helm(t, "rollback", helmRelease, "-n", managerNS, "--wait", "--timeout=3m")
	}
	// The test after it expects `make deploy`: uninstall the chart (CRDs,
	// namespaces and buckets stay) and apply config/default.
	back.handBack = handBackToMakeDeploy
	upgradeAndBackTo(t, old, head, back)
}

// TestMigrateFromMakeDeployToHelm installs what users had before the first
// release, `make deploy` of the baseline commit RELEASES names, has HEAD's
// chart take it over (`helm upgrade --install --take-ownership`, the
// migration docs/operations.md gives), and goes back to the baseline the
// documented way: its manifests applied taking Helm's fields, then Helm's
// record of the release deleted.
func TestMigrateFromMakeDeployToHelm(t *testing.T) {
	old := buildPrevious(t, makeDeployBaseline(t))
	head := byHelm(t, buildHeadRelease(t))
	back := old
	back.apply = func(t *testing.T) {
		t.Helper()
		old.applyOver(t)
		if _, err := kubectl("-n", managerNS, "delete", "secret", "-l", "owner=helm,name="+helmRelease); err != nil {
			t.Fatal(err)
		}
	}
	// Helm still owns the fields the baseline does not set (the pod's
	// POD_NAME, the leader Role's labels): `make deploy` takes them back by
	// force once, as docs/operations.md tells users to.
	back.handBack = handBackToMakeDeploy
	upgradeAndBackTo(t, old, head, back)
}

// byHelm is inst installed by its release's chart, taking over whatever
// installed Trellis before (`helm upgrade --install --take-ownership
// --force-conflicts`).
func byHelm(t *testing.T, inst installation) installation {
	t.Helper()
	chart := inst.chart(t)
	h := inst
	h.name = strings.Replace(inst.name, "install.yaml", "Helm chart", 1)
	if h.name == inst.name {
		h.name += " by its Helm chart"
	}
	h.apply = func(t *testing.T) {
		t.Helper()
		inst.importImages(t)
		helm(t, "upgrade", "--install", helmRelease, chart, "-n", managerNS, "--take-ownership", "--force-conflicts", "--wait", "--timeout=3m")
	}
	h.applyOver = h.apply
	return h
}

// chart is the packaged chart of inst's release.
func (inst installation) chart(t *testing.T) string {
	t.Helper()
	charts, err := filepath.Glob(filepath.Join(inst.dist, "trellis-*.tgz"))
	if err != nil || len(charts) != 1 {
		t.Fatalf("%s's release has charts %v (%v), want one", inst.name, charts, err)
	}
	return charts[0]
}

// upgradeAndBack installs old, applies the samples, changes to head and
// back to old, checking each change with upgradeCheck. It leaves the
// manager deployed as useDeployedManager does, for the tests after it.
func upgradeAndBack(t *testing.T, old, head installation) {
	t.Helper()
	upgradeAndBackTo(t, old, head, old)
}

// upgradeAndBackTo is upgradeAndBack, going back to old by back.
func upgradeAndBackTo(t *testing.T, old, head, back installation) {
	t.Helper()
	if err := stopLocalManager(); err != nil {
		t.Fatal(err)
	}
	patched := false
	t.Cleanup(func() {
		// Back to `make deploy` of this tree, what the other tests expect,
		// once the key replaced by the last change is revoked (a change of
		// version waits for that), and the sample's grace period as it was.
		if patched {
			if err := keysRetired(); err != nil {
				t.Error(err)
			}
		}
		if back.handBack != nil {
			back.handBack(t)
		}
		deployed = false
		useDeployedManager(t)
		if patched {
			// This tree's manager replaces an N-1 key in its own time: the
			// short grace period stays until it has, and the old key is gone,
			// or the next test would wait an hour for it.
			if err := headKeyRetiredAlone(); err != nil {
				t.Error(err)
			}
			if _, err := kubectl("patch", "bucketaccess", "assets-writer", "-n", "default", "--type=json",
				"-p", `[{"op":"remove","path":"/spec/rotationGracePeriodSeconds"}]`); err != nil {
				t.Error(err)
			}
		}
	})

	// A grace period the test can wait out (the default is an hour).
	shortGrace := func() {
		t.Helper()
		if _, err := kubectl("patch", "bucketaccess", "assets-writer", "-n", "default", "--type=merge",
			"-p", fmt.Sprintf(`{"spec":{"rotationGracePeriodSeconds":%d}}`, int(testGrace.Seconds()))); err != nil {
			t.Fatal(err)
		}
		patched = true
	}
	if _, err := kubectl("get", "bucketaccess", "assets-writer", "-n", "default"); err == nil {
		shortGrace() // before old replaces a key another test's manager issued
	}
	// Over whatever the tests before left: objects another test's Helm
	// release held share fields with Helm, which only a forced apply takes.
	old.applyOver(t)
	waitManagerRunning(t, old)
	if !old.viewersByUID {
		// The tests before ran this tree's manager: going back to old is
		// a downgrade across the viewer selector.
		deleteViewerDeployments(t)
	}
	applySamplesOf(t, old.samplesFrom)
	shortGrace()
	t.Logf("%s installed, the samples applied", old.name)

	upgradeCheck(t, old, head)
	upgradeCheck(t, head, back) // the downgrade
}

// testGrace is the sample BucketAccess's rotation grace period in this test.
const testGrace = 45 * time.Second

// upgradeCheck changes the installed version from `from` to `to` (an
// upgrade or a downgrade) and checks what a user must be able to count on:
//   - every sample object stays Ready through the change (polled every
//     second), but a view whose viewer image changes, RollingOut while its
//     Deployment rolls, with a pod available throughout; and every status
//     observes its object's generation after the change;
//   - no child of any Trellis object is written by Trellis (resourceVersion
//     and Trellis' managedFields unchanged), but for what differs between
//     the two versions: the viewer Deployments' image, when the viewer
//     image changes; BucketAccesses' keys and Secrets, when the form of
//     the key ids changes (before issue 23 they carry no store mark);
//   - no namespace, bucket or key is lost: the namespaces keep their UIDs,
//     the bucket its objects, every account in the store stays but the
//     keys BucketAccesses retire, and a replaced key works through its
//     grace period, then is revoked;
//   - the admission policies and bindings both versions install are never
//     absent: a watch from before the change to after it sees none deleted,
//     and their UIDs stay; those new in the version changed to are there
//     after it.
//
// A change of the key ids' form is safe only once the keys replaced by the
// change before are revoked (docs/operations.md, "Downgrade"): it waits for
// that first, as the documentation tells users to.
func upgradeCheck(t *testing.T, from, to installation) {
	t.Helper()
	t.Logf("from %s to %s", from.name, to.name)
	waitSamplesReady(t)
	waitKeysRetired(t)
	before := settledChildren(t)
	key := accessKey(t)
	bucket := jsonpath(t, "jsonpath={.status.bucketName}", "storagebucket", "assets", "-n", "default")
	object := fmt.Sprintf("upgrade/%d.txt", time.Now().UnixNano())
	if err := key.write(bucket, object); err != nil {
		t.Fatalf("the BucketAccess key before the change: %v", err)
	}
	accounts := accountsOf(t, "TRELLIS")
	keysBefore := accessKeys(t)

	// The policies both versions install must never be absent; one only
	// the new version has must be there after (one only the old has may go:
	// Helm deletes it, kubectl apply leaves it).
	var kept, added []string
	for _, p := range to.policies {
		if slices.Contains(from.policies, p) {
			kept = append(kept, p)
		} else {
			added = append(added, p)
		}
	}
	policies := watchPolicies(t, kept)
	notReady := watchReady(t)
	to.apply(t)
	waitManagerRunning(t, to)
	replaces := from.viewersByUID != to.viewersByUID
	if replaces && !to.viewersByUID {
		deleteViewerDeployments(t)
	}

	// What the two versions differ in, first.
	rotates := from.marksKeys != to.marksKeys
	if rotates {
		waitOutput(t, 120*time.Second, key.id, "get", "bucketaccess", "assets-writer", "-n", "default", "-o",
			"jsonpath={.status.retiringKeys[*].accessKeyID}")
		// Within its grace period, the replaced key works still.
		if err := key.read(bucket, object); err != nil {
			t.Errorf("the key of before the change (%s), in its grace period, does not work: %v", key.id, err)
		}
		revokeAt := jsonpath(t, fmt.Sprintf("jsonpath={.status.retiringKeys[?(@.accessKeyID==%q)].revokeAt}", key.id),
			"bucketaccess", "assets-writer", "-n", "default")
		if at, err := time.Parse(time.RFC3339, revokeAt); err != nil || time.Until(at) > testGrace || time.Until(at) < 0 {
			t.Errorf("the replaced key is revoked at %q, want within %s from now", revokeAt, testGrace)
		}
	}
	if from.viewerImage != to.viewerImage {
		waitOutput(t, 120*time.Second, to.viewerImage, "get", "deployment", "-n", "default", "-l", instanceLabel("markdownview-sample"),
			"-o", "jsonpath={.items[*].spec.template.spec.containers[*].image}")
	}
	waitSamplesReady(t)
	after := settledChildren(t)
	policies.check(t)
	for _, p := range added {
		kind, name, _ := strings.Cut(p, "/")
		if _, err := kubectl("get", strings.ToLower(kind), name); err != nil {
			t.Errorf("%s, new in %s, is not installed: %v", p, to.name, err)
		}
	}
	checkSeenDuringChange(t, notReady(), from, to)

	rewritten := compareChildren(t, before, after, changes{
		viewerImage:    from.viewerImage != to.viewerImage,
		keys:           rotates,
		viewerSelector: replaces,
		namespaceUIDs:  from.recordsNamespaceUIDs != to.recordsNamespaceUIDs,
	})
	t.Logf("children written by the change: %v (of %d)", keys(rewritten), len(before))

	// No bucket or key lost: the object written before reads back with the
	// Secret's key, and every account of before is still in the store.
	now := accessKey(t)
	if err := now.read(bucket, object); err != nil {
		t.Errorf("the Secret's key after the change: %v", err)
	}
	if !rotates && now.id != key.id {
		t.Errorf("the key was replaced (%s, then %s) though both versions issue the same ids", key.id, now.id)
	}
	storeUID := jsonpath(t, "jsonpath={.metadata.uid}", "objectstore", "local-s3")
	if marked := strings.HasPrefix(now.id, "TRELLIS"+storeMark(storeUID)); marked != to.marksKeys {
		t.Errorf("%s issued key id %s: the store's mark in it is %v, want %v", to.name, now.id, marked, to.marksKeys)
	}
	// Gone may be only what a BucketAccess retired: a key already retiring,
	// or (when the form of key ids changes) the key the change replaced,
	// once its grace period ends; that of other tests' accesses too.
	mayGo := map[string]bool{}
	keysAfter := accessKeys(t)
	for access, k := range keysBefore {
		for _, id := range k.retiring {
			mayGo[id] = true
		}
		if rotates && keysAfter[access].current != k.current {
			mayGo[k.current] = true
		}
	}
	left := accountsOf(t, "TRELLIS")
	for _, id := range accounts {
		if !slices.Contains(left, id) && !mayGo[id] {
			t.Errorf("the store's account %s is gone", id)
		}
	}
	if rotates {
		// Then the grace period ends, and the new version revokes the key.
		waitKeysRetired(t)
		if err := key.read(bucket, object); err == nil {
			t.Errorf("the replaced key %s still works after its grace period", key.id)
		}
		if err := accessKey(t).read(bucket, object); err != nil {
			t.Errorf("the Secret's key after the replaced one was revoked: %v", err)
		}
	}
}

// checkSeenDuringChange fails t for what was seen during a change other
// than Ready=True with a pod available, but for what the change explains.
// A view whose viewer image changes rolls its Deployment: RollingOut, not
// Ready, until the new pod is available; the old one serves till then.
// Across the change of selector the Deployment is replaced once: no pod is
// available from its deletion until the new one is ready
// (docs/operations.md), and going back it is first Stalled until the user
// deletes it.
func checkSeenDuringChange(t *testing.T, seen []string, from, to installation) {
	t.Helper()
	replaces := from.viewersByUID != to.viewersByUID
	rollout := "MarkdownView/markdownview-sample Ready=False RollingOut"
	replaced := map[string]bool{
		"Deployment/viewer-markdownview-sample available=":           true,
		viewerDeploymentAbsent:                                       true,
		"MarkdownView/markdownview-sample Ready=False ChildRejected": !to.viewersByUID,
	}
	for _, line := range seen {
		if line == rollout && (from.viewerImage != to.viewerImage || replaces) {
			t.Logf("during the change, as the view's Deployment rolled: %s", line)
			continue
		}
		if replaces && replaced[line] {
			t.Logf("during the change, as the view's Deployment was replaced: %s", line)
			continue
		}
		t.Errorf("during the change: %s", line)
	}
}

// deleteViewerDeployments is what docs/operations.md ("Downgrade") tells a
// user going back to a version that selects viewer pods by the view's name:
// the older manager cannot change the selector of a viewer Deployment this
// one made, so the user deletes them, and it makes them again.
func deleteViewerDeployments(t *testing.T) {
	t.Helper()
	if _, err := kubectl("delete", "deployments", "-A", "-l",
		"app.kubernetes.io/name=markdown-viewer,app.kubernetes.io/managed-by=trellis"); err != nil {
		t.Fatal(err)
	}
}

// viewerDeploymentAbsent is what watchReady records when the sample view
// has no viewer Deployment.
const viewerDeploymentAbsent = "Deployment/viewer-markdownview-sample absent"

// watchReady polls the samples' Ready condition, and how many pods the
// sample view's Deployment has available, every second until the function
// it returns is called, which returns what it saw other than Ready=True
// and at least one pod available.
func watchReady(t *testing.T) func() []string {
	t.Helper()
	stop, done := make(chan struct{}), make(chan []string)
	ready := append(append([]string{"get"}, sampleObjects...), "-n", "default", "-o",
		`jsonpath={range .items[*]}{.kind}/{.metadata.name} Ready={.status.conditions[?(@.type=="Ready")].status} `+
			`{.status.conditions[?(@.type=="Ready")].reason}{"\n"}{end}`)
	available := []string{"get", "deployment", "-n", "default", "-l", instanceLabel("markdownview-sample"), "-o",
		`jsonpath={range .items[*]}{.kind}/{.metadata.name} available={.status.availableReplicas}{"\n"}{end}`}
	// What an answer of no objects at all is recorded as: the Deployment is
	// absent for a moment while a change replaces it.
	absent := map[string]string{ready[1]: "no samples", available[1]: viewerDeploymentAbsent}
	go func() {
		var seen []string
		for {
			for _, args := range [][]string{ready, available} {
				out, err := kubectl(args...)
				if err == nil && strings.TrimSpace(out) == "" {
					out = absent[args[1]]
				}
				for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
					ok := strings.Contains(line, " Ready=True ") || strings.Contains(line, " available=") && !strings.HasSuffix(line, "available=")
					if err == nil && !ok && !slices.Contains(seen, line) {
						seen = append(seen, line)
					}
				}
			}
			select {
			case <-stop:
				done <- seen
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return func() []string { close(stop); return <-done }
}

// compareChildren checks that what Trellis wrote between before and after
// is only what the change allows: the viewer Deployments' image when the
// viewer image changes, the viewer Deployments and Services when the
// selector of their pods changes, the per-tenant ClusterRoles when the
// record of namespace UIDs comes or goes, and BucketAccess Secrets when the
// keys change.
// It returns what was written.
// changes are what differ between two versions, which the children show.
type changes struct {
	// viewerImage: the viewer image; viewerSelector: the selector of the
	// viewer pods (the Deployments are replaced); keys: the form of the
	// key ids (the Secrets are rewritten); namespaceUIDs: the per-tenant
	// ClusterRole's record of the tenant's namespaces.
	viewerImage, viewerSelector, keys, namespaceUIDs bool
}

func compareChildren(t *testing.T, before, after map[string]child, c changes) map[string]bool {
	t.Helper()
	accessSecrets := map[string]bool{}
	out, _ := kubectl("get", "bucketaccesses", "-A", "-o", `jsonpath={range .items[*]}Secret/{.metadata.namespace}/{.spec.secretName}{"\n"}{end}`)
	for _, s := range strings.Fields(out) {
		accessSecrets[s] = true
	}
	// viewer is a view's viewer Deployment or Service: a change across the
	// selector of its pods replaces the one and rewrites the other.
	viewer := func(k string) bool {
		kind, rest, _ := strings.Cut(k, "/")
		_, name, _ := strings.Cut(rest, "/")
		return (kind == kindDeployment || kind == "Service") && strings.HasPrefix(name, "viewer-")
	}
	rewritten := map[string]bool{}
	for k, b := range before {
		a, ok := after[k]
		switch {
		case !ok:
			t.Errorf("%s is gone after the change", k)
		case a.uid != b.uid && c.viewerSelector && viewer(k):
			rewritten[k] = true
		case a.uid != b.uid:
			t.Errorf("%s was re-created", k)
		case a.written(b):
			rewritten[k] = true
		}
	}
	for k := range rewritten {
		kind, _, _ := strings.Cut(k, "/")
		switch {
		case c.viewerSelector && viewer(k):
		case c.namespaceUIDs && strings.HasPrefix(k, "ClusterRole//trellis:tenant:"):
		case kind == kindDeployment && c.viewerImage:
			if diff := otherThanImages(before[k], after[k]); diff != "" {
				t.Errorf("%s: more than its viewer image changed: %s", k, diff)
			}
		case accessSecrets[k] && c.keys:
		default:
			t.Errorf("%s was written (resourceVersion %s, then %s)", k, before[k].rv, after[k].rv)
		}
	}
	if c.keys != rewritten["Secret/default/assets-s3"] {
		t.Errorf("the form of key ids changes: %v; the sample's Secret was rewritten: %v", c.keys, !c.keys)
	}
	return rewritten
}

// waitKeysRetired waits until the sample BucketAccess has no replaced key
// waiting for its revocation.
func waitKeysRetired(t *testing.T) {
	t.Helper()
	if err := keysRetired(); err != nil {
		t.Fatal(err)
	}
}

// accessKeysOf is a BucketAccess's keys as its status lists them.
type accessKeysOf struct {
	current  string
	retiring []string
}

// accessKeys lists every BucketAccess's keys, by namespace/name.
func accessKeys(t *testing.T) map[string]accessKeysOf {
	t.Helper()
	out, err := kubectl("get", "bucketaccesses", "-A", "-o",
		`jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {.status.accessKeyID} {.status.retiringKeys[*].accessKeyID}{"\n"}{end}`)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]accessKeysOf{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		keys[f[0]] = accessKeysOf{current: f[1], retiring: f[2:]}
	}
	return keys
}

// headKeyRetiredAlone waits until the sample's key carries this tree's
// store mark (its manager replaced any key of N-1) and no key is retiring.
func headKeyRetiredAlone() error {
	deadline := time.Now().Add(90 * time.Second)
	for {
		uid, _ := kubectl("get", "objectstore", "local-s3", "-o", "jsonpath={.metadata.uid}")
		id, _ := kubectl("get", "bucketaccess", "assets-writer", "-n", "default", "-o", "jsonpath={.status.accessKeyID}")
		if strings.HasPrefix(strings.TrimSpace(id), "TRELLIS"+storeMark(strings.TrimSpace(uid))) {
			return keysRetired()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the sample BucketAccess holds key %q, not one of store %s's", id, uid)
		}
		time.Sleep(time.Second)
	}
}

func keysRetired() error {
	deadline := time.Now().Add(testGrace + 90*time.Second)
	for {
		out, err := kubectl("get", "bucketaccess", "assets-writer", "-n", "default", "-o", "jsonpath={.status.retiringKeys}")
		if err == nil && strings.TrimSpace(out) == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the sample BucketAccess still has replaced keys: %s %v", out, err)
		}
		time.Sleep(time.Second)
	}
}

// ---- N-1 and HEAD ----------------------------------------------------------

// release is a version of Trellis as RELEASES names it.
type release struct {
	version string // "" for the baseline
	commit  string
}

// previousRelease is N-1: RELEASES' last "vX.Y.Z COMMIT" line.
func previousRelease(t *testing.T) release {
	t.Helper()
	last, _ := readReleases(t)
	if last.commit == "" {
		t.Fatal("RELEASES names no release")
	}
	return last
}

// makeDeployBaseline is what users installed before the first release:
// `make deploy` of RELEASES' "# baseline COMMIT".
func makeDeployBaseline(t *testing.T) release {
	t.Helper()
	_, baseline := readReleases(t)
	if baseline.commit == "" {
		t.Fatal("RELEASES names no baseline")
	}
	return baseline
}

// readReleases reads RELEASES: its last release, and its baseline.
func readReleases(t *testing.T) (last, baseline release) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "RELEASES"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && f[0] == "#" && f[1] == "baseline":
			baseline = release{commit: f[2]}
		case len(f) == 0 || strings.HasPrefix(f[0], "#"):
		case len(f) == 2 && strings.HasPrefix(f[0], "v"):
			last = release{version: f[0], commit: f[1]}
		default:
			t.Fatalf("RELEASES: %q is not \"vX.Y.Z COMMIT\"", line)
		}
	}
	return last, baseline
}

// buildPrevious builds N-1 from a git worktree of its commit into
// bin/upgrade/COMMIT (once: a later run reuses it): a release with its
// `make release`, the baseline with its `make images`, and the manifests of
// its `make deploy`.
func buildPrevious(t *testing.T, r release) installation {
	t.Helper()
	commit, err := git("rev-parse", "--verify", r.commit+"^{commit}")
	if err != nil {
		t.Fatal(err)
	}
	short := commit[:7]
	name := "N-1 " + r.version + " (" + short + ", install.yaml)"
	if r.version == "" {
		name = "the baseline (" + short + ", make deploy)"
	}
	dir := filepath.Join(bin, "upgrade", commit)
	if _, err := os.Stat(filepath.Join(dir, "install.yaml")); err != nil {
		started := time.Now()
		buildInWorktree(t, r, commit, dir)
		t.Logf("built %s in %.0fs", name, time.Since(started).Seconds())
	}
	inst := installedFrom(t, name, dir)
	inst.samplesFrom = commit
	// Does that commit's manager mark the store in key ids (issue 23)?
	_, err = git("grep", "-q", "func storeMark", commit, "--", "internal/controller/storage")
	inst.marksKeys = err == nil
	_, err = git("grep", "-q", "markdownview-uid", commit, "--", "internal/controller/view")
	inst.viewersByUID = err == nil
	_, err = git("grep", "-q", "namespace-uids", commit, "--", "internal/controller/tenancy")
	inst.recordsNamespaceUIDs = err == nil
	return inst
}

func buildInWorktree(t *testing.T, r release, commit, dir string) {
	t.Helper()
	wt := filepath.Join(t.TempDir(), "trellis-"+commit[:7])
	if out, err := git("worktree", "add", "--detach", wt, commit); err != nil {
		t.Fatal(err, out)
	}
	defer func() {
		if out, err := git("worktree", "remove", "--force", wt); err != nil {
			t.Error(err, out)
		}
	}()
	// Its bin/ has our tools: the same pins unless its Makefile changed
	// them, in which case its make builds the one it misses.
	if err := os.MkdirAll(filepath.Join(wt, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch e.Name() {
		case managerBinary, viewerBinary, "images", "linux-amd64", "upgrade":
			continue // build output, ours
		}
		if err := os.Symlink(filepath.Join(bin, e.Name()), filepath.Join(wt, "bin", e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if r.version != "" {
		// dist/ as the release was published (REGISTRY: the Makefile's default).
		makeIn(t, wt, "release", "VERSION="+r.version, "DIST="+tmp)
	} else {
		// As its users ran `make images` and `make deploy IMG=... VIEWER_IMG=...`.
		img, viewer := "trellis-manager:"+commit[:7], "trellis-viewer:"+commit[:7]
		makeIn(t, wt, "images", "IMG="+img, "VIEWER_IMG="+viewer, "IMAGE_DIR="+tmp)
		if err := os.Remove(filepath.Join(tmp, "trellis-pause.tar")); err != nil {
			t.Fatal(err) // the node has ours
		}
		kustomize := filepath.Join(wt, "bin", "kustomize")
		edit := exec.Command(kustomize, "edit", "set", "image", "controller="+img)
		edit.Dir = filepath.Join(wt, "config", "manager")
		if out, err := edit.CombinedOutput(); err != nil {
			t.Fatalf("kustomize edit: %v\n%s", err, out)
		}
		out, err := exec.Command(kustomize, "build", filepath.Join(wt, "config", "default")).Output()
		if err != nil {
			t.Fatalf("kustomize build: %v %s", err, exitStderr(err))
		}
		out = regexp.MustCompile(`--viewer-image=.*`).ReplaceAll(out, []byte("--viewer-image="+viewer))
		images := fmt.Sprintf("trellis-manager.tar %s\ntrellis-viewer.tar %s\n", img, viewer)
		if err := os.WriteFile(filepath.Join(tmp, "images.txt"), []byte(images), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, "install.yaml"), out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		t.Fatal(err)
	}
}

// headRelease is the directory of this tree's release, built by the first
// test that needs it and shared by the others: the same commit gives the
// same release (make release-check), so building it again tests nothing.
var headRelease struct {
	sync.Mutex
	dist string
}

// buildHeadRelease builds this tree's release (`make release`, any version
// will do) once per run, under bin/: HEAD installed as its users will.
func buildHeadRelease(t *testing.T) installation {
	t.Helper()
	headRelease.Lock()
	defer headRelease.Unlock()
	if headRelease.dist == "" {
		dist := filepath.Join(bin, "upgrade", "head")
		if err := os.RemoveAll(dist); err != nil {
			t.Fatal(err)
		}
		started := time.Now()
		makeIn(t, root, "release", "VERSION=v0.0.0-e2e.upgrade", "ALLOW_DIRTY=1", "DIST="+dist)
		t.Logf("built HEAD's release in %.0fs", time.Since(started).Seconds())
		headRelease.dist = dist
	}
	inst := installedFrom(t, "HEAD (install.yaml)", headRelease.dist)
	inst.marksKeys, inst.viewersByUID, inst.recordsNamespaceUIDs = true, true, true
	return inst
}

// installedFrom is the installation of dir's install.yaml, its images
// (images.txt) imported into the real node first.
func installedFrom(t *testing.T, name, dir string) installation {
	t.Helper()
	manifest, err := os.ReadFile(filepath.Join(dir, "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	images, err := os.ReadFile(filepath.Join(dir, "images.txt"))
	if err != nil {
		t.Fatal(err)
	}
	inst := installation{name: name, policies: admissionPolicies(t, manifest), clusterScoped: clusterScoped(manifest), dist: dir}
	refs := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(images)), "\n") {
		archive, ref, _ := strings.Cut(line, " ")
		refs[archive] = ref
	}
	inst.managerImage, inst.viewerImage = refs["trellis-manager.tar"], refs["trellis-viewer.tar"]
	if inst.managerImage == "" || inst.viewerImage == "" || !bytes.Contains(manifest, []byte(inst.managerImage)) {
		t.Fatalf("%s: images.txt names %q, and install.yaml runs another manager", dir, images)
	}
	inst.importImages = func(t *testing.T) {
		t.Helper()
		for archive, ref := range refs {
			args := []string{"node-import", cluster, filepath.Join(dir, archive)}
			if repo, _, pinned := strings.Cut(ref, "@"); pinned {
				args = append(args, repo[:strings.LastIndex(repo, ":")])
			}
			if out, err := clusterSh(args...); err != nil {
				t.Fatal(err, out)
			}
		}
	}
	applyWith := func(t *testing.T, extra ...string) {
		t.Helper()
		inst.importImages(t)
		if _, err := kubectlIn(manifest, append([]string{"apply", "--server-side", "-f", "-"}, extra...)...); err != nil {
			t.Fatal(err)
		}
	}
	inst.apply = func(t *testing.T) { t.Helper(); applyWith(t) }
	inst.applyOver = func(t *testing.T) { t.Helper(); applyWith(t, "--force-conflicts") }
	return inst
}

// admissionPolicies lists the admission policies and bindings in a manifest.
func admissionPolicies(t *testing.T, manifest []byte) []string {
	t.Helper()
	var out []string
	for _, doc := range strings.Split(string(manifest), "\n---\n") {
		kind := regexp.MustCompile(`(?m)^kind: (\w+AdmissionPolicy(Binding)?)$`).FindStringSubmatch(doc)
		name := regexp.MustCompile(`(?m)^  name: (\S+)$`).FindStringSubmatch(doc)
		if kind != nil && name != nil {
			out = append(out, kind[1]+"/"+name[1])
		}
	}
	if len(out) == 0 {
		t.Fatal("the manifest installs no admission policy")
	}
	return out
}

// clusterScoped lists the CRDs, ClusterRoles, ClusterRoleBindings and
// admission policies and bindings in a manifest, "Kind/name".
func clusterScoped(manifest []byte) []string {
	var out []string
	kinds := regexp.MustCompile(`(?m)^kind: (CustomResourceDefinition|ClusterRole|ClusterRoleBinding|\w+AdmissionPolicy(Binding)?)$`)
	for _, doc := range strings.Split(string(manifest), "\n---\n") {
		kind := kinds.FindStringSubmatch(doc)
		name := regexp.MustCompile(`(?m)^  name: (\S+)$`).FindStringSubmatch(doc)
		if kind != nil && name != nil {
			out = append(out, kind[1]+"/"+name[1])
		}
	}
	return out
}

func git(args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func makeIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("make", append([]string{"--no-print-directory", "-C", dir}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make %s in %s: %v\n%s", strings.Join(args, " "), dir, err, tail(string(out), 30))
	}
}

// ---- what is checked ---------------------------------------------------------

// waitManagerRunning waits until the manager's pods all run inst's image,
// two of them Available, and one of them leads.
func waitManagerRunning(t *testing.T, inst installation) {
	t.Helper()
	if _, err := kubectl("-n", managerNS, "scale", "deployment/"+deployment, "--replicas=2"); err != nil {
		t.Fatal(err)
	}
	if _, err := kubectl("-n", managerNS, "rollout", "status", "deployment/"+deployment, "--timeout=180s"); err != nil {
		t.Fatalf("%s did not roll out: %v\n%s", inst.name, err, describeManagerPods())
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		out, _ := kubectl("-n", managerNS, "get", "pods", "-l", managerLabel, "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.spec.containers[0].image}{"\n"}{end}`)
		pods, images := map[string]bool{}, map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if pod, image, ok := strings.Cut(line, " "); ok {
				pods[pod], images[image] = true, true
			}
		}
		holder, _, _ := strings.Cut(leaseHolder(), "_")
		if len(pods) == 2 && len(images) == 1 && images[inst.managerImage] && pods[holder] {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: manager pods %v run %v, lease held by %q; want two pods of %s, one leading", inst.name, pods, images, holder, inst.managerImage)
		}
		time.Sleep(time.Second)
	}
}

// sampleObjects are the objects of config/samples.
var sampleObjects = []string{"markdownview/markdownview-sample", "tenant/team-a", "objectstore/local-s3",
	"storagebucket/assets", "bucketaccess/assets-writer"}

// waitSamplesReady waits until every sample is Ready, for its generation.
func waitSamplesReady(t *testing.T) {
	t.Helper()
	for _, obj := range sampleObjects {
		waitOutput(t, 180*time.Second, "True", "get", obj, "-n", "default", "-o",
			`jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		gen := jsonpath(t, "jsonpath={.metadata.generation}", obj, "-n", "default")
		waitOutput(t, 60*time.Second, gen+" "+gen, "get", obj, "-n", "default", "-o",
			`jsonpath={.metadata.generation} {.status.observedGeneration}`)
	}
}

// child is what tells whether an object was written, and by whom.
type child struct {
	uid, rv string
	// trellis is Trellis' managedFields entries (its field manager's):
	// their time and fields change with every write of Trellis that
	// changes the object, and with no one else's.
	trellis string
	spec    json.RawMessage // Deployments: the pod template, images blanked
}

// written: Trellis changed the object. (Other writers, such as the
// Deployment controller on a Deployment's status or the quota controller on
// a ResourceQuota's, change its resourceVersion only.)
func (c child) written(before child) bool {
	return c.rv != before.rv && c.trellis != before.trellis
}

// otherThanImages is what differs between two versions of a Deployment's
// pod template beside its images.
func otherThanImages(before, after child) string {
	if bytes.Equal(before.spec, after.spec) {
		return ""
	}
	return fmt.Sprintf("%s\nthen\n%s", before.spec, after.spec)
}

const kindDeployment = "Deployment"

// childKinds are the kinds of what Trellis creates for its objects.
const childKinds = "namespaces,configmaps,secrets,services,deployments,ingresses,rolebindings,roles,resourcequotas," +
	"limitranges,networkpolicies,clusterroles,clusterrolebindings"

// settledChildren lists every object labelled as Trellis' once two lists
// 15 seconds apart agree: the manager has done what it had to.
func settledChildren(t *testing.T) map[string]child {
	t.Helper()
	prev := listChildren(t)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		time.Sleep(15 * time.Second)
		next := listChildren(t)
		same := len(next) == len(prev)
		for k, c := range next {
			same = same && prev[k].uid == c.uid && !c.written(prev[k])
		}
		if same {
			return next
		}
		if time.Now().After(deadline) {
			t.Fatal("Trellis' children were still being written after 3 minutes")
		}
		prev = next
	}
}

func listChildren(t *testing.T) map[string]child {
	t.Helper()
	out, err := kubectl("get", childKinds, "-A", "-l", "app.kubernetes.io/managed-by=trellis", "--show-managed-fields", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Items []struct {
			Kind     string
			Metadata struct {
				Name, Namespace, UID, ResourceVersion string
				DeletionTimestamp                     *string
				ManagedFields                         []map[string]any
			}
			Spec struct {
				Template json.RawMessage
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	children := map[string]child{}
	for _, o := range list.Items {
		if o.Metadata.DeletionTimestamp != nil {
			continue // another test's, on its way out
		}
		c := child{uid: o.Metadata.UID, rv: o.Metadata.ResourceVersion}
		for _, m := range o.Metadata.ManagedFields {
			if m["manager"] == setup.FieldManager { // the same in N-1
				b, _ := json.Marshal(m)
				c.trellis += string(b)
			}
		}
		if o.Kind == kindDeployment {
			c.spec = regexp.MustCompile(`"image":\s*"[^"]*"`).ReplaceAll(o.Spec.Template, []byte(`"image":""`))
		}
		children[strings.Join([]string{o.Kind, o.Metadata.Namespace, o.Metadata.Name}, "/")] = c
	}
	return children
}

// s3Key is the sample BucketAccess's key, as its Secret holds it.
type s3Key struct{ id, secret string }

func accessKey(t *testing.T) s3Key {
	t.Helper()
	var k s3Key
	for field, v := range map[string]*string{"AWS_ACCESS_KEY_ID": &k.id, "AWS_SECRET_ACCESS_KEY": &k.secret} {
		b, err := base64.StdEncoding.DecodeString(jsonpath(t, "jsonpath={.data."+field+"}", "secret", "assets-s3", "-n", "default"))
		if err != nil || len(b) == 0 {
			t.Fatalf("the Secret assets-s3 holds no %s (%v)", field, err)
		}
		*v = string(b)
	}
	return k
}

func (k s3Key) client() (*minio.Client, error) {
	u, err := url.Parse(s3Endpoint())
	if err != nil {
		return nil, err
	}
	return minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(k.id, k.secret, ""), Region: "us-east-1",
		BucketLookup: minio.BucketLookupPath})
}

func (k s3Key) write(bucket, object string) error {
	c, err := k.client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = c.PutObject(ctx, bucket, object, strings.NewReader(object), int64(len(object)), minio.PutObjectOptions{})
	return err
}

func (k s3Key) read(bucket, object string) error {
	c, err := k.client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o, err := c.GetObject(ctx, bucket, object, minio.GetObjectOptions{})
	if err != nil {
		return err
	}
	defer func() { _ = o.Close() }()
	var b bytes.Buffer
	if _, err := b.ReadFrom(o); err != nil {
		return err
	}
	if b.String() != object {
		return fmt.Errorf("%s/%s reads %q", bucket, object, b.String())
	}
	return nil
}

// policyWatch watches the admission policies and bindings during a change.
type policyWatch struct {
	names  []string          // "Kind/name"
	uids   map[string]string // at the start
	events chan string       // "DELETED Kind/name" and the like
	stop   func()
}

var policyResources = map[string]schema.GroupVersionResource{
	"ValidatingAdmissionPolicy":        {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"},
	"ValidatingAdmissionPolicyBinding": {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"},
	"MutatingAdmissionPolicy":          {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingadmissionpolicies"},
	"MutatingAdmissionPolicyBinding":   {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingadmissionpolicybindings"},
}

// watchPolicies lists the named policies and bindings (every one must
// exist) and watches their kinds from that list on.
func watchPolicies(t *testing.T, names []string) *policyWatch {
	t.Helper()
	slices.Sort(names)
	names = slices.Compact(names)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &policyWatch{names: names, uids: map[string]string{}, events: make(chan string, 1000), stop: cancel}
	t.Cleanup(cancel)
	kinds := map[string]bool{}
	for _, n := range names {
		kind, _, _ := strings.Cut(n, "/")
		kinds[kind] = true
	}
	for kind := range kinds {
		res, ok := policyResources[kind]
		if !ok {
			t.Fatalf("no resource known for %s", kind)
		}
		list, err := dyn.Resource(res).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range list.Items {
			w.uids[kind+"/"+o.GetName()] = string(o.GetUID())
		}
		wi, err := dyn.Resource(res).Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer wi.Stop()
			for e := range wi.ResultChan() {
				if o, ok := e.Object.(metav1.Object); ok {
					w.events <- string(e.Type) + " " + kind + "/" + o.GetName() + " " + string(o.GetUID())
				} else if e.Type == watch.Error {
					w.events <- "ERROR " + kind
				}
			}
			w.events <- "CLOSED " + kind
		}()
	}
	for _, n := range names {
		if w.uids[n] == "" {
			t.Fatalf("%s is not installed before the change", n)
		}
	}
	return w
}

// check ends the watch: no named policy or binding was deleted, and each
// has the UID it had, with no break in the watch.
func (w *policyWatch) check(t *testing.T) {
	t.Helper()
	// Every change until now is in the channel within a moment; what the
	// watch reports once stopped is its own ending.
	time.Sleep(2 * time.Second)
	var seen []string
	for drained := false; !drained; {
		select {
		case e := <-w.events:
			seen = append(seen, e)
		default:
			drained = true
		}
	}
	w.stop()
	for _, e := range seen {
		f := strings.Fields(e)
		switch f[0] {
		case "CLOSED", "ERROR":
			t.Errorf("the watch of %s broke: a deletion may have been missed", f[1])
		case string(watch.Deleted):
			if slices.Contains(w.names, f[1]) {
				t.Errorf("%s was deleted during the change", f[1])
			}
		default:
			if slices.Contains(w.names, f[1]) && w.uids[f[1]] != f[2] {
				t.Errorf("%s has another UID after the change", f[1])
			}
		}
	}
	t.Logf("%d admission policies and bindings watched through the change; events: %v", len(w.names), seen)
}

func jsonpath(t *testing.T, path string, args ...string) string {
	t.Helper()
	out, err := kubectl(append(append([]string{"get"}, args...), "-o", path)...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

func instanceLabel(name string) string { return "app.kubernetes.io/instance=" + name }

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// storeMark is the mark of an ObjectStore in the key ids issued through it
// since issue 23 (internal/controller/storage/stores/marks.go).
func storeMark(uid string) string {
	sum := sha256.Sum256([]byte(uid))
	return strings.ToUpper(hex.EncodeToString(sum[:5]))
}
