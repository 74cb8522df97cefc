package main

import (
	"cmp"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/controller/tenancy"
	"github.com/trellis-dev/trellis/internal/manager"
)

// The Tenant scenario: N Tenants of 3 namespaces each, without guardrails and
// with every one of them, each against a floor that makes the writes any
// Tenant operator must make: the user's create of the Tenant, the objects
// Trellis keeps for it (namespaces with the same labels, RoleBindings,
// quotas, limit ranges, network policies, the per-tenant ClusterRole and its
// binding) created directly, and one status patch of the Tenant. The floor
// writes through a client with the manager's own client-side limits
// (--kube-api-qps/--kube-api-burst: the same token buckets, one per
// resource, as controller-runtime's client keeps). The floor's Tenants are
// real tenancy.trellis.dev Tenants, so the manager is stopped while the floor
// runs (nothing watches them then: no watch event reaches an operator during
// the floor, which makes it a little cheaper than any operator could be);
// after a floor run its Tenants are deleted (finalizer removed; their objects
// stay, as every run's do) and the manager is started again, and the next
// Trellis run waits until the restarted manager has re-reconciled every
// object already in the cluster. Neither side waits on the cluster's
// components: before each run the bench waits until the
// kube-controller-manager has caught up with the namespaces already created
// (each gets a ServiceAccount and a root-CA ConfigMap, written at the
// controller-manager's own QPS), so its backlog loads neither run.
// The restart scenario (restart.go) then restarts the manager with every
// Tenant in place.

// tenantVariant is one shape of Tenant.
type tenantVariant struct {
	name       string
	key        string // names: <key><i>-dev, floor f<key><i>-dev
	guardrails bool
	// minWrites is the design minimum per tenant, Events excluded
	// (docs/performance.md): one create per object, one status (the
	// finalizer is set at admission by config/admission, which the bench
	// installs).
	minWrites float64
}

var tenantVariants = []tenantVariant{
	{name: "no guardrails", key: "t", minWrites: 9},
	{name: "every guardrail, one viewer", key: "g", guardrails: true, minWrites: 21},
}

var tenantEnvs = []string{"dev", "stg", "prod"}

