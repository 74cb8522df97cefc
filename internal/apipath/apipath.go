// Package apipath reads the resource a Kubernetes API path names, for the
// manager's request metric. No Kubernetes imports, so its fuzz target
// builds in seconds.
package apipath

import "strings"

// Resource extracts "resource" or "resource/subresource" from an API path:
// /api/v1/[namespaces/NS/]RES[/NAME[/SUB]] or /apis/G/V/[namespaces/NS/]RES[/NAME[/SUB]].
// Anything else is "other".
func Resource(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "other"
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:] // namespaced resource
	}
	switch {
	case len(parts) == 0 || parts[0] == "":
		return "other"
	case len(parts) <= 2 || parts[2] == "":
		return parts[0]
	default:
		return parts[0] + "/" + parts[2]
	}
}
