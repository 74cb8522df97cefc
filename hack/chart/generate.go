package main

import (
	"bufio"
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

//go:embed all:files
var embedded embed.FS

// release is what a chart is built for: its version, and the images
// values.yaml names (nil: config's, unpinned).
type release struct {
	chartVersion, appVersion string
	manager, viewer          *imageRef
}

// defaultRelease is the committed chart's: no release, config's images.
var defaultRelease = release{chartVersion: "0.0.0-dev", appVersion: "dev"}

// imageRef is an image as values.yaml spells it.
type imageRef struct{ Repository, Tag, Digest string }

// parseImageRef splits REPOSITORY[:TAG][@DIGEST].
func parseImageRef(s string) imageRef {
	var r imageRef
	s, r.Digest, _ = strings.Cut(s, "@")
	if i := strings.LastIndexByte(s, ':'); i > strings.LastIndexByte(s, '/') {
		s, r.Tag = s[:i], s[i+1:]
	}
	r.Repository = s
	return r
}

const (
	viewerImageFlag    = "--viewer-image="
	kindCRD            = "CustomResourceDefinition"
	kindNamespace      = "Namespace"
	kindDeployment     = "Deployment"
	kindVAP            = "ValidatingAdmissionPolicy"
	kindVAPBinding     = "ValidatingAdmissionPolicyBinding"
	kindMAP            = "MutatingAdmissionPolicy"
	kindMAPBinding     = "MutatingAdmissionPolicyBinding"
	kindServiceMonitor = "ServiceMonitor"
	kindPrometheusRule = "PrometheusRule"
	spreadField        = "topologySpreadConstraints"
	managerName        = "manager" // config/manager's container
	// A gate's value names: the object is rendered only when it is true.
	gateNamespace      = ".Values.namespace.create"
	gateServiceAccount = ".Values.serviceAccount.create"
	gatePDB            = "and .Values.podDisruptionBudget.enabled (gt (int .Values.replicas) 1)"
	gateServiceMonitor = ".Values.monitoring.serviceMonitor.enabled"
	gatePrometheusRule = ".Values.monitoring.prometheusRule.enabled"
	gateDashboard      = ".Values.monitoring.dashboard.enabled"
	gateBucketEvents   = ".Values.bucketEvents.enabled"
	// Kept on uninstall: Trellis' objects and what restricts them.
	keepAnnotation = "helm.sh/resource-policy"
)

// podBlocks are the pod spec's optional fields the chart offers, each a
// value of the same name (config's, when it sets one, is the default).
var podBlocks = []string{"imagePullSecrets", "nodeSelector", "affinity", "tolerations", spreadField}

// chartDefaults are the values config/ gives, written into values.yaml.
type chartDefaults struct {
	ChartVersion    string
	AppVersion      string
	Image, Viewer   imageRef
	Replicas        int64
	Resources       string
	PodBlocks       map[string]string
	PDB             bool
	PDBMinAvailable string
	ServiceMonitor  bool
	PrometheusRule  bool
	Dashboards      []string
	// BucketEvents: config/bucket-events exists; its flags and ports join
	// the manager's, and its objects the chart's, behind bucketEvents.enabled.
	BucketEvents bool
	bucketEvents bucketEventsPatch
	// AppName is config's app.kubernetes.io/name and the start of its
	// names; ManagerSA the manager's ServiceAccount's name after it.
	AppName, ManagerSA string
	// FullnameMaxLength keeps every Service name within 63 characters.
	FullnameMaxLength int
	// LabelKeys are the labels config and Helm give: commonLabels may not
	// set them again. PodLabelKeys, PodAnnotationKeys and EnvNames are
	// config's on the manager's pods, which the pod values may not set again.
	LabelKeys, PodLabelKeys, PodAnnotationKeys, EnvNames []string
	PriorityClassName                                    string
	// ValidationActions are config's, in YAML; MutatingPolicies: config
	// has MutatingAdmissionPolicies.
	ValidationActions string
	MutatingPolicies  bool
	// Scraper is the suffix of config/prometheus' token Secret's name
	// ("": none), TokenKey the key of it the ServiceMonitor sends.
	Scraper, TokenKey string
}

// naming records the names config gives.
func (d *chartDefaults) naming(n *naming, objects []map[string]any) {
	d.AppName, d.ManagerSA = n.app, n.suffix(n.managerSA)
	if n.scraperSecret != "" {
		d.Scraper = n.suffix(n.scraperSecret)
	}
	d.FullnameMaxLength = 63
	keys := map[string]bool{}
	for _, k := range helmLabels {
		keys[k] = true
	}
	for _, o := range objects {
		if o["kind"] == "Service" {
			d.FullnameMaxLength = min(d.FullnameMaxLength, 63-len(n.suffix(str(o, "metadata", "name")))-1)
		}
		labels, _ := o["metadata"].(map[string]any)["labels"].(map[string]any)
		for k := range labels {
			keys[k] = true
		}
	}
	for k := range keys {
		d.LabelKeys = append(d.LabelKeys, k)
	}
	sort.Strings(d.LabelKeys)
}

// helmLabels are the labels the chart adds to config's (and the one it replaces).
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/version", "app.kubernetes.io/managed-by"}

// bucketEventsPatch is what config/bucket-events adds to the manager
// container (manager_patch.yaml).
type bucketEventsPatch struct {
	args  []string
	ports []any
}

// generate returns the chart's files, by path in the chart.
func generate(kustomize, config string, rel release) (map[string][]byte, error) {
	built, err := kustomizeBuild(kustomize, filepath.Join(config, "default"))
	if err != nil {
		return nil, err
	}
	objects, err := splitObjects(built)
	if err != nil {
		return nil, err
	}
	monitoring, err := monitoringObjects(kustomize, filepath.Join(config, "prometheus"))
	if err != nil {
		return nil, err
	}
	for _, o := range monitoring {
		o[monitoringMark] = true
	}
	dashboards, err := filepath.Glob(filepath.Join(config, "grafana", "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(dashboards)

	ns := ""
	for _, o := range objects {
		if o["kind"] == kindNamespace {
			ns = str(o, "metadata", "name")
		}
	}
	if ns == "" {
		return nil, errors.New("config/default has no Namespace: the chart would not know the manager's")
	}
	d := &chartDefaults{ChartVersion: rel.chartVersion, AppVersion: rel.appVersion, PodBlocks: map[string]string{}}
	events, err := bucketEventsComponent(filepath.Join(config, "bucket-events"), d)
	if err != nil {
		return nil, err
	}
	prefix, err := namePrefix(filepath.Join(config, "default"))
	if err != nil {
		return nil, err
	}
	all := append(append(objects, monitoring...), events...)
	n, err := newNaming(prefix, all)
	if err != nil {
		return nil, err
	}
	d.naming(n, all)
	files := map[string][]byte{}
	for _, o := range all {
		p := path.Join("templates", category(o), fileName(o))
		t, err := templateOf(o, ns, n, d)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", o["kind"], str(o, "metadata", "name"), err)
		}
		if _, dup := files[p]; dup {
			return nil, fmt.Errorf("two objects would be %s", p)
		}
		files[p] = t
	}
	if d.Image.Repository == "" {
		return nil, fmt.Errorf("config/default has no Deployment with a %q container", managerName)
	}
	if err := addShardingFiles(files, config); err != nil {
		return nil, err
	}
	for _, f := range dashboards {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		name := filepath.Base(f)
		files["dashboards/"+name] = data
		d.Dashboards = append(d.Dashboards, name)
	}
	if rel.manager != nil {
		d.Image, d.Viewer = *rel.manager, *rel.viewer
	}
	static, err := fs.Sub(embedded, "files")
	if err != nil {
		return nil, err
	}
	err = fs.WalkDir(static, ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := fs.ReadFile(static, p)
		if err != nil {
			return err
		}
		name, isTemplate := strings.CutSuffix(p, ".gotmpl")
		if isTemplate {
			if data, err = execute(p, data, d); err != nil {
				return err
			}
		}
		files[name] = data
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(d.Dashboards) > 0 {
		files["templates/monitoring/configmap-trellis-grafana-dashboards.yaml"] = files["templates/monitoring/dashboards.yaml"]
	}
	delete(files, "templates/monitoring/dashboards.yaml")
	return files, nil
}

var funcs = template.FuncMap{"indent": indentLines, "json": toJSON}

// toJSON is v as compact JSON, for values.schema.json ([] for no strings).
func toJSON(v any) (string, error) {
	if l, ok := v.([]string); ok && l == nil {
		v = []string{}
	}
	data, err := json.Marshal(v)
	return string(data), err
}

// indentLines indents every line of s by n spaces.
func indentLines(n int, s string) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pad)
}

func execute(name string, text []byte, d *chartDefaults) ([]byte, error) {
	t, err := template.New(name).Delims("[[", "]]").Funcs(funcs).Option("missingkey=error").Parse(string(text))
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, d); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// monitoringObjects are config/prometheus' objects: `kustomize build` when
// it is a kustomization, its YAML files as they are otherwise, none when it
// does not exist.
func monitoringObjects(kustomize, dir string) ([]map[string]any, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if _, err := os.Stat(filepath.Join(dir, "kustomization.yaml")); err == nil {
		built, err := kustomizeBuild(kustomize, dir)
		if err != nil {
			return nil, err
		}
		return splitObjects(built)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var all []map[string]any
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		objs, err := splitObjects(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		all = append(all, objs...)
	}
	return all, nil
}

// bucketEventsComponent reads config/bucket-events: the objects it adds
// (marked for the gate) and, into d, the flags and ports its patch adds to
// the manager container. The component's names are final (it applies over
// config/default's output), as the chart's are.
func bucketEventsComponent(dir string, d *chartDefaults) ([]map[string]any, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	patch, err := os.ReadFile(filepath.Join(dir, "manager_patch.yaml"))
	if err != nil {
		return nil, err
	}
	var ops []struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	if err := yaml.Unmarshal(patch, &ops); err != nil {
		return nil, fmt.Errorf("config/bucket-events/manager_patch.yaml: %w", err)
	}
	for _, op := range ops {
		switch {
		case op.Op == "add" && op.Path == "/spec/template/spec/containers/0/args/-":
			d.bucketEvents.args = append(d.bucketEvents.args, fmt.Sprint(op.Value))
		case op.Op == "add" && op.Path == "/spec/template/spec/containers/0/ports/-":
			d.bucketEvents.ports = append(d.bucketEvents.ports, op.Value)
		default:
			return nil, fmt.Errorf("config/bucket-events/manager_patch.yaml: %s %s is not a manager flag or port: teach hack/chart about it", op.Op, op.Path)
		}
	}
	service, err := os.ReadFile(filepath.Join(dir, "service.yaml"))
	if err != nil {
		return nil, err
	}
	objs, err := splitObjects(service)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		o[bucketEventsMark] = true
	}
	d.BucketEvents = true
	return objs, nil
}

// bucketEventsMark marks, while the chart is made, an object of
// config/bucket-events.
const bucketEventsMark = "\x00bucketEvents"

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

func splitObjects(manifests []byte) ([]map[string]any, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(manifests)))
	var objs []map[string]any
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		var o map[string]any
		if err := yaml.Unmarshal(doc, &o); err != nil {
			return nil, err
		}
		if len(o) > 0 {
			objs = append(objs, o)
		}
	}
}