func (b *bench) tenantScenario() error {
	ctx := context.Background()
	n := b.cfg.tenants
	floorC, qps, burst, err := b.tenantFloorClient()
	if err != nil {
		return err
	}
	log("tenant floor client: QPS %g, burst %d per resource, as the manager's", qps, burst)
	if err := b.installAdmissionPolicy(); err != nil {
		return err
	}
	total := 0
	type idleWrites struct {
		variant string
		tenants int
		writes  float64
	}
	var idle []idleWrites
	for _, v := range tenantVariants {
		if !b.runsVariant(v) {
			continue
		}
		// Floor and Trellis alternate (floor, Trellis, floor, ...), and each
		// Trellis run is set against the mean of the floor runs on either
		// side of it, so that neither profits from a quieter moment of a
		// shared machine; the round with the median ratio is reported.
		floorRun := func(round int) (runCost, error) {
			b.mgr.stop() // the floor's Tenants are real: nothing may reconcile them
			if err := b.waitControllerManagerCaughtUp(ctx); err != nil {
				return runCost{}, err
			}
			r, err := b.measure(fmt.Sprintf("floor %s: %d tenants' objects (%s) created directly, with their Tenants' create and status patch", roundName(round), n, v.name),
				b.floorWrites.counts,
				func() error {
					return parallel(n, b.cfg.workers, func(i int) error { return b.createFloorTenant(ctx, floorC, v, round, i) })
				},
				nil)
			if err != nil {
				return r, err
			}
			if err := b.deleteFloorTenants(ctx, v, round); err != nil {
				return r, err
			}
			return r, nil
		}
		// trellisRun restarts the manager after a floor run and waits until
		// it has re-reconciled every object in the cluster, so that its start
		// loads neither run.
		trellisRun := func(r int) (runCost, error) {
			if err := b.restartManagerSettled(total + r*n); err != nil {
				return runCost{}, err
			}
			if err := b.waitControllerManagerCaughtUp(ctx); err != nil {
				return runCost{}, err
			}
			return b.measureTenants(ctx, v, r, n)
		}
		before, err := floorRun(0)
		if err != nil {
			return err
		}
		var rounds []tenantRound
		for r := range b.cfg.tenantRounds {
			trellis, err := trellisRun(r)
			if err != nil {
				return err
			}
			log("trellis %s, round %s: API requests by verb and resource: %s", v.name, roundName(r), trellis.requests)
			if r == b.cfg.tenantRounds-1 {
				// Idle writes, as for MarkdownViews: the manager after
				// convergence, before the next floor run stops it.
				quiet, err := b.quietWrites()
				if err != nil {
					return err
				}
				idle = append(idle, idleWrites{variant: v.name, tenants: total + n*(r+1), writes: quiet})
			}
			after, err := floorRun(r + 1)
			if err != nil {
				return err
			}
			floor := meanCost(before, after)
			rounds = append(rounds, tenantRound{trellis: trellis, floor: floor})
			log("round %s, %s: Trellis %s against floor %s then %s: %.2f×", roundName(r), v.name,
				trellis.took, before.took, after.took, trellis.took.Seconds()/floor.took.Seconds())
			before = after
		}
		total += n * len(rounds)
		m := medianRound(rounds)
		trellis, floor := m.trellis, m.floor

		scenario := fmt.Sprintf("%d Tenants × 3 namespaces, %s", n, v.name)
		figure := "time until all Ready (" + tenantFloorName + ")"
		if len(rounds) > 1 {
			figure = fmt.Sprintf("time until all Ready (%s), median of %d rounds", tenantFloorName, len(rounds))
		}
		b.add(row{Scenario: scenario, Figure: figure, Value: trellis.took.Seconds(), Unit: "s",
			Floor: floor.took.Seconds(), Ratio: trellis.took.Seconds() / floor.took.Seconds(), Target: "≤ 1.2× floor",
			Met: trellis.took.Seconds() <= 1.2*floor.took.Seconds()})
		if len(rounds) > 1 {
			ratios := make([]string, 0, len(rounds))
			for _, r := range rounds {
				ratios = append(ratios, fmt.Sprintf("%.2f", r.ratio()))
			}
			log("%s: ratios of the rounds %s", scenario, strings.Join(ratios, ", "))
		}
		perTenant := trellis.writes.withoutEvents() / float64(n)
		b.add(row{Scenario: "same", Figure: "API writes per tenant, Events excluded", Value: perTenant, Unit: "writes",
			Floor: floor.writes.total() / float64(n), Ratio: perTenant / (floor.writes.total() / float64(n)),
			Target: fmt.Sprintf("= %g (design minimum)", v.minWrites), Met: perTenant <= v.minWrites+0.05})
		b.add(row{Scenario: "same", Figure: "Events per tenant", Value: trellis.writes["events"] / float64(n), Unit: "events", Target: "report", Met: true})
		apiServer := trellis.cpu["kube-apiserver"] / floor.cpu["kube-apiserver"]
		b.add(row{Scenario: "same", Figure: "kube-apiserver CPU (" + tenantFloorName + ")", Value: trellis.cpu["kube-apiserver"], Unit: "s",
			Floor: floor.cpu["kube-apiserver"], Ratio: apiServer, Target: "≤ 1.2× floor", Met: apiServer <= 1.2})
		b.add(row{Scenario: "same", Figure: "manager CPU", Value: trellis.cpu["manager"], Unit: "s", Target: "report", Met: true})
	}
	for _, q := range idle {
		b.add(row{Scenario: fmt.Sprintf("%d Tenants converged, %s last", q.tenants, q.variant), Figure: fmt.Sprintf("writes in a %s quiet window", b.cfg.quiet),
			Value: q.writes, Unit: "writes", Target: "0", Met: q.writes == 0})
	}
	// The last floor run stopped the manager; the scenarios after this one
	// need it, settled.
	if err := b.restartManagerSettled(total); err != nil {
		return err
	}
	if rss, err := b.mgr.rss(); err == nil && total > 0 {
		b.add(row{Scenario: fmt.Sprintf("%d Tenants (%d namespaces) converged", total, 3*total), Figure: "manager RSS, restarted and settled", Value: rss / (1 << 20), Unit: "MiB", Target: "report", Met: true})
	}
	b.tenantRowsEnd = len(b.rows)
	return nil
}

