package main

import (
	"reflect"
	"strings"
	"testing"
)

// helmTestHooks renders chart's `helm test` hooks, by "Kind namespace/name".
func helmTestHooks(t *testing.T, chart string, args ...string) map[string]map[string]any {
	t.Helper()
	hooks := map[string]map[string]any{}
	for key, o := range render(t, chart, args...) {
		if str(o, "metadata", "annotations", "helm.sh/hook") == "test" {
			hooks[key] = o
		}
	}
	return hooks
}

// TestSiteTestHook: `helm test` creates a MarkdownView whose page carries a
// marker of the release's revision, then a pod that gets the page through
// the viewer's Service (by the address the kubelet puts in its
// environment) and passes only if the marker is there. The pod is held to
// Pod Security "restricted" (the release's namespace enforces it) and runs
// the viewer image; both go once the test passed, and at the next run.
// (The e2e test TestREADMEInstall runs it on a real node.)
func TestSiteTestHook(t *testing.T) {
	for name, tc := range map[string]struct {
		set      []string
		fullname string // "": no hooks
	}{
		"defaults":                    {nil, "trellis"},
		"fullnameOverride":            {[]string{"--set", "fullnameOverride=platform-trellis"}, "platform-trellis"},
		"the markdownview controller": {[]string{"--set", "controllers={markdownview}"}, "trellis"},
		"tests.enabled=false":         {[]string{"--set", "tests.enabled=false"}, ""},
		"no markdownview controller":  {[]string{"--set", "controllers={tenant,storage}"}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			hooks := helmTestHooks(t, chartDir, tc.set...)
			if tc.fullname == "" {
				if len(hooks) > 0 {
					t.Fatalf("hooks rendered: %v", keys(hooks))
				}
				return
			}
			name := tc.fullname + "-site-test"
			view, pod := hooks["MarkdownView trellis-system/"+name], hooks["Pod trellis-system/"+name]
			if len(hooks) != 2 || view == nil || pod == nil {
				t.Fatalf("hooks %v, want the MarkdownView and the Pod %s", keys(hooks), name)
			}
			for _, o := range []map[string]any{view, pod} {
				policy := str(o, "metadata", "annotations", "helm.sh/hook-delete-policy")
				if !strings.Contains(policy, "before-hook-creation") || !strings.Contains(policy, "hook-succeeded") {
					t.Errorf("%s: delete policy %q: a passed test would leave it, or the next run find it", o["kind"], policy)
				}
			}
			if w := str(view, "metadata", "annotations", "helm.sh/hook-weight"); w == "" || w[0] != '-' {
				t.Errorf("the MarkdownView's hook weight %q: it must come before the pod's (0)", w)
			}

			spec := pod["spec"].(map[string]any)
			c := spec["containers"].([]any)[0].(map[string]any)
			args := argsOf(c)
			marker := ""
			for _, a := range args {
				if m, ok := strings.CutPrefix(a, "--contains="); ok {
					marker = m
				}
			}
			page := str(view, "spec", "markdowns", "index.md")
			if !strings.HasSuffix(marker, "-trellis-1") || !strings.Contains(page, marker) {
				t.Errorf("the pod checks for %q (want one of release trellis, revision 1); the page is %q", marker, page)
			}
			env := "VIEWER_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "_SERVICE_"
			if want := "http://$(" + env + "HOST):$(" + env + "PORT)/"; args[0] != "check" || args[len(args)-1] != want {
				t.Errorf("args %q, want viewer check … %s (the Service viewer-%s)", args, want, name)
			}
			if spec["enableServiceLinks"] != true || spec["restartPolicy"] != "OnFailure" || spec["activeDeadlineSeconds"] == nil {
				t.Errorf("the pod must get the Service's address in its environment, start again without it, and end: %v", spec)
			}
			if c["image"] != "trellis-viewer:dev" {
				t.Errorf("the pod runs %v, want the viewer image", c["image"])
			}
			restricted(t, spec, c)
		})
	}

	// A release's viewer image, and its pull secrets.
	hooks := helmTestHooks(t, chartDir, "--set", "viewerImage.repository=registry.example.com/trellis-viewer,viewerImage.digest="+digest,
		"--set", "imagePullSecrets[0].name=registry")
	spec := hooks["Pod trellis-system/trellis-site-test"]["spec"].(map[string]any)
	if got := spec["containers"].([]any)[0].(map[string]any)["image"]; got != "registry.example.com/trellis-viewer:dev@"+digest {
		t.Errorf("the pod runs %v", got)
	}
	if got := spec["imagePullSecrets"]; !reflect.DeepEqual(got, []any{map[string]any{"name": "registry"}}) {
		t.Errorf("imagePullSecrets %v", got)
	}
}

// restricted fails t unless the pod and its container meet Pod Security
// "restricted", with their resources set.
func restricted(t *testing.T, spec, c map[string]any) {
	t.Helper()
	pod, _ := spec["securityContext"].(map[string]any)
	sc, _ := c["securityContext"].(map[string]any)
	if pod["runAsNonRoot"] != true || str(pod, "seccompProfile", "type") != "RuntimeDefault" {
		t.Errorf("pod securityContext %v", pod)
	}
	drop, _ := sc["capabilities"].(map[string]any)["drop"].([]any)
	if sc["allowPrivilegeEscalation"] != false || sc["readOnlyRootFilesystem"] != true || !reflect.DeepEqual(drop, []any{"ALL"}) {
		t.Errorf("container securityContext %v", sc)
	}
	r, _ := c["resources"].(map[string]any)
	if r["requests"] == nil || r["limits"] == nil {
		t.Errorf("resources %v", r)
	}
}