func category(o map[string]any) string {
	group, _, _ := strings.Cut(fmt.Sprint(o["apiVersion"]), "/")
	switch {
	case o[monitoringMark] == true:
		return "monitoring"
	case o["kind"] == kindCRD:
		return "crd"
	case group == "rbac.authorization.k8s.io" || o["kind"] == "ServiceAccount":
		return "rbac"
	case group == "admissionregistration.k8s.io":
		return "admission"
	case group == "monitoring.coreos.com":
		return "monitoring"
	default:
		return "manager"
	}
}

func fileName(o map[string]any) string {
	switch o["kind"] {
	case kindCRD:
		return str(o, "metadata", "name") + ".yaml"
	case kindNamespace:
		return "namespace.yaml" // named after the release's
	}
	return strings.ToLower(fmt.Sprint(o["kind"])) + "-" + str(o, "metadata", "name") + ".yaml"
}

// placeholders stand in an object, marshalled as YAML, for what becomes
// template text: a value (`key: TOKEN`), a list item (`- TOKEN`) or a block
// at a map's level (`TOKEN: ""`). Tokens sort after every real key.
type placeholders struct {
	fill map[string]func(indent, key string) string
}

// value is a placeholder for `key: TEXT`.
func (p *placeholders) value(text string) string {
	return p.add(func(indent, key string) string { return indent + key + ": " + text })
}