// tenantCount is how many Tenants the scenario leaves behind (the restart
// scenario waits until each has been reconciled again).
func (b *bench) tenantCount() int {
	variants := 0
	for _, v := range tenantVariants {
		if b.runsVariant(v) {
			variants++
		}
	}
	return variants * b.cfg.tenantRounds * b.cfg.tenants
}

// tenantRound is one Trellis run and the mean of the floor runs either side.
type tenantRound struct{ trellis, floor runCost }

func (r tenantRound) ratio() float64 { return r.trellis.took.Seconds() / r.floor.took.Seconds() }

// medianRound is the round with the median ratio (the lower of the middle two
// for an even count).
func medianRound(rounds []tenantRound) tenantRound {
	sorted := slices.Clone(rounds)
	slices.SortFunc(sorted, func(a, b tenantRound) int { return cmp.Compare(a.ratio(), b.ratio()) })
	return sorted[(len(sorted)-1)/2]
}

// roundName names round r in object names: a letter, so that a name's round
// and index cannot run together.
func roundName(r int) string { return string(rune('a' + r)) }

func (b *bench) runsVariant(v tenantVariant) bool {
	want := "none"
	if v.guardrails {
		want = "all"
	}
	return strings.Contains(","+b.cfg.tenantGuardrails+",", ","+want+",")
}

// measureTenants creates n Tenants and waits, on a watch, until all are
// Ready; the time is that of the event that made the last one Ready.
func (b *bench) measureTenants(ctx context.Context, v tenantVariant, round, n int) (runCost, error) {
	selector := client.MatchingLabels{"bench.trellis.dev/variant": v.key, "bench.trellis.dev/round": roundName(round)}
	what := fmt.Sprintf("trellis %s: %d Tenants (%s)", roundName(round), n, v.name)
	cpu0, err := b.cpu()
	if err != nil {
		return runCost{}, err
	}
	w0, err := b.mgr.writes()
	if err != nil {
		return runCost{}, err
	}
	reqs0, err := b.mgr.requests()
	if err != nil {
		return runCost{}, err
	}
	profiled := b.profileTrellisRun(what)
	defer profiled()
	start := time.Now()
	if err := parallel(n, b.cfg.workers, func(i int) error { return b.c.Create(ctx, benchTenant(v, round, i)) }); err != nil {
		return runCost{}, err
	}
	log("%s: Tenants created in %s", what, time.Since(start))
	at, err := waitTenantsReady(ctx, b.wc, selector, n, 30*time.Minute)
	if err != nil {
		return runCost{}, fmt.Errorf("%s: %w", what, err)
	}
	r := runCost{took: at.Sub(start)}
	time.Sleep(2 * time.Second) // let the last writes (status, Events) land before counting
	w1, err := b.mgr.writes()
	if err != nil {
		return runCost{}, err
	}
	r.writes = w1.sub(w0)
	reqs1, err := b.mgr.requests()
	if err != nil {
		return runCost{}, err
	}
	r.requests = reqs1.sub(reqs0)
	cpu1, err := b.cpu()
	if err != nil {
		return runCost{}, err
	}
	r.cpu = cpu1.minus(cpu0)
	log("%s: %s, writes %s, CPU %s", what, r.took, r.writes, r.cpu)
	return r, nil
}

