package main

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
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
	viewerImageFlag = "--viewer-image="
	kindCRD         = "CustomResourceDefinition"
	kindNamespace   = "Namespace"
	managerName     = "manager" // config/manager's container
	// A gate's value names: the object is rendered only when it is true.
	gateNamespace      = ".Values.namespace.create"
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
var podBlocks = []string{"imagePullSecrets", "nodeSelector", "affinity", "tolerations"}

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
}

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
	files := map[string][]byte{}
	for _, o := range append(append(objects, monitoring...), events...) {
		p := path.Join("templates", category(o), fileName(o))
		t, err := templateOf(o, ns, d)
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

var funcs = template.FuncMap{"indent": indentLines}

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

// block is a value rendered as a YAML block under key, omitted when empty.
func block(value string) func(indent, key string) string {
	return func(indent, key string) string {
		return fmt.Sprintf("{{- with %s }}\n%s%s:\n%s  {{- toYaml . | nindent %d }}\n{{- end }}", value, indent, key, indent, len(indent)+2)
	}
}

// templateOf turns one object into a template, recording config's values
// of what becomes .Values in d.
func templateOf(o map[string]any, ns string, d *chartDefaults) ([]byte, error) {
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

	gate := ""
	keep := false
	if o[bucketEventsMark] == true {
		delete(o, bucketEventsMark)
		gate = gateBucketEvents
	}
	switch o["kind"] {
	case kindNamespace:
		meta["name"] = p.add(inNamespace)
		gate, keep = gateNamespace, true
	case kindCRD:
		keep = true
	case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
		keep = true
	case "PodDisruptionBudget":
		spec := o["spec"].(map[string]any)
		if v, ok := spec["minAvailable"]; ok {
			d.PDB, d.PDBMinAvailable = true, fmt.Sprint(v)
			spec["minAvailable"] = p.add(func(indent, key string) string {
				return indent + key + ": {{ .Values.podDisruptionBudget.minAvailable }}"
			})
		}
		gate = gatePDB
	case "Deployment":
		if err := templateDeployment(o, &p, d); err != nil {
			return nil, err
		}
	case "ServiceMonitor":
		gate, d.ServiceMonitor = gateServiceMonitor, true
	case "PrometheusRule":
		gate, d.PrometheusRule = gatePrometheusRule, true
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
	b.WriteString(strings.TrimRight(text, "\n") + "\n")
	if gate != "" {
		b.WriteString("{{- end }}\n")
	}
	return []byte(b.String()), nil
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
	found := false
	for i, a := range args {
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
	c["args"] = append(args, p.add(func(indent, _ string) string {
		item := func(value, flag string) string {
			return fmt.Sprintf("{{- with %s }}\n%s- {{ printf \"%s=%%s\" %s | quote }}\n{{- end }}", value, indent, flag, "(join \",\" .)")
		}
		return strings.Join([]string{
			item(".Values.viewerImageAllow", "--viewer-image-allow"),
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

	for _, name := range podBlocks {
		def := " {}"
		if name == "imagePullSecrets" || name == "tolerations" {
			def = " []"
		}
		if v, ok := pod[name]; ok {
			y, err := yaml.Marshal(v)
			if err != nil {
				return err
			}
			def = "\n" + indentLines(2, string(y))
			delete(pod, name)
		}
		d.PodBlocks[name] = def
		blk := block(".Values." + name)
		pod[p.add(func(indent, _ string) string { return blk(indent, name) })] = ""
	}
	return nil
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
