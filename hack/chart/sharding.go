package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// With controllerRing, the manager Deployment's replicas are shards that run
// the markdownview controller only. The Tenant and storage controllers then
// run in one more Deployment of the same pod, leader-elected
// (docs/scaling.md, "MarkdownViews as shards"). Its pods carry a component
// label of their own, so that no selector of the shards' (their Deployment's,
// the PDB's) takes them, and the bucket-event Service selects its leader.
const (
	unshardedComponent = "unsharded-manager"
	unshardedSuffix    = "-unsharded"
	gateRing           = ".Values.controllerRing"
)

// replaceOnce replaces old in s, which must hold it exactly once: the text
// hack/chart itself generated, so a miss is a change to teach it about.
func replaceOnce(s, old, new, what string) (string, error) {
	if n := strings.Count(s, old); n != 1 {
		return "", fmt.Errorf("%s: %q occurs %d times, want once: teach hack/chart/sharding.go", what, old, n)
	}
	return strings.Replace(s, old, new, 1), nil
}

// unshardedDeployment derives the Tenant and storage Deployment from the
// manager Deployment's template, rendered with controllerRing only.
func unshardedDeployment(manager []byte) ([]byte, error) {
	const what = "the unsharded manager Deployment"
	s := string(manager)
	header, body, ok := strings.Cut(s, "\n")
	if !ok || !strings.HasPrefix(header, "{{- /* Generated") {
		return nil, fmt.Errorf("%s: the manager Deployment's template has no header", what)
	}
	var err error
	if body, err = replaceOnce(body, "  name: {{ include \"trellis.fullname\" . }}-controller-manager\n",
		"  name: {{ include \"trellis.fullname\" . }}-controller-manager"+unshardedSuffix+"\n", what); err != nil {
		return nil, err
	}
	if body, err = replaceOnce(body, "  replicas: {{ .Values.replicas }}\n", "  replicas: 2 # one leads, one stands by\n", what); err != nil {
		return nil, err
	}
	// Every label and selector, and the spread constraints' default selector.
	if strings.Count(body, "app.kubernetes.io/component: manager\n") != 3 {
		return nil, fmt.Errorf("%s: the manager's component label is not on the Deployment, its selector and its pods", what)
	}
	body = strings.ReplaceAll(body, "app.kubernetes.io/component: manager\n", "app.kubernetes.io/component: "+unshardedComponent+"\n")
	if body, err = replaceOnce(body, `"app.kubernetes.io/component" "manager"`, `"app.kubernetes.io/component" "`+unshardedComponent+`"`, what); err != nil {
		return nil, err
	}
	const indent = "        "
	if body, err = replaceOnce(body, fmt.Sprintf("{{- if .Values.controllerRing }}\n%s- {{ printf \"--controller-ring=%%s\" .Values.controllerRing | quote }}\n{{- else }}\n%s- --leader-elect\n{{- end }}\n", indent, indent),
		indent+"- --leader-elect\n"+indent+"- --controllers=tenant,storage\n", what); err != nil {
		return nil, err
	}
	if body, err = replaceOnce(body, fmt.Sprintf("{{- with .Values.controllers }}\n%s- {{ printf \"--controllers=%%s\" (join \",\" .) | quote }}\n{{- end }}\n", indent), "", what); err != nil {
		return nil, err
	}
	return []byte(fmt.Sprintf("%s\n{{- if %s }}\n%s{{- end }}\n", header, gateRing, body)), nil
}

// bucketEventsToUnsharded makes the bucket-event Service select the leader
// of the unsharded Deployment when there is a ring: its receiver runs with
// the storage controllers, and a shard is never labelled leader anyway.
func bucketEventsToUnsharded(service []byte) ([]byte, error) {
	const old = "  selector:\n    app.kubernetes.io/component: manager\n"
	s, err := replaceOnce(string(service), old,
		"  selector:\n    app.kubernetes.io/component: {{ if "+gateRing+" }}"+unshardedComponent+"{{ else }}manager{{ end }}\n", "the bucket-event Service")
	return []byte(s), err
}