// waitTenantsReady watches the Tenants selected until n are Ready and
// returns when the last one became Ready.
func waitTenantsReady(ctx context.Context, wc client.WithWatch, selector client.MatchingLabels, n int, timeout time.Duration) (time.Time, error) {
	ready := func(o runtime.Object) bool {
		return meta.IsStatusConditionTrue(o.(*tenancyv1.Tenant).Status.Conditions, conditions.Ready)
	}
	at, err := watchUntil(ctx, wc, &tenancyv1.TenantList{}, nil, ready, func(_, ok int) bool { return ok >= n }, timeout, selector)
	if err != nil {
		return at, fmt.Errorf("waiting for the Tenants to be Ready: %w", err)
	}
	return at, nil
}

// tenantFloorClient is the floor's client: controller-runtime's, with the
// manager's --kube-api-qps and --kube-api-burst (its defaults unless
// --manager-args sets them), counted like b.floor.
func (b *bench) tenantFloorClient() (client.Client, float64, int, error) {
	defaults := manager.NewOptions()
	qps, burst := defaults.KubeAPIQPS, defaults.KubeAPIBurst
	args := strings.Fields(b.cfg.managerArgs)
	for i, a := range args {
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !hasValue && i+1 < len(args) {
			value = args[i+1]
		}
		var err error
		switch name {
		case "kube-api-qps":
			qps, err = strconv.ParseFloat(value, 64)
		case "kube-api-burst":
			burst, err = strconv.Atoi(value)
		}
		if err != nil {
			return nil, 0, 0, fmt.Errorf("--manager-args %s: %w", a, err)
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", b.kubeconfig)
	if err != nil {
		return nil, 0, 0, err
	}
	cfg.QPS, cfg.Burst = float32(qps), burst
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(tenancyv1.AddToScheme(scheme))
	c, err := client.New(b.floorWrites.wrap(cfg), client.Options{Scheme: scheme})
	return c, qps, burst, err
}

// installAdmissionPolicy applies config/admission, as `make deploy` does:
// the floor's objects and Trellis' go through the same admission. It waits
// until a Tenant and a StorageBucket (dry runs) are created with their
// finalizers: the API server takes a moment to load a new policy. Applying
// it again (each scenario that counts writes does) changes nothing.
func (b *bench) installAdmissionPolicy() error {
	out, err := exec.Command(filepath.Join(b.bin, "kustomize"), "build", filepath.Join(b.root, "config", "admission")).Output()
	if err != nil {
		return fmt.Errorf("kustomize build config/admission: %w", err)
	}
	if err := b.kubectlIn(out, "apply", "--server-side", "-f", "-"); err != nil {
		return err
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		probe := benchTenant(tenantVariants[0], 0, -1)
		err := b.c.Create(context.Background(), probe, client.DryRunAll)
		bucket := &storagev1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "buckets", Name: "probe"},
			Spec: storagev1.StorageBucketSpec{StoreRef: storagev1.StoreReference{Name: "probe"}}}
		errBucket := b.c.Create(context.Background(), bucket, client.DryRunAll)
		if err == nil && slices.Contains(probe.Finalizers, tenancy.Finalizer) &&
			errBucket == nil && slices.Contains(bucket.Finalizers, stores.BucketFinalizer) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("config/admission: a Tenant or StorageBucket is still created without its finalizer (%v, %v)", err, errBucket)
		}
	}
}

