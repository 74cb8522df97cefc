//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	corev1 "k8s.io/api/core/v1"
)

// The README's install ("Install on your cluster"), word for word, on a
// fresh cluster with no Trellis: its Helm commands are read out of
// README.md and run by bash, with Helm 4 and with the newest Helm 3, the
// release pushed to a registry this test runs. `helm test` (in the
// README's commands) must prove the install serves a site, twice in a row,
// leaving nothing behind; `helm uninstall` must keep what docs/operations.md
// says it keeps.

// readmeRegistry is the registry the README's commands push to; the test
// puts its own, on 127.0.0.1, in its place.
const readmeRegistry = "registry.example.com/trellis"

// readmeBlock is a shell code block of README.md, with the prose before it.
type readmeBlock struct{ prose, code string }

// readmeInstallBlocks returns the `sh` code blocks of README.md's "Install
// on your cluster" section.
func readmeInstallBlocks(t *testing.T) []readmeBlock {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Install on your cluster\n")
	if !ok {
		t.Fatal(`README.md has no section "Install on your cluster"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var blocks []readmeBlock
	var prose, code strings.Builder
	inCode := false
	s := bufio.NewScanner(strings.NewReader(section))
	for s.Scan() {
		line := s.Text()
		switch {
		case !inCode && line == "```sh":
			inCode = true
		case inCode && line == "```":
			blocks = append(blocks, readmeBlock{prose: prose.String(), code: code.String()})
			prose.Reset()
			code.Reset()
			inCode = false
		case inCode:
			code.WriteString(line + "\n")
		default:
			prose.WriteString(line + "\n")
		}
	}
	return blocks
}

// readmeHelmCommands is the Helm block of the README for helm ("Helm 4",
// "Helm 3"): the block with `helm install` whose prose names that version.
func readmeHelmCommands(t *testing.T, version string) string {
	t.Helper()
	var found []string
	for _, b := range readmeInstallBlocks(t) {
		if strings.Contains(b.prose, version) && strings.Contains(b.code, "helm install ") {
			found = append(found, b.code)
		}
	}
	if len(found) != 1 {
		t.Fatalf("README.md's install section has %d blocks of helm install for %s, want one: %q", len(found), version, found)
	}
	return found[0]
}