// shardLeasePolicy is config/sharding's policy with the ring's name and the
// release's namespace filled in, rendered with controllerRing only.
func shardLeasePolicy(config string) ([]byte, error) {
	file := filepath.Join(config, "sharding", "shard_lease_policy.yaml")
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	s := string(data)
	// config's comment says what to fill in by hand; the chart does.
	if i := strings.Index(s, "apiVersion:"); i > 0 {
		s = s[i:]
	}
	for _, r := range [][2]string{
		{"expression: \"'trellis-markdownviews'\"", `expression: {{ printf "'%s'" .Values.controllerRing | quote }}`},
		{"expression: \"'trellis-system'\"", `expression: {{ printf "'%s'" .Release.Namespace | quote }}`},
	} {
		if s, err = replaceOnce(s, r[0], r[1], file); err != nil {
			return nil, err
		}
	}
	meta := "metadata:\n  annotations:\n    " + keepAnnotation + ": keep\n  labels:\n    app.kubernetes.io/part-of: trellis\n    {{- include \"trellis.labels\" . | nindent 4 }}\n"
	if strings.Count(s, "metadata:\n  name: trellis-shard-leases\n") != 2 {
		return nil, fmt.Errorf("%s: want a policy and a binding named trellis-shard-leases", file)
	}
	s = strings.ReplaceAll(s, "metadata:\n  name: trellis-shard-leases\n", meta+"  name: {{ include \"trellis.fullname\" . }}-shard-leases\n")
	if s, err = replaceOnce(s, "policyName: trellis-shard-leases\n", "policyName: {{ include \"trellis.fullname\" . }}-shard-leases\n", file); err != nil {
		return nil, err
	}
	return []byte(fmt.Sprintf("{{- /* Generated by hack/chart from config/sharding (make chart): change config/, not this file. */ -}}\n{{- if %s }}\n%s{{- end }}\n",
		gateRing, strings.TrimRight(s, "\n")+"\n")), nil
}

// addShardingFiles adds what controllerRing installs besides the shards.
func addShardingFiles(files map[string][]byte, config string) error {
	const manager, events = "templates/manager/deployment-trellis-controller-manager.yaml", "templates/manager/service-trellis-bucket-events.yaml"
	for _, f := range []string{manager, events} {
		if files[f] == nil {
			return fmt.Errorf("no %s: teach hack/chart/sharding.go", f)
		}
	}
	unsharded, err := unshardedDeployment(files[manager])
	if err != nil {
		return err
	}
	files["templates/manager/deployment-trellis-controller-manager"+unshardedSuffix+".yaml"] = unsharded
	for f, derive := range map[string]func([]byte) ([]byte, error){
		"templates/manager/poddisruptionbudget-trellis-controller-manager.yaml": unshardedPDB,
		"templates/manager/service-trellis-controller-manager-metrics.yaml":     unshardedMetrics,
	} {
		if files[f] == nil {
			return fmt.Errorf("no %s: teach hack/chart/sharding.go", f)
		}
		derived, err := derive(files[f])
		if err != nil {
			return err
		}
		files[strings.Replace(f, "-controller-manager", "-controller-manager"+unshardedSuffix, 1)] = derived
	}
	if files[events], err = bucketEventsToUnsharded(files[events]); err != nil {
		return err
	}
	policy, err := shardLeasePolicy(config)
	if err != nil {
		return err
	}
	files["templates/admission/validatingadmissionpolicy-trellis-shard-leases.yaml"] = policy
	return nil
}

const (
	managerObjectName = "  name: {{ include \"trellis.fullname\" . }}-controller-manager"
	componentManager  = "app.kubernetes.io/component: manager\n"
)

// unshardedPDB keeps one of the unsharded Deployment's two pods up; the
// shards' own PDB selects the shards only.
func unshardedPDB(pdb []byte) ([]byte, error) {
	const what = "the unsharded manager's PodDisruptionBudget"
	s, err := replaceOnce(string(pdb), "{{- if and .Values.podDisruptionBudget.enabled (gt (int .Values.replicas) 1) }}\n",
		"{{- if and "+gateRing+" .Values.podDisruptionBudget.enabled }}\n", what)
	if err != nil {
		return nil, err
	}
	if s, err = replaceOnce(s, managerObjectName+"\n", managerObjectName+unshardedSuffix+"\n", what); err != nil {
		return nil, err
	}
	if strings.Count(s, componentManager) != 2 {
		return nil, fmt.Errorf("%s: the component label is not on it and its selector: teach hack/chart/sharding.go", what)
	}
	return []byte(strings.ReplaceAll(s, componentManager, "app.kubernetes.io/component: "+unshardedComponent+"\n")), nil
}

// unshardedMetrics serves the unsharded Deployment's metrics. The Service
// keeps the manager's labels, so that the ServiceMonitor scrapes it too.
func unshardedMetrics(service []byte) ([]byte, error) {
	const what = "the unsharded manager's metrics Service"
	s := string(service)
	header, body, ok := strings.Cut(s, "\n")
	if !ok || !strings.HasPrefix(header, "{{- /* Generated") {
		return nil, fmt.Errorf("%s: no header", what)
	}
	body, err := replaceOnce(body, managerObjectName+"-metrics\n", managerObjectName+unshardedSuffix+"-metrics\n", what)
	if err != nil {
		return nil, err
	}
	if body, err = replaceOnce(body, "  selector:\n    "+componentManager, "  selector:\n    app.kubernetes.io/component: "+unshardedComponent+"\n", what); err != nil {
		return nil, err
	}
	return []byte(fmt.Sprintf("%s\n{{- if %s }}\n%s{{- end }}\n", header, gateRing, body)), nil
}