// waitControllerManagerCaughtUp waits until every namespace has its
// kube-root-ca.crt ConfigMap, which the kube-controller-manager writes into
// each new namespace (with its ServiceAccount) at its own QPS.
func (b *bench) waitControllerManagerCaughtUp(ctx context.Context) error {
	start := time.Now()
	err := waitFor(30*time.Minute, func() (bool, error) {
		nss := &metav1.PartialObjectMetadataList{}
		nss.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
		if err := b.c.List(ctx, nss); err != nil {
			return false, err
		}
		cms := &metav1.PartialObjectMetadataList{}
		cms.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
		if err := b.c.List(ctx, cms, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", "kube-root-ca.crt")}); err != nil {
			return false, err
		}
		return len(cms.Items) >= len(nss.Items), nil
	}, 2*time.Second)
	if d := time.Since(start); d > 3*time.Second {
		log("waited %s for the kube-controller-manager to catch up", d.Round(time.Second))
	}
	return err
}

// benchTenant is Tenant i of a variant's round.
func benchTenant(v tenantVariant, round, i int) *tenancyv1.Tenant {
	name := fmt.Sprintf("%s%s%d", v.key, roundName(round), i)
	t := &tenancyv1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"bench.trellis.dev/variant": v.key, "bench.trellis.dev/round": roundName(round)}},
		Spec: tenancyv1.TenantSpec{
			Namespaces:      tenantEnvs,
			NamespacePrefix: ptr.To(name + "-"),
			Admins:          []tenancyv1.Subject{{Kind: "Group", Name: name + "-admins", APIGroup: rbacv1.GroupName}},
		},
	}
	if v.guardrails {
		t.Spec.Viewers = []tenancyv1.Subject{{Kind: "Group", Name: name + "-viewers", APIGroup: rbacv1.GroupName}}
		t.Spec.Quota = tenancyv1.TenantQuota{Hard: corev1.ResourceList{
			"requests.cpu": resource.MustParse("4"), "requests.memory": resource.MustParse("8Gi"), "pods": resource.MustParse("50")}}
		t.Spec.LimitRange = tenancyv1.TenantLimitRange{Limits: []tenancyv1.LimitRangeItem{{
			Type:           corev1.LimitTypeContainer,
			Default:        corev1.ResourceList{"cpu": resource.MustParse("500m"), "memory": resource.MustParse("512Mi")},
			DefaultRequest: corev1.ResourceList{"cpu": resource.MustParse("100m"), "memory": resource.MustParse("128Mi")},
			Max:            corev1.ResourceList{"cpu": resource.MustParse("2"), "memory": resource.MustParse("2Gi")},
		}}}
		t.Spec.NetworkIsolation = &tenancyv1.NetworkIsolation{AllowFromNamespaces: []string{"ingress-nginx"}}
		t.Spec.PodSecurity = tenancyv1.PodSecurity{Enforce: tenancyv1.PodSecurityRestricted, Warn: tenancyv1.PodSecurityRestricted}
		t.Spec.NamespaceMetadata = tenancyv1.NamespaceMetadata{Labels: map[string]tenancyv1.LabelValue{"cost-center": "bench"}}
	}
	return t
}

// meanCost is the mean of two runs.
func meanCost(a, b runCost) runCost {
	m := runCost{took: (a.took + b.took) / 2, writes: writeCounts{}, cpu: cpuSample{}}
	for k := range a.writes {
		m.writes[k] = (a.writes[k] + b.writes[k]) / 2
	}
	for k := range a.cpu {
		m.cpu[k] = (a.cpu[k] + b.cpu[k]) / 2
	}
	return m
}

// tenantFloorName says, in the rows, what the Tenant floor writes.
const tenantFloorName = "floor: objects + Tenant create + status patch"