func (p *placeholders) add(f func(indent, key string) string) string {
	if p.fill == nil {
		p.fill = map[string]func(indent, key string) string{}
	}
	token := fmt.Sprintf("zzhelmplaceholder%d", len(p.fill))
	p.fill[token] = f
	return token
}

var placeholderLine = regexp.MustCompile(`^(\s*)(?:(- )|(\S[^:]*): )?(zzhelmplaceholder\d+)(: "")?$`)

// replace puts each placeholder's template text in the marshalled object.
func (p *placeholders) replace(text string) (string, error) {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if !strings.Contains(l, "zzhelmplaceholder") {
			continue
		}
		m := placeholderLine.FindStringSubmatch(l)
		if m == nil || p.fill[m[4]] == nil {
			return "", fmt.Errorf("placeholder in an unexpected place: %q", l)
		}
		key := m[3]
		if m[2] != "" {
			key = "-"
		}
		lines[i] = p.fill[m[4]](m[1], key)
	}
	return strings.Join(lines, "\n"), nil
}

// addEntries puts the map value's entries in parent[key], after config's;
// where config has none, key is rendered only when value is not empty.
func addEntries(p *placeholders, parent map[string]any, key, value string) {
	if m, ok := parent[key].(map[string]any); ok && len(m) > 0 {
		m[p.add(func(indent, _ string) string {
			return fmt.Sprintf("{{- with %s }}\n%s{{- toYaml . | nindent %d }}\n{{- end }}", value, indent, len(indent))
		})] = ""
		return
	}
	delete(parent, key)
	blk := block(value)
	parent[p.add(func(indent, _ string) string { return blk(indent, key) })] = ""
}

