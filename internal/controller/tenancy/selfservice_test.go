package tenancy

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
)

func request(namespace, name string, age time.Duration) *tenancyv1.NamespaceRequest {
	return &tenancyv1.NamespaceRequest{ObjectMeta: metav1.ObjectMeta{
		Namespace: namespace, Name: name,
		CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(-age)),
	}}
}

func verdictOf(sel selection, r *tenancyv1.NamespaceRequest) verdict {
	return sel.verdicts[types.NamespacedName{Namespace: r.Namespace, Name: r.Name}]
}

func TestSelectRequests(t *testing.T) {
	tenant := newTenant("team-a", "team-a-", "dev")
	tenant.Spec.SelfService = tenancyv1.SelfService{MaxNamespaces: 2, NamePattern: "f-[a-z0-9-]+|dev"}
	protection := Protection{ManagerNamespace: "trellis-system"}
	oldest := request("team-a-dev", "f-one", 3*time.Hour)
	second := request("team-a-dev", "f-two", 2*time.Hour)
	third := request("team-a-dev", "f-three", time.Hour)
	spec := request("team-a-dev", "dev", 4*time.Hour)
	badName := request("team-a-dev", "other", 5*time.Hour)
	twin := request("team-a-f-one", "f-one", 30*time.Minute)
	intoOther := request("team-a-dev", "f-b-x", 6*time.Hour)
	others := map[string]string{"team-a-f-b-": "team-b", "zzz-": "team-z"}

	sel := selectRequests(tenant, []*tenancyv1.NamespaceRequest{third, twin, spec, badName, second, oldest, intoOther}, nil, others, protection)
	for _, c := range []struct {
		req     *tenancyv1.NamespaceRequest
		granted bool
		reason  string
	}{
		{oldest, true, ""},
		{second, true, ""},
		{third, false, ReasonLimitReached},
		{spec, false, ReasonNameTaken},
		{badName, false, ReasonNameNotAllowed},
		{twin, false, ReasonNameTaken},
		{intoOther, false, ReasonNameTaken},
	} {
		v := verdictOf(sel, c.req)
		if v.granted != c.granted || v.reason != c.reason {
			t.Errorf("%s/%s: granted %v reason %q (%s), want granted %v reason %q",
				c.req.Namespace, c.req.Name, v.granted, v.reason, v.message, c.granted, c.reason)
		}
	}
	if got := sel.namespaces; len(got) != 2 || got[0] != "team-a-f-one" || got[1] != "team-a-f-two" {
		t.Errorf("granted %v, want [team-a-f-one team-a-f-two]", got)
	}
	if sel.requestedBy["team-a-f-two"] != "team-a-dev/f-two" {
		t.Errorf("requestedBy = %v", sel.requestedBy)
	}

	// What was granted stays granted, oldest or not, limit lowered, pattern
	// narrowed, self-service switched off or a neighbour's prefix made
	// since; new requests are refused.
	tenant.Status.Namespaces = []tenancyv1.TenantNamespaceStatus{
		{Name: "team-a-dev", State: tenancyv1.NamespaceReady},
		{Name: "team-a-f-two", State: tenancyv1.NamespaceReady, RequestedBy: "team-a-dev/f-two"},
		{Name: "team-a-f-three", State: tenancyv1.NamespaceReady, RequestedBy: "team-a-dev/f-three"},
	}
	tenant.Spec.SelfService = tenancyv1.SelfService{MaxNamespaces: 1, NamePattern: "g-.*"}
	// A Tenant made since, whose longer prefix covers a granted name.
	sel = selectRequests(tenant, []*tenancyv1.NamespaceRequest{oldest, second, third}, nil, map[string]string{"team-a-f-t": "team-t"}, protection)
	if v := verdictOf(sel, oldest); v.granted || v.reason != ReasonNameNotAllowed {
		t.Errorf("a new request against a narrowed pattern: %+v", v)
	}
	if !verdictOf(sel, second).granted || !verdictOf(sel, third).granted {
		t.Errorf("granted requests were taken away: %+v", sel.verdicts)
	}
	tenant.Spec.SelfService = tenancyv1.SelfService{}
	sel = selectRequests(tenant, []*tenancyv1.NamespaceRequest{oldest, second}, nil, nil, protection)
	if v := verdictOf(sel, oldest); v.granted || v.reason != ReasonSelfServiceDisabled {
		t.Errorf("a new request without selfService: %+v", v)
	}
	if !verdictOf(sel, second).granted {
		t.Errorf("switching selfService off took a granted namespace away")
	}
}

func TestSelectRequestsRefusesNamesNoTenantMayHold(t *testing.T) {
	tenant := newTenant("k", "kube-", "x")
	tenant.Spec.SelfService = tenancyv1.SelfService{MaxNamespaces: 8, NamePattern: "[a-z]+"}
	long := request("kube-x", "abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijab", 0)
	sel := selectRequests(tenant, []*tenancyv1.NamespaceRequest{request("kube-x", "system", 0), long}, nil, nil, Protection{})
	for key, v := range sel.verdicts {
		if v.granted || v.reason != ReasonInvalidName {
			t.Errorf("%s: %+v, want refused as InvalidName", key, v)
		}
	}
	tenant.Spec.NamespacePrefix = nil
	tenant.Spec.SelfService.NamePattern = "(" // not a regular expression
	sel = selectRequests(tenant, []*tenancyv1.NamespaceRequest{request("x", "ok", 0)}, nil, nil, Protection{})
	if v := sel.verdicts[types.NamespacedName{Namespace: "x", Name: "ok"}]; v.granted || v.reason != ReasonNameNotAllowed {
		t.Errorf("an invalid namePattern: %+v", v)
	}
}

// TestSelectRequestsKeepsAHeldNamespaceTheStatusDoesNotName: the status
// that named a grant may not be written yet (or lost a race); the namespace
// the Tenant holds still keeps its request's place, over the count.
func TestSelectRequestsKeepsAHeldNamespaceTheStatusDoesNotName(t *testing.T) {
	tenant := newTenant("team-a", "team-a-", "dev")
	tenant.Spec.SelfService = tenancyv1.SelfService{MaxNamespaces: 1}
	older := request("team-a-dev", "f-old", 2*time.Hour)
	granted := request("team-a-dev", "f-made", time.Hour)
	held := map[string]bool{"team-a-dev": true, "team-a-f-made": true}
	sel := selectRequests(tenant, []*tenancyv1.NamespaceRequest{older, granted}, held, nil, Protection{})
	if !verdictOf(sel, granted).granted {
		t.Errorf("a held namespace lost its request: %+v", verdictOf(sel, granted))
	}
	if v := verdictOf(sel, older); v.granted || v.reason != ReasonLimitReached {
		t.Errorf("the older new request: %+v, want LimitReached", v)
	}
	tenant.Spec.SelfService = tenancyv1.SelfService{}
	if sel := selectRequests(tenant, []*tenancyv1.NamespaceRequest{granted}, held, nil, Protection{}); !verdictOf(sel, granted).granted {
		t.Errorf("self-service switched off took a held namespace away")
	}
}
