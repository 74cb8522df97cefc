package manager

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// apiRequests counts every request the manager sends to the API server by
// verb and resource, Events included: "zero writes when nothing changed" and
// "writes per object" are read from it (make bench).
var apiRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "trellis_api_requests_total",
	Help: "Requests the manager sent to the API server, by HTTP verb and resource (with subresource).",
}, []string{"verb", "resource"})

func init() {
	metrics.Registry.MustRegister(apiRequests)
}

// countRequests wraps the manager's transport.
func countRequests(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		apiRequests.WithLabelValues(req.Method, resourceOf(req.URL.Path)).Inc()
		return rt.RoundTrip(req)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// resourceOf extracts "resource" or "resource/subresource" from an API path:
// /api/v1/[namespaces/NS/]RES[/NAME[/SUB]] or /apis/G/V/[namespaces/NS/]RES[/NAME[/SUB]].
func resourceOf(path string) string {
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