// readmeRelease runs the README's `make release` line (the same in every
// Helm block) with the test's registry, once for all the cases: it builds
// dist/ and pushes the images. It checks that each image's digest in
// images.txt is what the registry serves under its tag.
func readmeRelease(t *testing.T, commands, reg string) string {
	t.Helper()
	var line string
	for _, l := range strings.Split(commands, "\n") {
		if strings.HasPrefix(l, "make release ") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("the README's Helm commands build no release:\n%s", commands)
	}
	started := time.Now()
	// ALLOW_DIRTY: the tree under test may hold changes not yet committed,
	// which a user's release may not (the release names the commit).
	out, err := readmeShell(t, []string{"ALLOW_DIRTY=1"}, strings.ReplaceAll(line, readmeRegistry, reg))
	if err != nil {
		t.Fatalf("%s: %v\n%s", line, err, tail(out, 30))
	}
	t.Logf("the README's release built and pushed in %.0fs", time.Since(started).Seconds())
	dist := filepath.Join(root, "dist")
	images, err := os.ReadFile(filepath.Join(dist, "images.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(images)), "\n") {
		_, ref, _ := strings.Cut(l, " ")
		repoTag, digest, _ := strings.Cut(ref, "@")
		i := strings.LastIndex(repoTag, ":")
		repo, tag := repoTag[:i], repoTag[i+1:]
		if !strings.HasPrefix(repo, reg+"/") {
			t.Fatalf("images.txt names %s, not in the test's registry %s", ref, reg)
		}
		host, path, _ := strings.Cut(repo, "/")
		req, _ := http.NewRequest(http.MethodHead, fmt.Sprintf("http://%s/v2/%s/manifests/%s", host, path, tag), nil)
		req.Header.Set("Accept", "application/vnd.oci.image.index.v1+json,application/vnd.oci.image.manifest.v1+json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if got := resp.Header.Get("Docker-Content-Digest"); resp.StatusCode != http.StatusOK || got != digest {
			t.Errorf("the registry serves %s as %s (%s), images.txt pins %s", repoTag, got, resp.Status, digest)
		}
	}
	return dist
}

// readmeShell runs script with bash in the checkout, as a user would,
// with env added.
func readmeShell(t *testing.T, env []string, script string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestREADMEInstall: the README's Helm commands, with Helm 4 and with Helm
// 3, on a fresh cluster of its own: its one node the real node, with no
// taint, so that every pod runs (the suite's cluster has Trellis installed
// in every way; the README's commands need a cluster without it).
func TestREADMEInstall(t *testing.T) {
	helm4, helm3 := filepath.Join(bin, "helm"), filepath.Join(bin, "helm3")
	for _, p := range []string{helm4, helm3} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s missing: make helm helm3", p)
		}
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	reg := strings.TrimPrefix(srv.URL, "http://") + "/trellis"
	dist := readmeRelease(t, readmeHelmCommands(t, "Helm 4"), reg)

	fresh := fmt.Sprintf("trellis-readme-%d", os.Getpid())
	t.Cleanup(func() {
		if out, err := clusterSh("down", fresh); err != nil {
			t.Errorf("deleting cluster %s: %v %s", fresh, err, out)
		}
	})
	started := time.Now()
	out, err := clusterSh("up", fresh, "0", "real-node")
	if err != nil {
		t.Fatal(err, out)
	}
	// The helpers (kubectl, uid, the node import) act on the fresh cluster
	// until the test ends.
	suiteKubeconfig, suiteCluster := kubeconfig, cluster
	kubeconfig, cluster = strings.TrimSpace(out), fresh
	t.Cleanup(func() { kubeconfig, cluster = suiteKubeconfig, suiteCluster })
	if out, err := clusterSh("node-up", fresh); err != nil {
		t.Fatal(err, out)
	}
	if _, err := kubectl("taint", "node", "real-node", "trellis.dev/real-node-"); err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster %s with its real node up in %.0fs", fresh, time.Since(started).Seconds())

	// The real node cannot reach the test's registry (it has a network of
	// its own, with no route to the host's loopback): the release's images
	// are imported into it under the names the chart pins, repository and
	// digest, so that the kubelet finds them and pulls nothing. That the
	// push reached the registry, readmeRelease checked by digest.
	installedFrom(t, "the README's release", dist).importImages(t)
	for _, tc := range []struct{ version, helm string }{{"Helm 4", helm4}, {"Helm 3", helm3}} {
		t.Run(strings.ReplaceAll(tc.version, " ", ""), func(t *testing.T) {
			started := time.Now()
			readmeInstall(t, tc.version, tc.helm)
			t.Logf("%s: the README's install, helm test twice, uninstall and clean-up in %.0fs", tc.version, time.Since(started).Seconds())
		})
	}
}

// readmeInstall runs the README's commands for version with helmBinary as
// `helm` (but the release, built once), then `helm test` again and `helm
// uninstall`, checks what stays, and removes it.
func readmeInstall(t *testing.T, version, helmBinary string) {
	t.Helper()
	path := t.TempDir()
	for name, target := range map[string]string{"helm": helmBinary, "kubectl": filepath.Join(bin, "kubectl")} {
		if err := os.Symlink(target, filepath.Join(path, name)); err != nil {
			t.Fatal(err)
		}
	}
	helmHome := t.TempDir()
	env := []string{"PATH=" + path + string(os.PathListSeparator) + os.Getenv("PATH"), "KUBECONFIG=" + kubeconfig,
		"HELM_CACHE_HOME=" + filepath.Join(helmHome, "cache"), "HELM_CONFIG_HOME=" + filepath.Join(helmHome, "config"),
		"HELM_DATA_HOME=" + filepath.Join(helmHome, "data")}
	var script []string
	for _, l := range strings.Split(readmeHelmCommands(t, version), "\n") {
		if !strings.HasPrefix(l, "make release ") { // built once, by readmeRelease
			script = append(script, l)
		}
	}
	if out, err := readmeShell(t, env, "helm version --short"); err != nil || !strings.HasPrefix(out, "v"+version[len("Helm "):]+".") {
		t.Fatalf("helm on the README's PATH is %q (%v), want %s", out, err, version)
	}
	defer removeTrellis(t)
	out, err := readmeShell(t, env, strings.Join(script, "\n"))
	if err != nil {
		// The last container may have been stopped by the pod's deadline
		// before it said anything: the one before says what it got.
		logs, _ := kubectl("-n", managerNS, "logs", "trellis-site-test", "--previous", "--tail=20")
		t.Fatalf("the README's %s commands: %v\n%s\nthe test pod's log:\n%s", version, err, tail(out, 60), logs)
	}
	// helm test reports each hook: the MarkdownView, then the pod.
	phases := regexp.MustCompile(`(?m)^Phase:\s+(\w+)$`).FindAllStringSubmatch(out, -1)
	if len(phases) != 2 || phases[0][1] != string(corev1.PodSucceeded) || phases[1][1] != string(corev1.PodSucceeded) {
		t.Errorf("helm test reported phases %q, want both hooks Succeeded:\n%s", phases, tail(out, 30))
	}
	// Again: the hooks of the first run are gone, and a second run passes.
	if out, err := readmeShell(t, env, "helm test trellis --namespace trellis-system"); err != nil {
		t.Fatalf("helm test, a second time: %v\n%s", err, out)
	}
	// Nothing of the test stays: its MarkdownView, its pod and (by owner
	// reference, through the garbage collector) the view's children.
	waitGone(t, "-n", managerNS, "markdownviews,pods,deployments,services,configmaps", "site-test")

	kept := [][]string{{"namespace", managerNS}}
	for _, p := range installedFrom(t, "", filepath.Join(root, "dist")).clusterScoped {
		kind, name, _ := strings.Cut(p, "/")
		if kind == "CustomResourceDefinition" || strings.HasPrefix(kind, "ValidatingAdmissionPolicy") {
			kept = append(kept, []string{strings.ToLower(kind), name})
		}
	}
	uids := map[string]string{}
	for _, k := range kept {
		if uids[strings.Join(k, "/")] = uid(k...); uids[strings.Join(k, "/")] == "" {
			t.Errorf("%v is not installed", k)
		}
	}
	if out, err := readmeShell(t, env, "helm uninstall trellis --namespace trellis-system --wait"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	// docs/operations.md, "Uninstall: what stays".
	for _, k := range kept {
		if got := uid(k...); got != uids[strings.Join(k, "/")] {
			t.Errorf("%v after helm uninstall: UID %q, was %s", k, got, uids[strings.Join(k, "/")])
		}
	}
	for _, gone := range [][]string{{"-n", managerNS, "deployment", deployment}, {"clusterrole", "trellis-manager-role"},
		{"mutatingadmissionpolicy", "trellis-tenant-finalizer"}} {
		if uid(gone...) != "" {
			t.Errorf("%v outlived helm uninstall", gone)
		}
	}
}

// waitGone waits until no object of kinds named with part is left.
func waitGone(t *testing.T, args ...string) {
	t.Helper()
	part := args[len(args)-1]
	get := append(append([]string{"get"}, args[:len(args)-1]...), "-o", "name")
	deadline := time.Now().Add(90 * time.Second)
	for {
		out, err := kubectl(get...)
		if err == nil && !strings.Contains(out, part) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still there after helm test: %s %v", out, err)
		}
		time.Sleep(time.Second)
	}
}

// removeTrellis deletes what helm uninstall kept (the fresh cluster holds
// no Trellis object), so that the next case starts on a cluster without
// Trellis.
func removeTrellis(t *testing.T) {
	t.Helper()
	_, _ = exec.Command(filepath.Join(bin, "helm"), "--kubeconfig", kubeconfig, "uninstall", "trellis", "-n", managerNS,
		"--ignore-not-found", "--wait", "--timeout=3m").CombinedOutput()
	for _, p := range installedFrom(t, "", filepath.Join(root, "dist")).clusterScoped {
		kind, name, _ := strings.Cut(p, "/")
		if _, err := kubectl("delete", strings.ToLower(kind), name, "--ignore-not-found"); err != nil {
			t.Error(err)
		}
	}
	if _, err := kubectl("delete", "namespace", managerNS, "--ignore-not-found", "--timeout=3m"); err != nil {
		t.Error(err)
	}
}
