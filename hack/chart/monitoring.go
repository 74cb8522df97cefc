package main

import (
	"errors"
	"fmt"
)

// monitoringMark marks, while the chart is made, an object of
// config/prometheus.
const monitoringMark = "\x00monitoring"

// The scraper's objects (config/prometheus/scraper.yaml) are rendered with
// the ServiceMonitor, unless the user brings the token Secret.
const gateScraper = "and .Values.monitoring.serviceMonitor.enabled .Values.monitoring.serviceMonitor.tokenSecret.create"

// monitoringGate is the gate of an object of config/prometheus.
func monitoringGate(o map[string]any, n *naming, d *chartDefaults) (string, error) {
	switch kind := fmt.Sprint(o["kind"]); {
	case kind == kindServiceMonitor:
		d.ServiceMonitor = true
		return gateServiceMonitor, nil
	case kind == kindPrometheusRule:
		d.PrometheusRule = true
		return gatePrometheusRule, nil
	case kind == kindServiceAccount || kind == "ClusterRoleBinding" || kind == kindSecret && str(o, "metadata", "name") == n.scraperSecret:
		return gateScraper, nil
	default:
		return "", fmt.Errorf("config/prometheus: hack/chart knows the ServiceMonitor, the PrometheusRule and the scraper's ServiceAccount, binding and token Secret, not a %s", kind)
	}
}

// labelsFrom adds a map value's labels to an object's, but those
// commonLabels sets (the chart's schema refuses config's own).
func labelsFrom(p *placeholders, meta map[string]any, value string) {
	labels, _ := meta["labels"].(map[string]any)
	if labels == nil {
		labels = map[string]any{}
		meta["labels"] = labels
	}
	labels[p.add(func(indent, _ string) string {
		return fmt.Sprintf("{{- range $k, $v := %s }}\n{{- if not (hasKey $.Values.commonLabels $k) }}\n%s{{ $k | quote }}: {{ $v | quote }}\n{{- end }}\n{{- end }}", value, indent)
	})] = ""
}

// templateServiceMonitor makes values of the ServiceMonitor's labels,
// scrape class, interval and timeout, and of the Secret whose token it
// sends: config's (the scraper's), the user's, or none.
func templateServiceMonitor(o map[string]any, p *placeholders, n *naming, d *chartDefaults) error {
	const v = ".Values.monitoring.serviceMonitor."
	labelsFrom(p, o["metadata"].(map[string]any), v+"labels")
	spec := o["spec"].(map[string]any)
	if _, ok := spec["scrapeClass"]; ok {
		return errors.New("a scrapeClass in config: the chart's value would not default to it")
	}
	spec[p.add(func(indent, _ string) string {
		return fmt.Sprintf("{{- with %sscrapeClass }}\n%sscrapeClass: {{ . | quote }}\n{{- end }}", v, indent)
	})] = ""
	endpoints, _ := spec["endpoints"].([]any)
	if len(endpoints) == 0 {
		return errors.New("no endpoints")
	}
	for _, e := range endpoints {
		e := e.(map[string]any)
		if _, ok := e["bearerTokenFile"]; ok {
			return errors.New("bearerTokenFile is deprecated: send the scraper's token with authorization.credentials")
		}
		for _, field := range []string{"interval", "scrapeTimeout"} {
			if _, ok := e[field]; ok {
				return fmt.Errorf("%s in config: the chart's value would not default to it", field)
			}
			e[p.add(func(indent, _ string) string {
				return fmt.Sprintf("{{- with %s%s }}\n%s%s: {{ . | quote }}\n{{- end }}", v, field, indent, field)
			})] = ""
		}
		auth, ok := e["authorization"].(map[string]any)
		if !ok {
			return errors.New("an endpoint without authorization: the manager's metrics want a token")
		}
		secret, key := str(auth, "credentials", "name"), str(auth, "credentials", "key")
		if secret == "" || secret != n.scraperSecret || key == "" || len(auth) != 2 || auth["type"] != "Bearer" {
			return fmt.Errorf("authorization %v: hack/chart knows a Bearer token in the key of the scraper's Secret %q", auth, n.scraperSecret)
		}
		d.TokenKey = key
		delete(e, "authorization")
		e[p.add(func(indent, _ string) string {
			return fmt.Sprintf(`{{- with include "trellis.metricsTokenSecret" . }}
%[1]sauthorization:
%[1]s  type: Bearer
%[1]s  credentials:
%[1]s    name: {{ . | quote }}
%[1]s    key: {{ $.Values.monitoring.serviceMonitor.tokenSecret.key | quote }}
{{- end }}`, indent)
		})] = ""
	}
	return nil
}
