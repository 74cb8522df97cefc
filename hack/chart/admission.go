package main

import (
	"errors"
	"fmt"

	"sigs.k8s.io/yaml"
)

const (
	// The MutatingAdmissionPolicies (admissionregistration.k8s.io/v1, served
	// from Kubernetes 1.36) are rendered only when this is true, and then
	// only where the cluster serves them.
	gateMutatingPolicies = ".Values.admissionPolicies.mutating.enabled"
)

// templateValidationActions makes one value of every
// ValidatingAdmissionPolicyBinding's validationActions: config's, which
// must be the same in all, is its default.
func templateValidationActions(o map[string]any, p *placeholders, d *chartDefaults) error {
	spec := o["spec"].(map[string]any)
	actions, ok := spec["validationActions"].([]any)
	if !ok || len(actions) == 0 {
		return errors.New("no validationActions")
	}
	y, err := yaml.Marshal(actions)
	if err != nil {
		return err
	}
	if d.ValidationActions != "" && d.ValidationActions != string(y) {
		return fmt.Errorf("validationActions %v, where another binding has\n%s: the chart has one value for all", actions, d.ValidationActions)
	}
	d.ValidationActions = string(y)
	spec["validationActions"] = p.add(func(indent, key string) string {
		return fmt.Sprintf("%s%s: {{- toYaml .Values.admissionPolicies.validationActions | nindent %d }}", indent, key, len(indent))
	})
	return nil
}

// mutatingPolicyGate is the gate of a MutatingAdmissionPolicy or its
// binding, and what the chart renders first within it: a refusal naming the
// value where the cluster does not serve the kind, rather than the API
// server's "no matches for kind".
func mutatingPolicyGate(o map[string]any, d *chartDefaults) (gate, first string, err error) {
	if o["apiVersion"] != "admissionregistration.k8s.io/v1" {
		return "", "", fmt.Errorf("%s of %v: the chart checks the cluster serves admissionregistration.k8s.io/v1", o["kind"], o["apiVersion"])
	}
	d.MutatingPolicies = true
	return gateMutatingPolicies, `{{- include "trellis.mutatingPoliciesServed" . }}`, nil
}