// block is a value rendered as a YAML block under key, omitted when empty.
func block(value string) func(indent, key string) string {
	return func(indent, key string) string {
		return fmt.Sprintf("{{- with %s }}\n%s%s:\n%s  {{- toYaml . | nindent %d }}\n{{- end }}", value, indent, key, indent, len(indent)+2)
	}
}

// templateOf turns one object into a template, recording config's values
// of what becomes .Values in d.
func templateOf(o map[string]any, ns string, n *naming, d *chartDefaults) ([]byte, error) {
	var p placeholders
	meta := o["metadata"].(map[string]any)
	labels, _ := meta["labels"].(map[string]any)
	if labels == nil {
		labels = map[string]any{}
		meta["labels"] = labels
	}
	delete(labels, "app.kubernetes.io/managed-by") // Helm's, below
	labels[p.add(func(indent, _ string) string {
		return fmt.Sprintf(`%s{{- include "trellis.labels" . | nindent %d }}`, indent, len(indent))
	})] = ""
	inNamespace := func(indent, key string) string { return indent + key + ": {{ .Release.Namespace }}" }
	if meta["namespace"] != nil {
		meta["namespace"] = p.add(inNamespace)
	}
	if subjects, ok := o["subjects"].([]any); ok {
		for _, s := range subjects {
			if s := s.(map[string]any); s["namespace"] == ns {
				s["namespace"] = p.add(inNamespace)
			}
		}
	}

	gate, first, keep, err := templateKind(o, &p, n, d)
	if err != nil {
		return nil, err
	}
	if o[bucketEventsMark] == true {
		delete(o, bucketEventsMark)
		gate = gateBucketEvents
	}
	if o[monitoringMark] == true {
		delete(o, monitoringMark)
		if gate, err = monitoringGate(o, n, d); err != nil {
			return nil, err
		}
	}
	if err := n.rename(o, &p); err != nil {
		return nil, err
	}
	if keep {
		ann, _ := meta["annotations"].(map[string]any)
		if ann == nil {
			ann = map[string]any{}
			meta["annotations"] = ann
		}
		ann[keepAnnotation] = "keep"
	}

	y, err := yaml.Marshal(o)
	if err != nil {
		return nil, err
	}
	text, err := p.replace(escapeTemplates(string(y)))
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString("{{- /* Generated by hack/chart from config/ (make chart): change config/, not this file. */ -}}\n")
	if gate != "" {
		fmt.Fprintf(&b, "{{- if %s }}\n", gate)
	}
	if first != "" {
		b.WriteString(first + "\n")
	}
	b.WriteString(strings.TrimRight(text, "\n") + "\n")
	if gate != "" {
		b.WriteString("{{- end }}\n")
	}
	return []byte(b.String()), nil
}