// createFloorTenant makes, directly, the writes any operator of Tenant i of
// round must make: the user's create of the Tenant (b.c, as in Trellis'
// runs, not counted as the floor's own writes), the objects Trellis keeps
// for it, in the same two parallel rounds as the Tenant controller writes
// them (the namespaces; then what each holds beside the ClusterRole and,
// after it, its binding), and one status patch of the Tenant, Ready, as the
// controller writes it. So the floor has as many requests in flight per
// tenant as Trellis and is not held back by round trips Trellis does not
// wait on.
func (b *bench) createFloorTenant(ctx context.Context, c client.Client, v tenantVariant, round, i int) error {
	t := floorTenant(v, round, i)
	if err := b.c.Create(ctx, t); err != nil {
		return err
	}
	o := floorTenantObjects(v, t.Name, i)
	for _, ns := range o.namespaces {
		ns.GetAnnotations()[tenancy.TenantUIDAnnotation] = string(t.UID)
	}
	if err := parallel(len(o.namespaces), len(o.namespaces), func(i int) error { return c.Create(ctx, o.namespaces[i]) }); err != nil {
		return err
	}
	tasks := make([]func() error, 0, len(o.inNamespaces)+1)
	for _, obj := range o.inNamespaces {
		tasks = append(tasks, func() error { return c.Create(ctx, obj) })
	}
	tasks = append(tasks, func() error {
		if err := c.Create(ctx, o.role); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return c.Create(ctx, o.roleBinding)
	})
	if err := parallel(len(tasks), len(tasks), func(i int) error { return tasks[i]() }); err != nil {
		return err
	}
	base := t.DeepCopy()
	t.Status = readyTenantStatus(t)
	return c.Status().Patch(ctx, t, client.MergeFrom(base))
}

// floorTenant is the floor's Tenant i of round: the spec of Trellis' Tenant
// i, named as the floor's objects, labelled so that no wait on Trellis'
// Tenants counts it.
func floorTenant(v tenantVariant, round, i int) *tenancyv1.Tenant {
	t := benchTenant(v, round, i)
	t.Name = fmt.Sprintf("f%s%s%d", v.key, roundName(round), i)
	t.Labels = map[string]string{"bench.trellis.dev/variant": v.key, "bench.trellis.dev/floor-round": roundName(round)}
	t.Spec.NamespacePrefix = ptr.To(t.Name + "-")
	t.Spec.Admins[0].Name = t.Name + "-admins"
	if v.guardrails {
		t.Spec.Viewers[0].Name = t.Name + "-viewers"
	}
	return t
}

// deleteFloorTenants deletes a floor run's Tenants, with the manager
// stopped: their finalizer (set at admission) is removed first, as nothing
// else would. Their objects stay, as Trellis' do.
func (b *bench) deleteFloorTenants(ctx context.Context, v tenantVariant, round int) error {
	list := &tenancyv1.TenantList{}
	if err := b.c.List(ctx, list, client.MatchingLabels{"bench.trellis.dev/variant": v.key, "bench.trellis.dev/floor-round": roundName(round)}); err != nil {
		return err
	}
	return parallel(len(list.Items), b.cfg.workers, func(i int) error {
		t := &list.Items[i]
		base := t.DeepCopy()
		t.Finalizers = nil
		if err := b.c.Patch(ctx, t, client.MergeFrom(base)); err != nil {
			return err
		}
		return client.IgnoreNotFound(b.c.Delete(ctx, t))
	})
}

// restartManagerSettled starts the manager if it is stopped, and waits until
// it has reconciled every object of the earlier scenarios and the tenants
// Trellis Tenants in the cluster, so that its start loads no measured run.
func (b *bench) restartManagerSettled(tenants int) error {
	if b.mgr != nil && b.mgr.cmd != nil {
		return nil
	}
	start := time.Now()
	if err := b.startManager(); err != nil {
		return err
	}
	want := map[string]int{"tenant": tenants}
	if b.ran("markdownview") {
		want["markdownview"] = b.totalViews()
	}
	if err := b.waitReconciled(want); err != nil {
		return fmt.Errorf("manager restarted between runs: %w", err)
	}
	log("manager restarted and settled in %s (%v)", time.Since(start).Round(time.Second), want)
	return nil
}

