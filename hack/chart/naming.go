package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

const (
	nameLabel          = "app.kubernetes.io/name"
	kindServiceAccount = "ServiceAccount"
	kindSecret         = "Secret"
	// The Secret Kubernetes fills with a ServiceAccount's token, and the
	// annotation that names the ServiceAccount.
	tokenSecretType       = "kubernetes.io/service-account-token"
	tokenSecretAnnotation = "kubernetes.io/service-account.name"
)

// kindName is an object of config by kind and name.
type kindName struct{ kind, name string }

// naming is how the chart names what config names. Config names every
// object with its namePrefix ("trellis-"); in the chart the prefix is the
// release's fullname (fullnameOverride, nameOverride, or config's), so the
// default names are config's whatever the release is called. The label
// app.kubernetes.io/name config gives (the prefix without its dash) is the
// release's name (nameOverride).
type naming struct {
	prefix string // config/default's namePrefix
	app    string // the prefix without its dash: config's app.kubernetes.io/name
	// managerSA is the manager's ServiceAccount (serviceAccount.name),
	// scraperSecret the Secret of the metrics scraper's token
	// (monitoring.serviceMonitor.tokenSecret.name), as config names them.
	managerSA, scraperSecret string
	renamed                  map[kindName]bool
	byName                   map[string]bool // the names of renamed
}

// namePrefix reads the namePrefix of the kustomization in dir.
func namePrefix(dir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return "", err
	}
	var k struct {
		NamePrefix string `json:"namePrefix"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		return "", fmt.Errorf("%s/kustomization.yaml: %w", dir, err)
	}
	if !strings.HasSuffix(k.NamePrefix, "-") || len(k.NamePrefix) < 2 {
		return "", fmt.Errorf("%s/kustomization.yaml: namePrefix %q is not NAME-: the chart would not know what to rename", dir, k.NamePrefix)
	}
	return k.NamePrefix, nil
}

// newNaming reads, from every object the chart renders, what is renamed
// with the release: every object but the CRDs (named after their API group)
// and the namespace (the release's). Each must carry the prefix.
func newNaming(prefix string, objects []map[string]any) (*naming, error) {
	n := &naming{prefix: prefix, app: strings.TrimSuffix(prefix, "-"), renamed: map[kindName]bool{}, byName: map[string]bool{}}
	for _, o := range objects {
		kind, name := fmt.Sprint(o["kind"]), str(o, "metadata", "name")
		switch kind {
		case kindCRD, kindNamespace:
			continue
		case kindSecret:
			if o["type"] == tokenSecretType {
				if n.scraperSecret != "" {
					return nil, errors.New("two ServiceAccount token Secrets: the chart has one value for the metrics scraper's")
				}
				n.scraperSecret = name
			}
		case kindDeployment:
			if sa := managerServiceAccount(o); sa != "" {
				n.managerSA = sa
			}
		}
		if !strings.HasPrefix(name, prefix) || name == prefix {
			return nil, fmt.Errorf("%s %s is not named %sNAME: fullnameOverride could not rename it", kind, name, prefix)
		}
		n.renamed[kindName{kind, name}] = true
		n.byName[name] = true
	}
	if n.managerSA == "" || !n.renamed[kindName{kindServiceAccount, n.managerSA}] {
		return nil, fmt.Errorf("the manager runs as ServiceAccount %q, which config/default does not have", n.managerSA)
	}
	return n, nil
}

// managerServiceAccount is the serviceAccountName of a Deployment with a
// manager container ("" for any other).
func managerServiceAccount(o map[string]any) string {
	pod, _ := o["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	containers, _ := pod["containers"].([]any)
	for _, c := range containers {
		if c, _ := c.(map[string]any); c["name"] == managerName {
			sa, _ := pod["serviceAccountName"].(string)
			return sa
		}
	}
	return ""
}

// nameOf is the template of the name the chart gives an object config
// names name ("" when it keeps config's).
func (n *naming) nameOf(kind, name string) string {
	switch {
	case !n.renamed[kindName{kind, name}]:
		return ""
	case kind == kindServiceAccount && name == n.managerSA:
		return `{{ include "trellis.serviceAccountName" . | quote }}`
	case kind == kindSecret && name == n.scraperSecret:
		return `{{ include "trellis.metricsTokenSecret" . | quote }}`
	}
	return `{{ include "trellis.fullname" . }}-` + strings.TrimPrefix(name, n.prefix)
}

// suffix is name without config's prefix.
func (n *naming) suffix(name string) string { return strings.TrimPrefix(name, n.prefix) }

// rename puts the release's names in o: its own name, the names it refers
// to (roles, ServiceAccounts, policies, Secrets), and the app label. A
// string left that is the name of a renamed object is a reference the chart
// does not know: an error, rather than an object that points at config's
// name under fullnameOverride.
func (n *naming) rename(o map[string]any, p *placeholders) error {
	kind := fmt.Sprint(o["kind"])
	meta := o["metadata"].(map[string]any)
	ref := func(m map[string]any, key, kind string) {
		if name, _ := m[key].(string); name != "" {
			if t := n.nameOf(kind, name); t != "" {
				m[key] = p.value(t)
			}
		}
	}
	ref(meta, "name", kind)
	if ann, ok := meta["annotations"].(map[string]any); ok && kind == kindSecret {
		ref(ann, tokenSecretAnnotation, kindServiceAccount)
	}
	if r, ok := o["roleRef"].(map[string]any); ok {
		ref(r, "name", fmt.Sprint(r["kind"]))
	}
	if subjects, ok := o["subjects"].([]any); ok {
		for _, s := range subjects {
			s := s.(map[string]any)
			ref(s, "name", fmt.Sprint(s["kind"]))
		}
	}
	if spec, ok := o["spec"].(map[string]any); ok {
		switch kind {
		case kindVAPBinding:
			ref(spec, "policyName", kindVAP)
		case kindMAPBinding:
			ref(spec, "policyName", kindMAP)
		}
		if t, ok := spec["template"].(map[string]any); ok {
			if pod, ok := t["spec"].(map[string]any); ok {
				ref(pod, "serviceAccountName", kindServiceAccount)
			}
		}
	}
	n.appLabels(o, p)
	var left []string
	walkStrings(o, "", func(path, s string) {
		if n.byName[s] {
			left = append(left, fmt.Sprintf("%s: %s", path, s))
		}
	})
	if len(left) > 0 {
		sort.Strings(left)
		return fmt.Errorf("names another object where hack/chart does not rename it (teach it): %s", strings.Join(left, ", "))
	}
	return nil
}

// appLabels puts the release's name wherever config's app.kubernetes.io/name
// is: labels and selectors alike.
func (n *naming) appLabels(v any, p *placeholders) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if k == nameLabel && x == n.app {
				v[k] = p.value(`{{ include "trellis.name" . | quote }}`)
				continue
			}
			n.appLabels(x, p)
		}
	case []any:
		for _, x := range v {
			n.appLabels(x, p)
		}
	}
}

// walkStrings calls f with every string in v and its path.
func walkStrings(v any, path string, f func(path, s string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			walkStrings(x, path+"."+k, f)
		}
	case []any:
		for i, x := range v {
			walkStrings(x, fmt.Sprintf("%s[%d]", path, i), f)
		}
	case string:
		f(path, v)
	}
}