// templateKind makes values of what an object of its kind offers, and
// says whether it is rendered behind a gate (and what comes first within
// it) and kept on uninstall.
func templateKind(o map[string]any, p *placeholders, n *naming, d *chartDefaults) (gate, first string, keep bool, err error) {
	meta := o["metadata"].(map[string]any)
	switch o["kind"] {
	case kindNamespace:
		meta["name"] = p.add(func(indent, key string) string { return indent + key + ": {{ .Release.Namespace }}" })
		return gateNamespace, "", true, nil
	case kindCRD, kindVAP:
		return "", "", true, nil
	case kindVAPBinding:
		return "", "", true, templateValidationActions(o, p, d)
	case kindMAP, kindMAPBinding:
		gate, first, err = mutatingPolicyGate(o, d)
		return gate, first, false, err
	case "PodDisruptionBudget":
		spec := o["spec"].(map[string]any)
		if v, ok := spec["minAvailable"]; ok {
			d.PDB, d.PDBMinAvailable = true, fmt.Sprint(v)
			spec["minAvailable"] = p.add(func(indent, key string) string {
				return indent + key + ": {{ .Values.podDisruptionBudget.minAvailable }}"
			})
		}
		return gatePDB, "", false, nil
	case kindServiceAccount:
		if str(o, "metadata", "name") == n.managerSA {
			addEntries(p, meta, "annotations", ".Values.serviceAccount.annotations")
			return gateServiceAccount, "", false, nil
		}
	case kindDeployment:
		return "", "", false, templateDeployment(o, p, d)
	case kindServiceMonitor:
		return "", "", false, templateServiceMonitor(o, p, n, d)
	case kindPrometheusRule:
		labelsFrom(p, meta, ".Values.monitoring.prometheusRule.labels")
	}
	return "", "", false, nil
}

// escapeTemplates keeps "{{" and "}}" in config's text (alert templates,
// descriptions) from being read as Helm's.
func escapeTemplates(s string) string {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "{{", "\x00"), "}}", "\x01")
	return strings.ReplaceAll(strings.ReplaceAll(s, "\x00", `{{ "{{" }}`), "\x01", `{{ "}}" }}`)
}