// quietWrites is how many writes the manager sends in a quiet window of
// --quiet, nothing changing.
func (b *bench) quietWrites() (float64, error) {
	log("quiet window %s", b.cfg.quiet)
	before, err := b.mgr.writes()
	if err != nil {
		return 0, err
	}
	time.Sleep(b.cfg.quiet)
	after, err := b.mgr.writes()
	if err != nil {
		return 0, err
	}
	return after.total() - before.total(), nil
}

// floorObjects are the objects Trellis keeps for one Tenant.
type floorObjects struct {
	namespaces   []client.Object
	inNamespaces []client.Object // bindings and guardrails
	role         *rbacv1.ClusterRole
	roleBinding  *rbacv1.ClusterRoleBinding
}

// all is every object, in the order they may be created.
func (o floorObjects) all() []client.Object {
	return append(append(slices.Clone(o.namespaces), o.inNamespaces...), o.role, o.roleBinding)
}

// floorTenantObjects are the objects Trellis keeps for a Tenant of variant v
// called name (spec of Tenant i): the same kinds, names, labels and content.
func floorTenantObjects(v tenantVariant, name string, i int) floorObjects {
	t := benchTenant(v, 0, i)
	t.Name = name
	labels := map[string]string{"app.kubernetes.io/managed-by": "bench", "tenancy.trellis.dev/tenant": name}
	subject := []rbacv1.Subject{{Kind: "Group", Name: name + "-admins", APIGroup: rbacv1.GroupName}}
	namespaces := make([]string, 0, len(tenantEnvs))
	var o floorObjects
	for _, env := range tenantEnvs {
		ns := name + "-" + env
		namespaces = append(namespaces, ns)
		nsLabels := map[string]string{"app.kubernetes.io/managed-by": "bench", "tenancy.trellis.dev/tenant": name}
		if v.guardrails {
			nsLabels["pod-security.kubernetes.io/enforce"] = "restricted"
			nsLabels["pod-security.kubernetes.io/warn"] = "restricted"
			nsLabels["tenancy.trellis.dev/network-isolation"] = "true"
			nsLabels["cost-center"] = "bench"
		}
		o.namespaces = append(o.namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: nsLabels, Annotations: map[string]string{"tenancy.trellis.dev/tenant-uid": "floor"}}})
		objs := []client.Object{
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trellis-tenant-admin", Labels: labels},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"}, Subjects: subject},
		}
		if v.guardrails {
			limits := make([]corev1.LimitRangeItem, 0, len(t.Spec.LimitRange.Limits))
			for _, l := range t.Spec.LimitRange.Limits {
				limits = append(limits, corev1.LimitRangeItem{Type: l.Type, Max: l.Max, Min: l.Min, Default: l.Default, DefaultRequest: l.DefaultRequest})
			}
			objs = append(objs,
				&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trellis-tenant-viewer", Labels: labels},
					RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
					Subjects: []rbacv1.Subject{{Kind: "Group", Name: name + "-viewers", APIGroup: rbacv1.GroupName}}},
				&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trellis-tenant-quota", Labels: labels},
					Spec: corev1.ResourceQuotaSpec{Hard: t.Spec.Quota.Hard}},
				&corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trellis-tenant-limits", Labels: labels},
					Spec: corev1.LimitRangeSpec{Limits: limits}},
				&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trellis-tenant-isolation", Labels: labels},
					Spec: networkingv1.NetworkPolicySpec{
						PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
						Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
							{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenancy.trellis.dev/tenant": name}}},
							{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
								Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{"ingress-nginx"}}}}},
						}}},
					}},
			)
		}
		o.inNamespaces = append(o.inNamespaces, objs...)
	}
	role := "trellis:tenant:" + name
	o.role = &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role, Labels: labels}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"tenancy.trellis.dev"}, Resources: []string{"tenants"}, ResourceNames: []string{name}, Verbs: []string{"get", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, ResourceNames: namespaces, Verbs: []string{"get", "watch"}},
	}}
	o.roleBinding = &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role, Labels: labels},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}, Subjects: subject}
	return o
}
