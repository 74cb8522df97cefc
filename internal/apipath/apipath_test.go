package apipath

import "testing"

func TestResource(t *testing.T) {
	cases := map[string]string{
		"/api/v1/namespaces":                                                        "namespaces",
		"/api/v1/namespaces/team-a":                                                 "namespaces",
		"/api/v1/namespaces/team-a/configmaps":                                      "configmaps",
		"/api/v1/namespaces/team-a/configmaps/markdowns-x":                          "configmaps",
		"/apis/apps/v1/namespaces/team-a/deployments/viewer-x":                      "deployments",
		"/apis/view.trellis.dev/v1/namespaces/team-a/markdownviews/handbook/status": "markdownviews/status",
		"/apis/tenancy.trellis.dev/v1/tenants/team-a":                               "tenants",
		"/apis/tenancy.trellis.dev/v1/tenants/team-a/status":                        "tenants/status",
		"/apis/events.k8s.io/v1/namespaces/default/events":                          "events",
		"/apis/coordination.k8s.io/v1/namespaces/trellis-system/leases/trellis":     "leases",
		"/apis/rbac.authorization.k8s.io/v1/clusterroles/trellis:tenant:a":          "clusterroles",
		"/apis/authentication.k8s.io/v1/tokenreviews":                               "tokenreviews",
		"/version": "other",
		"/apis":    "other",
		"/api/v1":  "other",
		"":         "other",
	}
	for path, want := range cases {
		if got := Resource(path); got != want {
			t.Errorf("Resource(%q) = %q, want %q", path, got, want)
		}
	}
}

// FuzzResource: any path gives a non-empty label without panicking.
func FuzzResource(f *testing.F) {
	for _, seed := range []string{"/api/v1/namespaces/a/configmaps/b", "/apis/apps/v1/deployments", "/", "", "/api", "//////", "/apis/x/y/namespaces/z"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, path string) {
		if Resource(path) == "" {
			t.Fatalf("empty resource label for %q", path)
		}
	})
}