// templateDeployment makes values of the manager's replicas, image, flags,
// resources and placement.
func templateDeployment(o map[string]any, p *placeholders, d *chartDefaults) error {
	spec := o["spec"].(map[string]any)
	pod := spec["template"].(map[string]any)["spec"].(map[string]any)
	var c map[string]any
	for _, x := range pod["containers"].([]any) {
		if x := x.(map[string]any); x["name"] == managerName {
			c = x
		}
	}
	if c == nil {
		return fmt.Errorf("no container %q", managerName)
	}
	if d.Image.Repository != "" {
		return errors.New("a second manager Deployment")
	}
	replicas, ok := spec["replicas"].(float64)
	if !ok {
		return errors.New("no spec.replicas")
	}
	d.Replicas = int64(replicas)
	spec["replicas"] = p.add(func(indent, key string) string { return indent + key + ": {{ .Values.replicas }}" })

	d.Image = parseImageRef(fmt.Sprint(c["image"]))
	c["image"] = p.add(func(indent, key string) string {
		return indent + key + `: {{ include "trellis.image" .Values.image | quote }}`
	})
	if v, ok := c["imagePullPolicy"]; ok {
		return fmt.Errorf("imagePullPolicy %v in config: the chart's image.pullPolicy would not default to it", v)
	}
	c[p.add(func(indent, _ string) string {
		return fmt.Sprintf("{{- with .Values.image.pullPolicy }}\n%simagePullPolicy: {{ . }}\n{{- end }}", indent)
	})] = ""

	args, _ := c["args"].([]any)
	found, leader := false, false
	for i, a := range args {
		if fmt.Sprint(a) == "--leader-elect" {
			// A shard of a ControllerRing holds a Lease of its own instead.
			leader = true
			args[i] = p.add(func(indent, _ string) string {
				return fmt.Sprintf("{{- if .Values.controllerRing }}\n%s- {{ printf \"--controller-ring=%%s\" .Values.controllerRing | quote }}\n{{- else }}\n%s- --leader-elect\n{{- end }}", indent, indent)
			})
		}
		if v, ok := strings.CutPrefix(fmt.Sprint(a), viewerImageFlag); ok {
			d.Viewer, found = parseImageRef(v), true
			args[i] = p.add(func(indent, _ string) string {
				return indent + `- {{ printf "--viewer-image=%s" (include "trellis.image" .Values.viewerImage) | quote }}`
			})
		}
	}
	if !found {
		return fmt.Errorf("the manager has no %s flag", viewerImageFlag)
	}
	if !leader {
		return errors.New("the manager has no --leader-elect flag")
	}
	c["args"] = append(args, p.add(func(indent, _ string) string {
		item := func(value, flag string) string {
			return fmt.Sprintf("{{- with %s }}\n%s- {{ printf \"%s=%%s\" %s | quote }}\n{{- end }}", value, indent, flag, "(join \",\" .)")
		}
		return strings.Join([]string{
			item(".Values.viewerImageAllow", "--viewer-image-allow"),
			item(".Values.artifactHosts", "--artifact-hosts"),
			item(".Values.controllers", "--controllers"),
			fmt.Sprintf("{{- with .Values.logLevel }}\n%s- {{ printf \"--zap-log-level=%%v\" . | quote }}\n{{- end }}", indent),
			fmt.Sprintf("{{- range .Values.extraArgs }}\n%s- {{ . | quote }}\n{{- end }}", indent),
		}, "\n")
	}))
	if len(d.bucketEvents.args) > 0 {
		c["args"] = append(c["args"].([]any), p.add(gatedItems(d.bucketEvents.args)))
	}
	if len(d.bucketEvents.ports) > 0 {
		ports, _ := c["ports"].([]any)
		c["ports"] = append(ports, p.add(gatedItems(d.bucketEvents.ports)))
	}

	if r, ok := c["resources"]; ok {
		y, err := yaml.Marshal(r)
		if err != nil {
			return err
		}
		d.Resources = string(y)
	} else {
		d.Resources = "{}\n"
	}
	c["resources"] = p.add(block(".Values.resources"))

	return templatePod(spec, pod, c, p, d)
}

// templatePod makes values of the manager pod's labels, annotations,
// priority, placement, environment and volumes. Each adds to config's.
func templatePod(spec, pod, c map[string]any, p *placeholders, d *chartDefaults) error {
	meta := spec["template"].(map[string]any)["metadata"].(map[string]any)
	labels, _ := meta["labels"].(map[string]any)
	if len(labels) == 0 {
		return errors.New("the manager's pods have no labels")
	}
	d.PodLabelKeys = sortedMapKeys(labels)
	labels[p.add(func(indent, _ string) string {
		// podLabels over commonLabels where both set one.
		return fmt.Sprintf("{{- with merge (dict) .Values.podLabels .Values.commonLabels }}\n%s{{- toYaml . | nindent %d }}\n{{- end }}", indent, len(indent))
	})] = ""
	annotations, _ := meta["annotations"].(map[string]any)
	d.PodAnnotationKeys = sortedMapKeys(annotations)
	addEntries(p, meta, "annotations", ".Values.podAnnotations")

	if v, ok := pod["priorityClassName"]; ok {
		d.PriorityClassName = fmt.Sprint(v)
		delete(pod, "priorityClassName")
	}
	pod[p.add(func(indent, _ string) string {
		return fmt.Sprintf("{{- with .Values.priorityClassName }}\n%spriorityClassName: {{ . | quote }}\n{{- end }}", indent)
	})] = ""

	env, _ := c["env"].([]any)
	for _, e := range env {
		d.EnvNames = append(d.EnvNames, fmt.Sprint(e.(map[string]any)["name"]))
	}
	appendItems(p, c, "env", ".Values.extraEnv")
	appendItems(p, c, "volumeMounts", ".Values.extraVolumeMounts")
	appendItems(p, pod, "volumes", ".Values.extraVolumes")

	selector, ok := spec["selector"].(map[string]any)["matchLabels"].(map[string]any)
	if !ok || len(spec["selector"].(map[string]any)) != 1 {
		return errors.New("the Deployment's selector is not matchLabels alone")
	}
	for _, name := range podBlocks {
		def := " {}"
		if name == "imagePullSecrets" || name == "tolerations" || name == spreadField {
			def = " []"
		}
		if v, ok := pod[name]; ok {
			if name == spreadField {
				v = withoutSelector(v.([]any), selector)
			}
			y, err := yaml.Marshal(v)
			if err != nil {
				return err
			}
			def = "\n" + indentLines(2, string(y))
			delete(pod, name)
		}
		d.PodBlocks[name] = def
		blk := block(".Values." + name)
		if name == spreadField {
			blk = spreadBlock(selector)
		}
		pod[p.add(func(indent, _ string) string { return blk(indent, name) })] = ""
	}
	return nil
}

