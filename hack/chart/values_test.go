package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// The values a platform review asks for (names, labels, the ServiceAccount,
// the pods' placement and environment, the ServiceMonitor, the admission
// policies), each rendered by `helm template` and checked where it lands.

const (
	chartDir = "../../charts/trellis"
	// defaultName is the release helmTemplate renders, and config's
	// app.kubernetes.io/name: the default of the names.
	defaultName = "trellis"
	team        = "platform"
)

// labelsOf is an object's metadata.labels.
func labelsOf(o map[string]any) map[string]any {
	labels, _ := o["metadata"].(map[string]any)["labels"].(map[string]any)
	return labels
}

// podTemplate is the manager Deployment's pod template.
func podTemplate(t *testing.T, objs map[string]map[string]any, deployment string) map[string]any {
	t.Helper()
	d := objs[deployment]
	if d == nil {
		t.Fatalf("no %s in %v", deployment, keys(objs))
	}
	return d["spec"].(map[string]any)["template"].(map[string]any)
}

// dangling lists the references no rendered object answers: a binding's
// role and ServiceAccounts, a policy binding's policy, the Deployment's
// ServiceAccount, a token Secret's ServiceAccount, the ServiceMonitor's
// Secret. except are references expected to point outside the chart.
func dangling(objs map[string]map[string]any, except ...string) []string {
	has := func(kind, ns, name string) bool { return objs[kind+" "+ns+"/"+name] != nil }
	var missing []string
	check := func(from, kind, ns, name string) {
		ref := kind + " " + ns + "/" + name
		if !has(kind, ns, name) && !contains(except, ref) {
			missing = append(missing, from+" -> "+ref)
		}
	}
	for key, o := range objs {
		ns := str(o, "metadata", "namespace")
		if r, ok := o["roleRef"].(map[string]any); ok {
			roleNS := ns
			if r["kind"] == "ClusterRole" {
				roleNS = ""
			}
			check(key, fmt.Sprint(r["kind"]), roleNS, fmt.Sprint(r["name"]))
		}
		if subjects, ok := o["subjects"].([]any); ok {
			for _, s := range subjects {
				s := s.(map[string]any)
				check(key, fmt.Sprint(s["kind"]), fmt.Sprint(s["namespace"]), fmt.Sprint(s["name"]))
			}
		}
		switch o["kind"] {
		case "ValidatingAdmissionPolicyBinding":
			check(key, "ValidatingAdmissionPolicy", "", str(o, "spec", "policyName"))
		case "MutatingAdmissionPolicyBinding":
			check(key, "MutatingAdmissionPolicy", "", str(o, "spec", "policyName"))
		case "Deployment":
			check(key, kindServiceAccount, ns, str(o, "spec", "template", "spec", "serviceAccountName"))
		case kindSecret:
			if sa := str(o, "metadata", "annotations", tokenSecretAnnotation); sa != "" {
				check(key, kindServiceAccount, ns, sa)
			}
		case "ServiceMonitor":
			for _, e := range o["spec"].(map[string]any)["endpoints"].([]any) {
				if name := str(e.(map[string]any), "authorization", "credentials", "name"); name != "" {
					check(key, kindSecret, ns, name)
				}
			}
		}
	}
	sort.Strings(missing)
	return missing
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestNames: fullnameOverride renames every object but the CRDs and the
// namespace, nameOverride also the app label in every object and selector,
// and every reference follows; by default the names are config's whatever
// the release is called.
func TestNames(t *testing.T) {
	config := keys(kustomizeDefault(t))
	sort.Strings(config)
	other := exec.Command(tool(t, "helm"), "template", "platform", chartDir, "--namespace", "trellis-system", "--skip-tests")
	out, err := other.Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(byName(t, out)); !reflect.DeepEqual(got, config) {
		t.Errorf("release platform renders\n  %v\nwant config's names\n  %v", got, config)
	}

	for name, tc := range map[string]struct {
		set         []string
		prefix, app string
	}{
		"fullnameOverride": {set: []string{"--set", "fullnameOverride=platform-trellis"}, prefix: "platform-trellis-", app: defaultName},
		"nameOverride":     {set: []string{"--set", "nameOverride=tr"}, prefix: "tr-", app: "tr"},
		"both":             {set: []string{"--set", "nameOverride=tr,fullnameOverride=ops"}, prefix: "ops-", app: "tr"},
	} {
		t.Run(name, func(t *testing.T) {
			objs := helmTemplate(t, chartDir, append(tc.set, "--set", "monitoring.serviceMonitor.enabled=true,monitoring.prometheusRule.enabled=true,monitoring.dashboard.enabled=true,bucketEvents.enabled=true")...)
			for key, o := range objs {
				n := str(o, "metadata", "name")
				switch o["kind"] {
				case kindCRD:
					if !strings.HasSuffix(n, ".trellis.dev") {
						t.Errorf("%s renamed", key)
					}
				case kindNamespace:
					if n != "trellis-system" {
						t.Errorf("%s: the namespace is the release's", key)
					}
				default:
					if !strings.HasPrefix(n, tc.prefix) {
						t.Errorf("%s is not named %s…", key, tc.prefix)
					}
				}
				if v, ok := labelsOf(o)[nameLabel]; ok && v != tc.app {
					t.Errorf("%s: %s=%v, want %s", key, nameLabel, v, tc.app)
				}
			}
			if missing := dangling(objs); len(missing) > 0 {
				t.Errorf("references to nothing:\n  %s", strings.Join(missing, "\n  "))
			}
			d := tc.prefix + "controller-manager"
			pod := podTemplate(t, objs, "Deployment trellis-system/"+d)
			selector := objs["Deployment trellis-system/"+d]["spec"].(map[string]any)["selector"].(map[string]any)["matchLabels"].(map[string]any)
			if selector[nameLabel] != tc.app || pod["metadata"].(map[string]any)["labels"].(map[string]any)[nameLabel] != tc.app {
				t.Errorf("the Deployment selects %v, its pods are labelled %v", selector, pod["metadata"])
			}
			for _, svc := range []string{"controller-manager-metrics", "bucket-events"} {
				if got := str(objs["Service trellis-system/"+tc.prefix+svc], "spec", "selector", nameLabel); got != tc.app {
					t.Errorf("Service %s selects %s=%q", svc, nameLabel, got)
				}
			}
			spread := pod["spec"].(map[string]any)["topologySpreadConstraints"].([]any)[0].(map[string]any)
			if got := str(spread, "labelSelector", "matchLabels", nameLabel); got != tc.app {
				t.Errorf("the default topology spread selects %s=%q", nameLabel, got)
			}
			// The job label the alerts select stays "trellis".
			monitor := objs["ServiceMonitor trellis-system/"+tc.prefix+"controller-manager-metrics"]
			job := str(monitor, "spec", "jobLabel")
			if got := str(objs["Service trellis-system/"+tc.prefix+"controller-manager-metrics"], "metadata", "labels", job); got != defaultName {
				t.Errorf("the ServiceMonitor's job label (%s) is %q, the alerts select trellis", job, got)
			}
		})
	}
}

// TestCommonLabels: commonLabels are on every object and on the manager's
// pods; podLabels and podAnnotations on the pods alone.
func TestCommonLabels(t *testing.T) {
	objs := helmTemplate(t, chartDir, "--set", "commonLabels.team="+team+",commonLabels.cost-centre=42a",
		"--set-string", "podLabels.sidecar\\.istio\\.io/inject=false", "--set", "podAnnotations.example\\.com/scrape=no",
		"--set", "monitoring.serviceMonitor.enabled=true,monitoring.prometheusRule.enabled=true,monitoring.dashboard.enabled=true,bucketEvents.enabled=true")
	for key, o := range objs {
		if l := labelsOf(o); l["team"] != team || l["cost-centre"] != "42a" {
			t.Errorf("%s: labels %v", key, l)
		}
		if _, ok := labelsOf(o)["sidecar.istio.io/inject"]; ok {
			t.Errorf("%s carries a label of the pods", key)
		}
	}
	pod := podTemplate(t, objs, "Deployment trellis-system/trellis-controller-manager")["metadata"].(map[string]any)
	labels, annotations := pod["labels"].(map[string]any), pod["annotations"].(map[string]any)
	if labels["team"] != team || labels["sidecar.istio.io/inject"] != "false" || labels[nameLabel] != defaultName {
		t.Errorf("pod labels %v", labels)
	}
	if annotations["example.com/scrape"] != "no" || annotations["kubectl.kubernetes.io/default-container"] != "manager" {
		t.Errorf("pod annotations %v", annotations)
	}
	// A pod label of the same name as a common label wins on the pods.
	objs = helmTemplate(t, chartDir, "--set", "commonLabels.tier=platform,podLabels.tier=control")
	if got := podTemplate(t, objs, "Deployment trellis-system/trellis-controller-manager")["metadata"].(map[string]any)["labels"].(map[string]any)["tier"]; got != "control" {
		t.Errorf("tier on the pods: %v, want podLabels' control", got)
	}
}

// TestServiceAccountValues: the manager's ServiceAccount is annotated,
// renamed or left to the user; the Deployment and every binding follow.
func TestServiceAccountValues(t *testing.T) {
	const sa = "ServiceAccount trellis-system/trellis-controller-manager"
	objs := helmTemplate(t, chartDir, "--set", "serviceAccount.annotations.iam\\.gke\\.io/gcp-service-account=trellis@p.iam.gserviceaccount.com")
	if got := str(objs[sa], "metadata", "annotations", "iam.gke.io/gcp-service-account"); got != "trellis@p.iam.gserviceaccount.com" {
		t.Errorf("the ServiceAccount's annotations: %v", objs[sa]["metadata"])
	}

	objs = helmTemplate(t, chartDir, "--set", "serviceAccount.name=trellis-wi")
	if objs["ServiceAccount trellis-system/trellis-wi"] == nil || objs[sa] != nil {
		t.Errorf("serviceAccount.name=trellis-wi renders %v", keys(objs))
	}
	if missing := dangling(objs); len(missing) > 0 {
		t.Errorf("references to nothing:\n  %s", strings.Join(missing, "\n  "))
	}

	objs = helmTemplate(t, chartDir, "--set", "serviceAccount.create=false,serviceAccount.name=made-by-us")
	for key := range objs {
		if strings.HasPrefix(key, "ServiceAccount ") {
			t.Errorf("%s rendered with serviceAccount.create=false", key)
		}
	}
	// Everything points at the user's ServiceAccount, and at nothing else missing.
	if missing := dangling(objs, "ServiceAccount trellis-system/made-by-us"); len(missing) > 0 {
		t.Errorf("references to nothing:\n  %s", strings.Join(missing, "\n  "))
	}
	if got := str(podTemplate(t, objs, "Deployment trellis-system/trellis-controller-manager"), "spec", "serviceAccountName"); got != "made-by-us" {
		t.Errorf("the manager runs as %q", got)
	}
}

// TestPodValues: priorityClassName, the extra environment and volumes, and
// the topology spread: soft by default, each item given the pods' selector
// unless it has one, replaced as a whole by the value.
func TestPodValues(t *testing.T) {
	const deployment = "Deployment trellis-system/trellis-controller-manager"
	defaults := podTemplate(t, helmTemplate(t, chartDir), deployment)["spec"].(map[string]any)
	wantSpread := []any{map[string]any{
		"maxSkew": 1.0, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
		"matchLabelKeys": []any{"pod-template-hash"},
		"labelSelector":  map[string]any{"matchLabels": map[string]any{nameLabel: defaultName, "app.kubernetes.io/component": "manager"}},
	}}
	if got := defaults["topologySpreadConstraints"]; !reflect.DeepEqual(got, wantSpread) {
		t.Errorf("default topology spread %v, want %v", got, wantSpread)
	}
	for _, field := range []string{"priorityClassName", "volumes"} {
		if v, ok := defaults[field]; ok {
			t.Errorf("%s rendered by default: %v", field, v)
		}
	}

	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte(`
priorityClassName: platform-critical
extraEnv:
- name: HTTPS_PROXY
  value: http://proxy.example.com:3128
- name: SSL_CERT_FILE
  value: /etc/trellis/ca/ca.crt
extraVolumes:
- name: ca
  configMap: {name: corporate-ca}
extraVolumeMounts:
- name: ca
  mountPath: /etc/trellis/ca
  readOnly: true
topologySpreadConstraints:
- maxSkew: 1
  topologyKey: kubernetes.io/hostname
  whenUnsatisfiable: DoNotSchedule
- maxSkew: 1
  topologyKey: topology.kubernetes.io/zone
  whenUnsatisfiable: ScheduleAnyway
  labelSelector: {matchLabels: {tier: control}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	pod := podTemplate(t, helmTemplate(t, chartDir, "-f", values), deployment)["spec"].(map[string]any)
	c := pod["containers"].([]any)[0].(map[string]any)
	if pod["priorityClassName"] != "platform-critical" {
		t.Errorf("priorityClassName %v", pod["priorityClassName"])
	}
	env := make([]string, 0, 4)
	for _, e := range c["env"].([]any) {
		env = append(env, fmt.Sprint(e.(map[string]any)["name"]))
	}
	if want := []string{"POD_NAMESPACE", "POD_NAME", "HTTPS_PROXY", "SSL_CERT_FILE"}; !reflect.DeepEqual(env, want) {
		t.Errorf("env %v, want config's then extraEnv: %v", env, want)
	}
	if v := pod["volumes"].([]any); len(v) != 1 || str(v[0].(map[string]any), "configMap", "name") != "corporate-ca" {
		t.Errorf("volumes %v", pod["volumes"])
	}
	if m := c["volumeMounts"].([]any); len(m) != 1 || m[0].(map[string]any)["mountPath"] != "/etc/trellis/ca" {
		t.Errorf("volumeMounts %v", c["volumeMounts"])
	}
	spread := pod["topologySpreadConstraints"].([]any)
	if len(spread) != 2 {
		t.Fatalf("topology spread %v", spread)
	}
	if s := spread[0].(map[string]any); s["whenUnsatisfiable"] != "DoNotSchedule" || str(s, "labelSelector", "matchLabels", nameLabel) != defaultName || s["matchLabelKeys"] != nil {
		t.Errorf("the first constraint %v: want the value's, with the pods' selector", s)
	}
	if s := spread[1].(map[string]any); !reflect.DeepEqual(s["labelSelector"], map[string]any{"matchLabels": map[string]any{"tier": "control"}}) {
		t.Errorf("the second constraint's own selector became %v", s["labelSelector"])
	}

	pod = podTemplate(t, helmTemplate(t, chartDir, "--set", "topologySpreadConstraints=null"), deployment)["spec"].(map[string]any)
	if v, ok := pod["topologySpreadConstraints"]; ok {
		t.Errorf("topologySpreadConstraints=null still renders %v", v)
	}
}

// TestSchemaRefusesWrongTypes: each value of this file refuses a value of
// the wrong type or form at install, naming it (a label or annotation the
// chart sets itself by its name: Helm's schema errors place those wrong).
func TestSchemaRefusesWrongTypes(t *testing.T) {
	for _, tc := range []struct{ set, want string }{
		{"nameOverride=Trellis", "/nameOverride"},
		{"fullnameOverride=" + strings.Repeat("x", 40), "/fullnameOverride"},
		{"fullnameOverride=-x", "/fullnameOverride"},
		{"commonLabels.team=true", "/commonLabels/team"},
		{"commonLabels.app\\.kubernetes\\.io/name=x", "invalid propertyName 'app.kubernetes.io/name'"},
		{"serviceAccount.create=yes", "/serviceAccount/create"},
		{"serviceAccount.name=Manager", "/serviceAccount/name"},
		{"serviceAccount.annotations.a=1", "/serviceAccount/annotations/a"},
		{"serviceAccount.automount=false", "/serviceAccount"},
		{"podLabels.a=1", "/podLabels/a"},
		{"podLabels.app\\.kubernetes\\.io/component=x", "invalid propertyName 'app.kubernetes.io/component'"},
		{"podAnnotations.kubectl\\.kubernetes\\.io/default-container=x", "invalid propertyName 'kubectl.kubernetes.io/default-container'"},
		{"priorityClassName=1", "/priorityClassName"},
		{"extraEnv[0].value=x", "/extraEnv/0"},
		{"extraEnv[0].name=POD_NAME", "/extraEnv/0/name"},
		{"extraVolumes[0].emptyDir=null", "/extraVolumes/0"},
		{"extraVolumeMounts[0].name=ca", "/extraVolumeMounts/0"},
		{"topologySpreadConstraints[0].maxSkew=1,topologySpreadConstraints[0].topologyKey=zone,topologySpreadConstraints[0].whenUnsatisfiable=Sometimes", "/topologySpreadConstraints/0/whenUnsatisfiable"},
		{"global=1", "/global"},
	} {
		out, err := exec.Command(tool(t, "helm"), "template", "trellis", chartDir, "--set", tc.set).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("--set %s: %v, want an error naming %q:\n%s", tc.set, err, tc.want, out)
		}
	}
}

// TestSubchart: as a dependency of another chart, enabled by a condition
// and given globals, the chart renders what it renders alone.
func TestSubchart(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "platform")
	if out, err := exec.Command("mkdir", "-p", filepath.Join(parent, "charts")).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if out, err := exec.Command("cp", "-r", chartDir, filepath.Join(parent, "charts", "trellis")).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	for name, text := range map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: platform\nversion: 1.0.0\ndependencies:\n- name: trellis\n  version: 0.0.0-dev\n  condition: trellis.enabled\n",
		"values.yaml": "global:\n  imageRegistry: registry.example.com\n  team: platform\ntrellis:\n  enabled: true\n  replicas: 3\n",
	} {
		if err := os.WriteFile(filepath.Join(parent, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	objs := helmTemplate(t, parent)
	d, _, _ := managerOf(t, objs)
	if got := d["spec"].(map[string]any)["replicas"]; got != 3.0 {
		t.Errorf("the subchart's replicas %v, want the parent's 3", got)
	}
	if got, want := len(objs), len(helmTemplate(t, chartDir)); got != want {
		t.Errorf("as a subchart: %d objects, alone %d", got, want)
	}
	if off := helmTemplate(t, parent, "--set", "trellis.enabled=false"); len(off) != 0 {
		t.Errorf("trellis.enabled=false renders %v", keys(off))
	}
}

// TestServiceMonitorValues: the ServiceMonitor's labels, interval, timeout
// and scrape class; the token it sends, by default of the chart's own
// scraper ServiceAccount bound to the metrics reader role, or of the user's
// Secret, or none (a scrape class gives it); the PrometheusRule's labels.
func TestServiceMonitorValues(t *testing.T) {
	const (
		monitor = "ServiceMonitor trellis-system/trellis-controller-manager-metrics"
		sa      = "ServiceAccount trellis-system/trellis-metrics-scraper"
		binding = "ClusterRoleBinding /trellis-metrics-scraper"
		secret  = "Secret trellis-system/trellis-metrics-scraper-token"
		rule    = "PrometheusRule trellis-system/trellis-alerts"
	)
	endpoint := func(t *testing.T, objs map[string]map[string]any) map[string]any {
		t.Helper()
		if objs[monitor] == nil {
			t.Fatalf("no %s in %v", monitor, keys(objs))
		}
		return objs[monitor]["spec"].(map[string]any)["endpoints"].([]any)[0].(map[string]any)
	}
	on := []string{"--set", "monitoring.serviceMonitor.enabled=true"}

	objs := helmTemplate(t, chartDir, on...)
	e := endpoint(t, objs)
	if want := map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "trellis-metrics-scraper-token", "key": "token"}}; !reflect.DeepEqual(e["authorization"], want) {
		t.Errorf("authorization %v, want %v", e["authorization"], want)
	}
	for _, field := range []string{"bearerTokenFile", "interval", "scrapeTimeout"} {
		if v, ok := e[field]; ok {
			t.Errorf("%s rendered by default: %v", field, v)
		}
	}
	if v, ok := objs[monitor]["spec"].(map[string]any)["scrapeClass"]; ok {
		t.Errorf("scrapeClass rendered by default: %v", v)
	}
	if str(objs[binding], "roleRef", "name") != "trellis-metrics-reader" || objs[sa] == nil || objs[secret]["type"] != tokenSecretType {
		t.Errorf("the scraper: %v, %v, %v", objs[sa], objs[binding], objs[secret])
	}
	if missing := dangling(objs); len(missing) > 0 {
		t.Errorf("references to nothing:\n  %s", strings.Join(missing, "\n  "))
	}

	objs = helmTemplate(t, chartDir, append(on, "--set", "monitoring.serviceMonitor.labels.release=kube-prometheus-stack,monitoring.serviceMonitor.interval=30s,monitoring.serviceMonitor.scrapeTimeout=10s,monitoring.serviceMonitor.scrapeClass=tls",
		"--set", "monitoring.prometheusRule.enabled=true,monitoring.prometheusRule.labels.release=kube-prometheus-stack")...)
	e = endpoint(t, objs)
	if e["interval"] != "30s" || e["scrapeTimeout"] != "10s" || str(objs[monitor], "spec", "scrapeClass") != "tls" {
		t.Errorf("interval %v, scrapeTimeout %v, scrapeClass %v", e["interval"], e["scrapeTimeout"], objs[monitor]["spec"].(map[string]any)["scrapeClass"])
	}
	for _, key := range []string{monitor, rule} {
		if got := labelsOf(objs[key])["release"]; got != "kube-prometheus-stack" {
			t.Errorf("%s: release=%v", key, got)
		}
	}

	for name, tc := range map[string]struct {
		set        string
		secret     string // the Secret the endpoint names, "" none
		key        string
		rendersOwn string // the Secret the chart renders, "" none
	}{
		"the user's Secret":          {"monitoring.serviceMonitor.tokenSecret.create=false,monitoring.serviceMonitor.tokenSecret.name=prometheus-token,monitoring.serviceMonitor.tokenSecret.key=jwt", "prometheus-token", "jwt", ""},
		"none: the scrape class's":   {"monitoring.serviceMonitor.tokenSecret.create=false,monitoring.serviceMonitor.scrapeClass=trellis", "", "", ""},
		"the chart's, named by them": {"monitoring.serviceMonitor.tokenSecret.name=scraper-token", "scraper-token", "token", "Secret trellis-system/scraper-token"},
	} {
		t.Run(name, func(t *testing.T) {
			objs := helmTemplate(t, chartDir, append(on, "--set", tc.set)...)
			e := endpoint(t, objs)
			if got := str(e, "authorization", "credentials", "name"); got != tc.secret || str(e, "authorization", "credentials", "key") != tc.key {
				t.Errorf("the endpoint sends key %q of %q, want %q of %q", str(e, "authorization", "credentials", "key"), got, tc.key, tc.secret)
			}
			if _, ok := e["authorization"]; ok != (tc.secret != "") {
				t.Errorf("authorization %v", e["authorization"])
			}
			for _, key := range []string{sa, binding, secret, "Secret trellis-system/scraper-token"} {
				own := key == tc.rendersOwn || tc.rendersOwn != "" && key != secret
				if (objs[key] != nil) != own {
					t.Errorf("%s rendered: %v, want %v", key, objs[key] != nil, own)
				}
			}
			except := []string{}
			if tc.rendersOwn == "" && tc.secret != "" {
				except = append(except, "Secret trellis-system/"+tc.secret)
			}
			if missing := dangling(objs, except...); len(missing) > 0 {
				t.Errorf("references to nothing:\n  %s", strings.Join(missing, "\n  "))
			}
		})
	}

	// commonLabels wins where both set a label: rendered once.
	objs = helmTemplate(t, chartDir, append(on, "--set", "commonLabels.release="+team+",monitoring.serviceMonitor.labels.release=kube-prometheus-stack")...)
	if got := labelsOf(objs[monitor])["release"]; got != team {
		t.Errorf("release=%v, want commonLabels' platform", got)
	}

	for _, tc := range []struct{ set, want string }{
		{"monitoring.serviceMonitor.interval=30", "/monitoring/serviceMonitor/interval"},
		{"monitoring.serviceMonitor.scrapeTimeout=ten", "/monitoring/serviceMonitor/scrapeTimeout"},
		{"monitoring.serviceMonitor.scrapeClass=1", "/monitoring/serviceMonitor/scrapeClass"},
		{"monitoring.serviceMonitor.labels.release=1", "/monitoring/serviceMonitor/labels/release"},
		{"monitoring.serviceMonitor.labels.app\\.kubernetes\\.io/part-of=x", "invalid propertyName 'app.kubernetes.io/part-of'"},
		{"monitoring.serviceMonitor.tokenSecret.create=yes", "/monitoring/serviceMonitor/tokenSecret/create"},
		{"monitoring.serviceMonitor.tokenSecret.name=My_Token", "/monitoring/serviceMonitor/tokenSecret/name"},
		{"monitoring.serviceMonitor.tokenSecret.key=a b", "/monitoring/serviceMonitor/tokenSecret/key"},
		{"monitoring.prometheusRule.labels.release=true", "/monitoring/prometheusRule/labels/release"},
	} {
		out, err := exec.Command(tool(t, "helm"), "template", "trellis", chartDir, "--set", tc.set).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("--set %s: %v, want an error naming %q:\n%s", tc.set, err, tc.want, out)
		}
	}
}

// TestAdmissionPolicyValues: one value sets every
// ValidatingAdmissionPolicyBinding's validationActions (Deny by default);
// admissionPolicies.mutating.enabled=false renders what
// install-without-mutating-policies.yaml holds; below Kubernetes 1.36 the
// install is refused unless it is false, naming it.
func TestAdmissionPolicyValues(t *testing.T) {
	actions := func(objs map[string]map[string]any) map[string]any {
		got := map[string]any{}
		for key, o := range objs {
			if o["kind"] == kindVAPBinding {
				got[key] = o["spec"].(map[string]any)["validationActions"]
			}
		}
		return got
	}
	for set, want := range map[string][]any{
		"": {"Deny"},
		"admissionPolicies.validationActions={Warn,Audit}": {"Warn", "Audit"},
		"admissionPolicies.validationActions={Audit}":      {"Audit"},
		"admissionPolicies.validationActions={Deny,Audit}": {"Deny", "Audit"},
	} {
		var args []string
		if set != "" {
			args = []string{"--set", set}
		}
		got := actions(helmTemplate(t, chartDir, args...))
		if len(got) < 7 {
			t.Fatalf("%s: bindings %v", set, got)
		}
		for key, a := range got {
			if !reflect.DeepEqual(a, want) {
				t.Errorf("%s: %s has %v, want %v", set, key, a, want)
			}
		}
	}

	sameObjects(t, helmTemplate(t, chartDir, "--set", "admissionPolicies.mutating.enabled=false"),
		kustomizeOverlay(t, "../../config/default-without-mutating-policies"))

	for _, tc := range []struct {
		kube, set, wantErr string
	}{
		{"1.36.0", "", ""},
		{"1.35.4", "", "Kubernetes v1.35.4 does not serve MutatingAdmissionPolicy (admissionregistration.k8s.io/v1, 1.36 and later): install with admissionPolicies.mutating.enabled=false"},
		{"1.35.4", "admissionPolicies.mutating.enabled=false", ""},
		{"1.33.0", "admissionPolicies.mutating.enabled=false", ""},
		{"1.32.9", "admissionPolicies.mutating.enabled=false", "chart requires kubeVersion: >=1.33.0-0"},
	} {
		args := []string{"template", "trellis", chartDir, "--kube-version", tc.kube}
		if tc.set != "" {
			args = append(args, "--set", tc.set)
		}
		out, err := exec.Command(tool(t, "helm"), args...).CombinedOutput()
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(string(out), tc.wantErr)) {
			t.Errorf("Kubernetes %s, %q: %v, want error %q:\n%.2000s", tc.kube, tc.set, err, tc.wantErr, out)
		}
	}

	for _, tc := range []struct{ set, want string }{
		{"admissionPolicies.validationActions={Deny,Warn}", "/admissionPolicies/validationActions"},
		{"admissionPolicies.validationActions={Block}", "/admissionPolicies/validationActions/0"},
		{"admissionPolicies.validationActions=null", "missing property 'validationActions'"},
		{"admissionPolicies.validationActions=Warn", "/admissionPolicies/validationActions"},
		{"admissionPolicies.validationActions={Warn,Warn}", "/admissionPolicies/validationActions"},
		{"admissionPolicies.mutating.enabled=no", "/admissionPolicies/mutating/enabled"},
	} {
		out, err := exec.Command(tool(t, "helm"), "template", "trellis", chartDir, "--set", tc.set).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("--set %s: %v, want an error naming %q:\n%s", tc.set, err, tc.want, out)
		}
	}
}
