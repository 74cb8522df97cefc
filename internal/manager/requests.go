package manager

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/trellis-dev/trellis/internal/apipath"
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
		apiRequests.WithLabelValues(req.Method, apipath.Resource(req.URL.Path)).Inc()
		return rt.RoundTrip(req)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
