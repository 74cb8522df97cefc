package tenancy

import (
	"reflect"
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
	// team-c has no prefix, and lists a name team-a's prefix would make.
	nextDoor := request("team-a-dev", "f-c-shared", 7*time.Hour)
	others := neighbours{
		prefixes:   map[string]string{"team-a-f-b-": "team-b", "zzz-": "team-z"},
		namespaces: map[string]string{"team-a-f-c-shared": "team-c"},
	}

	sel := selectRequests(tenant, []*tenancyv1.NamespaceRequest{third, twin, spec, badName, second, oldest, intoOther, nextDoor}, nil, others, protection)
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
		{nextDoor, false, ReasonNameTaken},
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
	if sel.requestedBy["team-a-f-two"] != markOf(second) {
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
	sel = selectRequests(tenant, []*tenancyv1.NamespaceRequest{oldest, second, third}, nil,
		neighbours{prefixes: map[string]string{"team-a-f-t": "team-t"}, namespaces: map[string]string{"team-a-f-two": "team-t"}}, protection)
	if v := verdictOf(sel, oldest); v.granted || v.reason != ReasonNameNotAllowed {
		t.Errorf("a new request against a narrowed pattern: %+v", v)
	}
	if !verdictOf(sel, second).granted || !verdictOf(sel, third).granted {
		t.Errorf("granted requests were taken away: %+v", sel.verdicts)
	}
	tenant.Spec.SelfService = tenancyv1.SelfService{}
	sel = selectRequests(tenant, []*tenancyv1.NamespaceRequest{oldest, second}, nil, neighbours{}, protection)
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
	sel := selectRequests(tenant, []*tenancyv1.NamespaceRequest{request("kube-x", "system", 0), long}, nil, neighbours{}, Protection{})
	for key, v := range sel.verdicts {
		if v.granted || v.reason != ReasonInvalidName {
			t.Errorf("%s: %+v, want refused as InvalidName", key, v)
		}
	}
	tenant.Spec.NamespacePrefix = nil
	tenant.Spec.SelfService.NamePattern = "(" // not a regular expression
	sel = selectRequests(tenant, []*tenancyv1.NamespaceRequest{request("x", "ok", 0)}, nil, neighbours{}, Protection{})
	if v := sel.verdicts[types.NamespacedName{Namespace: "x", Name: "ok"}]; v.granted || v.reason != ReasonNameNotAllowed {
		t.Errorf("an invalid namePattern: %+v", v)
	}
}

// TestSelectRequestsKeepsAHeldNamespaceTheStatusDoesNotName: the status
// that named a grant may not be written yet (or lost a race); the namespace
// made for the request, and marked so, still keeps its request's place,
// over the count.
func TestSelectRequestsKeepsAHeldNamespaceTheStatusDoesNotName(t *testing.T) {
	tenant := newTenant("team-a", "team-a-", "dev")
	tenant.Spec.SelfService = tenancyv1.SelfService{MaxNamespaces: 1}
	older := request("team-a-dev", "f-old", 2*time.Hour)
	granted := request("team-a-dev", "f-made", time.Hour)
	held := map[string]requestMark{"team-a-dev": {}, "team-a-f-made": {key: "team-a-dev/f-made"}}
	sel := selectRequests(tenant, []*tenancyv1.NamespaceRequest{older, granted}, held, neighbours{}, Protection{})
	if !verdictOf(sel, granted).granted {
		t.Errorf("a held namespace lost its request: %+v", verdictOf(sel, granted))
	}
	if v := verdictOf(sel, older); v.granted || v.reason != ReasonLimitReached {
		t.Errorf("the older new request: %+v, want LimitReached", v)
	}
	tenant.Spec.SelfService = tenancyv1.SelfService{}
	if sel := selectRequests(tenant, []*tenancyv1.NamespaceRequest{granted}, held, neighbours{}, Protection{}); !verdictOf(sel, granted).granted {
		t.Errorf("self-service switched off took a held namespace away")
	}
}

// TestARequestMadeInAdvanceTakesNoHeldNamespace: a request waiting for a
// namespace of the spec (refused as taken) must not keep it once the
// platform drops it from the spec, nor pass the bounds by it: a held
// namespace not made for the request is no request's.
func TestARequestMadeInAdvanceTakesNoHeldNamespace(t *testing.T) {
	tenant := newTenant("team-a", "team-a-", "dev")
	tenant.Spec.SelfService = tenancyv1.SelfService{MaxNamespaces: 4}
	waiting := request("team-a-dev", "old", time.Hour)
	// team-a-old was the spec's, and is held until it is released.
	held := map[string]requestMark{"team-a-dev": {}, "team-a-old": {}}
	sel := selectRequests(tenant, []*tenancyv1.NamespaceRequest{waiting}, held, neighbours{}, Protection{})
	if v := verdictOf(sel, waiting); v.granted || v.reason != ReasonNameTaken {
		t.Errorf("a request for a held namespace of the spec's: %+v, want NameTaken", v)
	}
	// Made for another request (in another namespace): not this one's.
	held["team-a-old"] = requestMark{key: "team-a-other/old"}
	if v := verdictOf(selectRequests(tenant, []*tenancyv1.NamespaceRequest{waiting}, held, neighbours{}, Protection{}), waiting); v.granted {
		t.Errorf("a request took a namespace made for another: %+v", v)
	}
	tenant.Spec.SelfService = tenancyv1.SelfService{}
	held["team-a-old"] = requestMark{}
	if v := verdictOf(selectRequests(tenant, []*tenancyv1.NamespaceRequest{waiting}, held, neighbours{}, Protection{}), waiting); v.granted || v.reason != ReasonSelfServiceDisabled {
		t.Errorf("without selfService: %+v, want SelfServiceDisabled", v)
	}
}

// TestARequestMadeAgainTakesNoNamespace: identity is a UID. A namespace
// made for a request is held by that request, not by one deleted and made
// again under its name (whose deletion gave the namespace up, at the word
// of its admin); a namespace marked before Trellis recorded UIDs is the
// request's of that name.
func TestARequestMadeAgainTakesNoNamespace(t *testing.T) {
	tenant := newTenant("team-a", "team-a-", "dev")
	tenant.Spec.SelfService = tenancyv1.SelfService{MaxNamespaces: 4}
	again := request("team-a-dev", "x", time.Minute)
	again.UID = "uid-new"
	for _, c := range []struct {
		reason  string
		mark    requestMark
		granted bool
	}{
		{"made for it", requestMark{key: "team-a-dev/x", uid: "uid-new"}, true},
		{"made for the request deleted before it", requestMark{key: "team-a-dev/x", uid: "uid-old"}, false},
		{"marked before UIDs were recorded", requestMark{key: "team-a-dev/x"}, true},
	} {
		held := map[string]requestMark{"team-a-dev": {}, "team-a-x": c.mark}
		v := verdictOf(selectRequests(tenant, []*tenancyv1.NamespaceRequest{again}, held, neighbours{}, Protection{}), again)
		if v.granted != c.granted || (!c.granted && v.reason != ReasonNameTaken) {
			t.Errorf("%s: %+v, want granted %v (else NameTaken)", c.reason, v, c.granted)
		}
	}
	// Nor does a record on the Tenant's status under its name hand it the
	// namespace made for the other.
	tenant.Status.Namespaces = []tenancyv1.TenantNamespaceStatus{{Name: "team-a-x", State: tenancyv1.NamespaceReady, RequestedBy: "team-a-dev/x"}}
	held := map[string]requestMark{"team-a-dev": {}, "team-a-x": {key: "team-a-dev/x", uid: "uid-old"}}
	if v := verdictOf(selectRequests(tenant, []*tenancyv1.NamespaceRequest{again}, held, neighbours{}, Protection{}), again); v.granted {
		t.Errorf("a request made again took the namespace of the one deleted, by the Tenant's status: %+v", v)
	}
}

// TestWaitingNamespaces: a namespace whose request is gone is kept while
// requests in it hold namespaces, unless the request went with its own
// namespace (the platform's act, or a cluster admin's).
func TestWaitingNamespaces(t *testing.T) {
	tenant := newTenant("team-a", "team-a-", "dev")
	tenant.Spec.SelfService = tenancyv1.SelfService{MaxNamespaces: 4}
	deep := request("team-a-mid", "deep", time.Hour)
	deep.UID = "uid-deep"
	refused := request("team-a-mid", "other", time.Hour) // outside the pattern below
	mid := request("team-a-dev", "mid", 2*time.Hour)
	mid.UID = "uid-mid"
	tests := map[string]struct {
		reqs    []*tenancyv1.NamespaceRequest
		held    map[string]requestMark
		pattern string
		want    map[string][]string
	}{
		"its request is gone, a request in it holds a namespace: kept": {
			reqs: []*tenancyv1.NamespaceRequest{deep},
			held: map[string]requestMark{"team-a-dev": {}, "team-a-mid": {key: "team-a-dev/mid", uid: "uid-mid"}, "team-a-deep": markOf(deep)},
			want: map[string][]string{"team-a-mid": {"team-a-mid/deep (team-a-deep)"}},
		},
		"its request is gone, no request in it holds one: given up": {
			reqs:    []*tenancyv1.NamespaceRequest{refused},
			held:    map[string]requestMark{"team-a-dev": {}, "team-a-mid": {key: "team-a-dev/mid", uid: "uid-mid"}},
			pattern: "mid|deep",
			want:    map[string][]string{},
		},
		"its request went with its own namespace: given up": {
			reqs: []*tenancyv1.NamespaceRequest{deep},
			held: map[string]requestMark{"team-a-mid": {key: "team-a-gone/mid", uid: "uid-mid"}, "team-a-deep": markOf(deep)},
			want: map[string][]string{},
		},
		"its request was made again under its name, a request in it holds a namespace: kept": {
			reqs: []*tenancyv1.NamespaceRequest{mid, deep},
			held: map[string]requestMark{"team-a-dev": {}, "team-a-mid": {key: "team-a-dev/mid", uid: "uid-before"}, "team-a-deep": markOf(deep)},
			want: map[string][]string{"team-a-mid": {"team-a-mid/deep (team-a-deep)"}},
		},
		"its request is there, granted: not waiting": {
			reqs: []*tenancyv1.NamespaceRequest{mid, deep},
			held: map[string]requestMark{"team-a-dev": {}, "team-a-mid": markOf(mid), "team-a-deep": markOf(deep)},
			want: map[string][]string{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tenant := tenant.DeepCopy()
			tenant.Spec.SelfService.NamePattern = tc.pattern
			sel := selectRequests(tenant, tc.reqs, tc.held, neighbours{}, Protection{})
			got := waitingNamespaces(tenant, tc.reqs, tc.held, sel)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("waiting %v, want %v", got, tc.want)
			}
		})
	}
}
