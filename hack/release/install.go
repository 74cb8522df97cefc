package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const viewerImageFlag = "--viewer-image="

// renderInstall is `kustomize build config` with the manager's container
// image and its --viewer-image flag pinned to the release's images. It finds
// where they are in a first build, then lets kustomize make the change in a
// second, through an overlay of config: its images transformer for the
// manager's image, and a JSON patch that first tests the flag's current
// value, so that a kustomization which moved it fails rather than changes
// something else. Nothing but those two values differs from a plain build.
func renderInstall(kustomize, config string, images []image) ([]byte, error) {
	manager, viewer := find(images, managerArchive), find(images, viewerArchive)
	plain, err := kustomizeBuild(kustomize, config)
	if err != nil {
		return nil, err
	}
	site, err := findManager(plain)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", config, err)
	}

	dir, err := os.MkdirTemp("", "trellis-release-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	// kustomize takes only a relative path to a base outside the overlay.
	base, err := relativePath(dir, config)
	if err != nil {
		return nil, err
	}
	overlay, err := pinningOverlay(base, site, manager, viewer)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), overlay, 0o644); err != nil {
		return nil, err
	}
	pinned, err := kustomizeBuild(kustomize, dir)
	if err != nil {
		return nil, err
	}
	if err := verifyInstall(pinned, images); err != nil {
		return nil, fmt.Errorf("rendered install.yaml: %w", err)
	}
	return pinned, nil
}

func kustomizeBuild(kustomize, dir string) ([]byte, error) {
	var stderr bytes.Buffer
	cmd := exec.Command(kustomize, "build", dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w: %s", dir, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// relativePath is target relative to from, both with symbolic links resolved
// (kustomize resolves the overlay's directory before joining the path to it).
func relativePath(from, target string) (string, error) {
	from, err := filepath.EvalSymlinks(from)
	if err != nil {
		return "", err
	}
	if target, err = filepath.Abs(target); err != nil {
		return "", err
	}
	if target, err = filepath.EvalSymlinks(target); err != nil {
		return "", err
	}
	return filepath.Rel(from, target)
}

// managerSite is where the manager's image and --viewer-image flag are.
type managerSite struct {
	apiVersion, kind, namespace, name string
	container, arg                    int    // indexes in the pod template
	image, viewerArg                  string // their values in the plain build
}

// workload is the part of a Deployment findManager reads.
type workload struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		Template struct {
			Spec struct {
				Containers []struct {
					Image string   `json:"image"`
					Args  []string `json:"args"`
				} `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

// findManager finds the one container of the build passed --viewer-image:
// the manager.
func findManager(manifests []byte) (managerSite, error) {
	docs, err := splitDocuments(manifests)
	if err != nil {
		return managerSite{}, err
	}
	var sites []managerSite
	for _, doc := range docs {
		var w workload
		if err := yaml.Unmarshal(doc, &w); err != nil {
			return managerSite{}, err
		}
		for c, container := range w.Spec.Template.Spec.Containers {
			for a, arg := range container.Args {
				if strings.HasPrefix(arg, viewerImageFlag) {
					sites = append(sites, managerSite{apiVersion: w.APIVersion, kind: w.Kind, namespace: w.Metadata.Namespace, name: w.Metadata.Name,
						container: c, arg: a, image: container.Image, viewerArg: arg})
				}
			}
		}
	}
	if len(sites) != 1 || sites[0].kind != "Deployment" {
		return managerSite{}, fmt.Errorf("want one Deployment container passed %s (the manager), found %d", viewerImageFlag, len(sites))
	}
	return sites[0], nil
}

// pinningOverlay is the kustomization that pins the manager's image and
// --viewer-image flag of base.
func pinningOverlay(base string, site managerSite, manager, viewer reference) ([]byte, error) {
	argPath := fmt.Sprintf("/spec/template/spec/containers/%d/args/%d", site.container, site.arg)
	patch, err := json.Marshal([]map[string]string{
		{"op": "test", "path": argPath, "value": site.viewerArg},
		{"op": "replace", "path": argPath, "value": viewerImageFlag + viewer.String()},
	})
	if err != nil {
		return nil, err
	}
	group, version, _ := strings.Cut(site.apiVersion, "/")
	kustomization := map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"resources":  []string{filepath.ToSlash(base)},
		"images": []map[string]string{{
			"name":    imageName(site.image),
			"newName": manager.repository,
			"newTag":  manager.tag,
			"digest":  manager.digest,
		}},
		"patches": []map[string]any{{
			"target": map[string]string{"group": group, "version": version, "kind": site.kind, "namespace": site.namespace, "name": site.name},
			"patch":  string(patch),
		}},
	}
	return yaml.Marshal(kustomization)
}

// imageName is an image reference without its tag and digest, as kustomize's
// images transformer matches it.
func imageName(ref string) string {
	if i := strings.IndexByte(ref, '@'); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		ref = ref[:i]
	}
	return ref
}

func splitDocuments(manifests []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(manifests)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) > 0 {
			docs = append(docs, doc)
		}
	}
}

// verifyInstall checks that every image install.yaml names — every "image"
// field, every --viewer-image flag — is one of the release's images, pinned
// by digest, and that each of those is named.
func verifyInstall(manifests []byte, images []image) error {
	release := map[string]bool{}
	for _, i := range images {
		release[i.ref.String()] = false
	}
	docs, err := splitDocuments(manifests)
	if err != nil {
		return err
	}
	var problems error // errors.Join of every problem found
	for _, doc := range docs {
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return err
		}
		where := objectName(obj)
		walkStrings(obj, "", func(path, key, value string) {
			var ref string
			switch {
			case key == "image":
				ref = value
			case strings.HasPrefix(value, viewerImageFlag):
				ref = strings.TrimPrefix(value, viewerImageFlag)
			default:
				return
			}
			if _, ok := release[ref]; !ok {
				problems = errors.Join(problems, fmt.Errorf("%s %s: %s is not one of the release's images pinned by digest", where, path, ref))
				return
			}
			release[ref] = true
		})
	}
	var unnamed []string
	for ref, named := range release {
		if !named {
			unnamed = append(unnamed, ref)
		}
	}
	sort.Strings(unnamed)
	for _, ref := range unnamed {
		problems = errors.Join(problems, fmt.Errorf("names no %s", ref))
	}
	return problems
}

func objectName(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	if ns, _ := meta["namespace"].(string); ns != "" {
		name = ns + "/" + name
	}
	kind, _ := obj["kind"].(string)
	return kind + " " + name
}

// walkStrings calls f with every string in v, its path and the key it is
// the value of ("" in a list).
func walkStrings(v any, path string, f func(path, key, value string)) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if s, ok := v[k].(string); ok {
				f(path+"."+k, k, s)
				continue
			}
			walkStrings(v[k], path+"."+k, f)
		}
	case []any:
		for i, e := range v {
			if s, ok := e.(string); ok {
				f(fmt.Sprintf("%s[%d]", path, i), "", s)
				continue
			}
			walkStrings(e, fmt.Sprintf("%s[%d]", path, i), f)
		}
	}
}