// withoutSelector is constraints without the labelSelector of those that
// select the Deployment's pods: spreadBlock puts it back, with the
// release's app label (nameOverride), so the default in values.yaml needs
// no name.
func withoutSelector(constraints []any, selector map[string]any) []any {
	for _, c := range constraints {
		c := c.(map[string]any)
		if reflect.DeepEqual(c["labelSelector"], map[string]any{"matchLabels": selector}) {
			delete(c, "labelSelector")
		}
	}
	return constraints
}

// spreadBlock renders topologySpreadConstraints, each item without a
// labelSelector given the one of the Deployment's selector.
func spreadBlock(selector map[string]any) func(indent, key string) string {
	pairs := make([]string, 0, len(selector))
	for _, k := range sortedMapKeys(selector) {
		v := strconv.Quote(fmt.Sprint(selector[k]))
		if k == nameLabel {
			v = `(include "trellis.name" $)`
		}
		pairs = append(pairs, strconv.Quote(k)+" "+v)
	}
	return func(indent, key string) string {
		return fmt.Sprintf(`{{- $spread := list }}
{{- range .Values.topologySpreadConstraints }}
{{- if hasKey . "labelSelector" }}
{{- $spread = append $spread . }}
{{- else }}
{{- $spread = append $spread (set (deepCopy .) "labelSelector" (dict "matchLabels" (dict %s))) }}
{{- end }}
{{- end }}
{{- with $spread }}
%s%s:
%s  {{- toYaml . | nindent %d }}
{{- end }}`, strings.Join(pairs, " "), indent, key, indent, len(indent)+2)
	}
}

// appendItems puts the list value's items in parent[key], after config's;
// where config has none, key is rendered only when value is not empty.
func appendItems(p *placeholders, parent map[string]any, key, value string) {
	if list, ok := parent[key].([]any); ok && len(list) > 0 {
		parent[key] = append(list, p.add(func(indent, _ string) string {
			return fmt.Sprintf("{{- with %s }}\n%s{{- toYaml . | nindent %d }}\n{{- end }}", value, indent, len(indent))
		}))
		return
	}
	delete(parent, key)
	blk := block(value)
	parent[p.add(func(indent, _ string) string { return blk(indent, key) })] = ""
}

func sortedMapKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// gatedItems renders list items behind bucketEvents.enabled, in the
// list's indentation.
func gatedItems[T any](items []T) func(indent, _ string) string {
	return func(indent, _ string) string {
		y, err := yaml.Marshal(items)
		if err != nil {
			panic(err) // strings and YAML maps read from a file
		}
		return fmt.Sprintf("{{- if %s }}\n%s\n{{- end }}", gateBucketEvents, strings.TrimRight(indentLines(len(indent), string(y)), "\n"))
	}
}

func str(o map[string]any, keys ...string) string {
	var v any = o
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[k]
	}
	s, _ := v.(string)
	return s
}

// writeChart replaces dir with files.
func writeChart(dir string, files map[string][]byte) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	for _, name := range sortedKeys(files) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, files[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
