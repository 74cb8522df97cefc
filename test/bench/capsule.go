package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The Capsule scenario (capsule): the peer platform teams run for tenancy,
// side by side with Trellis' Tenants on the same cluster in the same run.
// Capsule (bin/capsule, built by make capsule from its released source) runs
// as a process out of the cluster, with the chart's defaults (--workers 1,
// --client-connection-qps 20, --client-connection-burst 30) unless
// --capsule-args says otherwise, but a cache-sync timeout of 30 min (see
// startCapsule). N Capsule Tenants of 3 namespaces each,
// every namespace with the owner's RoleBinding, a ResourceQuota, a
// LimitRange and a NetworkPolicy (Capsule's spec for them, the same content
// as Trellis' Tenants with every guardrail). Capsule's namespace webhook is
// not registered: the bench creates each namespace with the ownerReference
// to its Tenant that the webhook would have set when an owner creates it
// (Capsule finds a Tenant's namespaces by that reference). The time is until
// Capsule has written all four objects in every namespace (watched, not
// polled). The floor makes the writes any operator of Capsule's Tenants must
// make: the Tenant's create and its namespaces (the user's, as in Capsule's
// run), the same objects created directly (namespaces carrying the tenant
// label Capsule adds) and one status patch of the Tenant. It is the floor
// Trellis' Tenants are held to: no client-side rate limit and as many
// Tenants in flight as Trellis' floor (--workers), each Tenant's kinds one
// after another and its namespaces in parallel, as Capsule writes them.
// Capsule's own limits (one worker, QPS 20) are its choice, and part of
// what its ratio measures; a floor with them would wait on the same
// bottleneck and say nothing. Trellis' manager is stopped throughout,
// and Capsule is stopped during the floor runs, so each side runs alone. It
// runs after every scenario that needs the manager (writecost, after it,
// stops the manager anyway); its rows are shown next to the Tenant rows.

const (
	capsuleVersion   = "v0.14.0"
	capsuleGroup     = "capsule.clastix.io"
	capsuleNamespace = "capsule-system"
	// capsuleTenantLabel is the label Capsule sets on the objects it
	// writes for a Tenant, and capsuleNamespaceLabel the one it sets on
	// the Tenant's namespaces.
	capsuleTenantLabel    = "projectcapsule.dev/tenant"
	capsuleNamespaceLabel = "capsule.clastix.io/tenant"
)

var capsuleTenantGVK = schema.GroupVersionKind{Group: capsuleGroup, Version: "v1beta2", Kind: "Tenant"}

// capsuleProc is a running Capsule and the addresses it serves.
type capsuleProc struct {
	cmd         *exec.Cmd
	metricsAddr string
	done        chan struct{}
	// synced is how long its controllers took from start to run workers.
	synced time.Duration
}

// controllersStarted says whether every controller Capsule started runs its
// workers (its caches synced), from controller-runtime's log lines.
func controllersStarted(logPath string) (bool, error) {
	raw, err := os.ReadFile(logPath)
	if err != nil {
		return false, err
	}
	started := strings.Count(string(raw), `"msg":"Starting Controller"`)
	return started > 0 && strings.Count(string(raw), `"msg":"Starting workers"`) == started, nil
}

func (b *bench) capsuleScenario() error {
	ctx := context.Background()
	bin := filepath.Join(b.bin, "capsule")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("bin/capsule is missing: run make capsule, which builds Capsule %s from $(PEERS)/capsule-%s.tar.gz (%w)", capsuleVersion, capsuleVersion, err)
	}
	n := b.cfg.tenants
	workers, qps, burst, err := capsuleLimits(b.cfg.capsuleArgs)
	if err != nil {
		return err
	}
	b.mgr.stop() // Capsule alone, its floor alone
	if err := b.installCapsule(ctx); err != nil {
		return err
	}
	floorC, err := b.capsuleFloorClient()
	if err != nil {
		return err
	}
	log("capsule floor: no client-side limit, %d Tenants in flight, as Trellis' floor (Capsule: QPS %g, burst %d, %d workers)", b.cfg.workers, qps, burst, workers)
	floorRun := func(round string) (runCost, error) {
		if err := b.waitControllerManagerCaughtUp(ctx); err != nil {
			return runCost{}, err
		}
		return b.measure(fmt.Sprintf("capsule floor %s: %d Capsule Tenants' objects created directly, with their Tenants' create and status patch", round, n),
			b.floorWrites.counts, func() error { return b.capsuleFloor(ctx, floorC, b.cfg.workers, round, n) }, nil)
	}
	before, err := floorRun("a")
	if err != nil {
		return err
	}
	// Capsule would reconcile the floor's Tenants when it starts: they go
	// first, their objects orphaned (kept, without the owner reference).
	if err := b.orphanCapsuleTenants(ctx, "a"); err != nil {
		return err
	}
	if err := b.waitControllerManagerCaughtUp(ctx); err != nil {
		return err
	}
	p, err := b.startCapsule(bin)
	if err != nil {
		return err
	}
	defer p.stop()
	run, ready, quiet, err := b.measureCapsule(ctx, p, n)
	if err != nil {
		return err
	}
	p.stop()
	after, err := floorRun("b")
	if err != nil {
		return err
	}
	floor := meanCost(before, after)
	log("capsule: %s against floor %s then %s: %.2f×", run.took, before.took, after.took, run.took.Seconds()/floor.took.Seconds())

	scenario := fmt.Sprintf("Capsule %s: %d Tenants × 3 namespaces, owner RoleBinding, quota, limits, network policy", capsuleVersion, n)
	rows := []row{
		{Scenario: scenario, Figure: "time until every namespace's 4 objects (" + tenantFloorName + ")", Value: run.took.Seconds(), Unit: "s",
			Floor: floor.took.Seconds(), Ratio: run.took.Seconds() / floor.took.Seconds(), Target: "report", Met: true},
		{Scenario: "same", Figure: "time until all Capsule Tenants Ready", Value: ready.Seconds(), Unit: "s", Target: "report", Met: true},
		{Scenario: "same", Figure: "API writes per tenant, Events included", Value: run.writes.total() / float64(n), Unit: "writes",
			Floor: floor.writes.total() / float64(n), Ratio: run.writes.total() / floor.writes.total(), Target: "report", Met: true},
		{Scenario: "same", Figure: "kube-apiserver CPU (" + tenantFloorName + ")", Value: run.cpu["kube-apiserver"], Unit: "s",
			Floor: floor.cpu["kube-apiserver"], Ratio: run.cpu["kube-apiserver"] / floor.cpu["kube-apiserver"], Target: "report", Met: true},
		{Scenario: "same", Figure: "Capsule CPU", Value: run.cpu["capsule"], Unit: "s", Target: "report", Met: true},
		{Scenario: "same", Figure: "Capsule start until every controller's caches synced", Value: p.synced.Seconds(), Unit: "s", Target: "report", Met: true},
		{Scenario: "same", Figure: fmt.Sprintf("writes in a %s quiet window", b.cfg.quiet), Value: quiet, Unit: "writes", Target: "report (Trellis: 0)", Met: true},
		{Scenario: "same", Figure: "namespaces created with the owner reference Capsule's webhook sets", Value: float64(3 * n), Unit: "namespaces", Target: "report", Met: true},
	}
	b.insertRows(rows)
	return nil
}

// insertRows adds rows after the Tenant scenario's, or at the end if it did
// not run.
func (b *bench) insertRows(rows []row) {
	at := len(b.rows)
	if b.ran("tenant") && b.tenantRowsEnd <= len(b.rows) {
		at = b.tenantRowsEnd
	}
	tail := append([]row{}, b.rows[at:]...)
	b.rows = b.rows[:at]
	for _, r := range rows {
		b.add(r)
	}
	b.rows = append(b.rows, tail...)
}

// capsuleLimits are Capsule's --workers, --client-connection-qps and
// --client-connection-burst: its defaults unless args set them.
func capsuleLimits(args string) (workers int, qps float64, burst int, err error) {
	workers, qps, burst = 1, 20, 30
	fields := strings.Fields(args)
	for i, a := range fields {
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !hasValue && i+1 < len(fields) {
			value = fields[i+1]
		}
		switch name {
		case "workers":
			workers, err = strconv.Atoi(value)
		case "client-connection-qps":
			qps, err = strconv.ParseFloat(value, 64)
		case "client-connection-burst":
			burst, err = strconv.Atoi(value)
		}
		if err != nil {
			return 0, 0, 0, fmt.Errorf("--capsule-args %s: %w", a, err)
		}
	}
	return workers, qps, burst, nil
}

// capsuleFloorClient writes the Capsule floor with no client-side rate
// limit, counted like every floor.
func (b *bench) capsuleFloorClient() (client.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", b.kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS = -1 // client-go: no rate limiter
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	return client.New(b.floorWrites.wrap(cfg), client.Options{Scheme: scheme})
}

// installCapsule applies Capsule's CRDs from its unpacked source (beside
// bin/capsule's target, as make capsule leaves it), its namespace and the
// CapsuleConfiguration it reads at start: dynamic admission named but with
// no webhooks (it panics without them; with none it registers nothing with
// the API server), and no TLS reconciler (the bench makes the certificate).
func (b *bench) installCapsule(ctx context.Context) error {
	target, err := filepath.EvalSymlinks(filepath.Join(b.bin, "capsule"))
	if err != nil {
		return err
	}
	crds, err := filepath.Glob(filepath.Join(b.bin, ".src", filepath.Base(target), "charts", "capsule", "crds", "*.yaml"))
	if err != nil || len(crds) == 0 {
		return fmt.Errorf("no Capsule CRDs under bin/.src/%s/charts/capsule/crds: run make capsule (%v)", filepath.Base(target), err)
	}
	for _, crd := range crds {
		if err := b.kubectlIn(nil, "apply", "--server-side", "-f", crd); err != nil {
			return err
		}
	}
	if err := b.kubectlIn(nil, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"); err != nil {
		return err
	}
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: capsuleNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	unused := "https://127.0.0.1:1/unused" // no webhook names it
	cfg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": capsuleGroup + "/v1beta2", "kind": "CapsuleConfiguration",
		"metadata": map[string]any{"name": "default"},
		"spec": map[string]any{
			"enableTLSReconciler": false,
			"cacheInvalidation":   "0s",
			"rbac":                map[string]any{},
			"admission": map[string]any{
				"validating": map[string]any{"name": "capsule-bench-validating", "client": map[string]any{"url": unused}},
				"mutating":   map[string]any{"name": "capsule-bench-mutating", "client": map[string]any{"url": unused}},
			},
		},
	}}
	if err := b.c.Create(ctx, cfg); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("CapsuleConfiguration: %w", err)
	}
	return nil
}

// startCapsule runs Capsule with a loopback serving certificate made here for
// its webhook server, and waits until every controller's caches have synced.
// Its health probe listens on :10080, fixed: two Capsules cannot run at once.
func (b *bench) startCapsule(bin string) (*capsuleProc, error) {
	certDir, err := os.MkdirTemp("", "capsule-bench-cert")
	if err != nil {
		return nil, err
	}
	if err := writeLoopbackCert(certDir); err != nil {
		return nil, err
	}
	p := &capsuleProc{metricsAddr: freeAddr(), done: make(chan struct{})}
	logFile, err := os.Create(filepath.Join(b.root, ".dev", b.cluster+"-capsule.log"))
	if err != nil {
		return nil, err
	}
	args := append([]string{"--metrics-addr", p.metricsAddr,
		"--webhook-port", strconv.Itoa(freePort()), "--webhook-cert-path", certDir, "--zap-log-level", "info",
		// With the default (2 min) it exits at start on a cluster of this
		// run's size: its GlobalCustomQuota controller's Namespace handler
		// lists through its QPS-20 client on every namespace event, so that
		// informer cannot sync in time. The time it takes is a row.
		"--cache-sync-timeout", "30m"},
		strings.Fields(b.cfg.capsuleArgs)...)
	p.cmd = exec.Command(bin, args...)
	// It has no --kubeconfig flag; controller-runtime reads $KUBECONFIG.
	p.cmd.Env = append(os.Environ(), "KUBECONFIG="+b.kubeconfig, "NAMESPACE="+capsuleNamespace, "SERVICE_ACCOUNT=capsule")
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	start := time.Now()
	err = waitFor(30*time.Minute, func() (bool, error) {
		select {
		case <-p.done:
			return false, fmt.Errorf("capsule exited at start (%s; see %s)", p.cmd.ProcessState, logFile.Name())
		default:
		}
		return controllersStarted(logFile.Name())
	}, time.Second)
	if err != nil {
		p.stop()
		return nil, err
	}
	p.synced = time.Since(start)
	log("capsule started, every controller's caches synced, in %s", p.synced.Round(100*time.Millisecond))
	return p, nil
}

func (p *capsuleProc) stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.cmd = nil
}

// requests is every request Capsule sent, by method (client-go's
// rest_client_requests_total, which controller-runtime serves).
func (p *capsuleProc) requests() (writeCounts, error) {
	fams, err := (&managerProc{metricsAddr: p.metricsAddr}).scrape()
	if err != nil {
		return nil, err
	}
	out := writeCounts{}
	if f, ok := fams["rest_client_requests_total"]; ok {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if l.GetName() == "method" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out, nil
}

// writes is Capsule's mutating requests so far, by method.
func (p *capsuleProc) writes() (writeCounts, error) {
	reqs, err := p.requests()
	if err != nil {
		return nil, err
	}
	out := writeCounts{}
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		if v, ok := reqs[m]; ok {
			out[m] = v
		}
	}
	return out, nil
}

// measureCapsule creates n Capsule Tenants and their namespaces and waits,
// on watches, until Capsule has written every namespace's RoleBinding,
// ResourceQuota, LimitRange and NetworkPolicy; then until every Tenant is
// Ready; then counts its writes over a quiet window.
func (b *bench) measureCapsule(ctx context.Context, p *capsuleProc, n int) (r runCost, ready time.Duration, quiet float64, err error) {
	const run = "c" // names: cap<run><i>
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	defer func() {
		select {
		case <-p.done:
			err = fmt.Errorf("capsule exited during the run (%s): %w", p.cmd.ProcessState, err)
		default:
		}
	}()
	cpu0, err := b.cpu()
	if err != nil {
		return r, 0, 0, err
	}
	capsuleCPU0, err := cpuSeconds(p.cmd.Process.Pid)
	if err != nil {
		return r, 0, 0, err
	}
	w0, err := p.writes()
	if err != nil {
		return r, 0, 0, err
	}
	ours := func(o client.Object) bool {
		return strings.HasPrefix(o.GetLabels()[capsuleTenantLabel], "cap"+run)
	}
	kinds := []schema.GroupVersionKind{
		rbacv1.SchemeGroupVersion.WithKind("RoleBindingList"), corev1.SchemeGroupVersion.WithKind("ResourceQuotaList"),
		corev1.SchemeGroupVersion.WithKind("LimitRangeList"), networkingv1.SchemeGroupVersion.WithKind("NetworkPolicyList"),
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		last    time.Time
		watchEr error
	)
	// Every kind is listed before the first Tenant is created, so no
	// object is missed and none counted twice.
	listed := make(chan struct{}, len(kinds))
	for _, gvk := range kinds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(gvk)
			listed <- struct{}{}
			at, err := watchUntil(ctx, b.wc, list, ours, func(runtime.Object) bool { return true },
				func(seen, _ int) bool { return seen >= 3*n }, 30*time.Minute, client.HasLabels{capsuleTenantLabel})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				watchEr = errors.Join(watchEr, fmt.Errorf("capsule: waiting for %s: %w", gvk.Kind, err))
			}
			if at.After(last) {
				last = at
			}
		}()
	}
	for range kinds {
		<-listed
	}
	start := time.Now()
	if err := parallel(n, b.cfg.workers, func(i int) error {
		t := capsuleTenant(fmt.Sprintf("cap%s%d", run, i))
		if err := b.c.Create(ctx, t); err != nil {
			return err
		}
		for _, ns := range capsuleNamespaces(t, false) {
			if err := b.c.Create(ctx, ns); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return r, 0, 0, fmt.Errorf("capsule: %w", err)
	}
	log("capsule: %d Tenants and their namespaces created in %s", n, time.Since(start))
	wg.Wait()
	if watchEr != nil {
		return r, 0, 0, watchEr
	}
	r.took = last.Sub(start)
	readyAt, err := watchUntil(ctx, b.wc, &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": capsuleGroup + "/v1beta2", "kind": "TenantList"}},
		func(o client.Object) bool { return strings.HasPrefix(o.GetName(), "cap"+run) }, capsuleTenantReady,
		func(_, ok int) bool { return ok >= n }, 30*time.Minute)
	if err != nil {
		return r, 0, 0, fmt.Errorf("capsule: waiting for the Tenants to be Ready: %w", err)
	}
	ready = readyAt.Sub(start)
	time.Sleep(2 * time.Second) // let the last writes land before counting
	w1, err := p.writes()
	if err != nil {
		return r, 0, 0, err
	}
	r.writes = w1.sub(w0)
	cpu1, err := b.cpu()
	if err != nil {
		return r, 0, 0, err
	}
	capsuleCPU1, err := cpuSeconds(p.cmd.Process.Pid)
	if err != nil {
		return r, 0, 0, err
	}
	r.cpu = cpu1.minus(cpu0)
	r.cpu["capsule"] = capsuleCPU1 - capsuleCPU0
	log("capsule: objects in %s, all Ready in %s, writes %s, CPU %s, capsule %.1fs", r.took, ready, r.writes, r.cpu, r.cpu["capsule"])
	log("capsule: quiet window %s", b.cfg.quiet)
	time.Sleep(b.cfg.quiet)
	w2, err := p.writes()
	if err != nil {
		return r, 0, 0, err
	}
	return r, ready, w2.total() - w1.total(), nil
}

// capsuleTenantReady says whether a Capsule Tenant's Ready condition is True.
func capsuleTenantReady(o runtime.Object) bool {
	conds, _, _ := unstructured.NestedSlice(o.(*unstructured.Unstructured).Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// capsuleTenant is a Capsule Tenant (v1beta2) with the guardrails of
// Trellis' "every guardrail" Tenants: its owner group bound to admin in each
// namespace, a quota per namespace, container limits, and ingress only from
// the tenant's namespaces and ingress-nginx.
func capsuleTenant(name string) *unstructured.Unstructured {
	q := func(s string) string { v := resource.MustParse(s); return v.String() }
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": capsuleGroup + "/v1beta2", "kind": "Tenant",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"owners": []any{map[string]any{"kind": "Group", "name": name + "-admins", "clusterRoles": []any{"admin"}}},
			"resourceQuotas": map[string]any{"scope": "Namespace", "items": []any{map[string]any{"hard": map[string]any{
				"requests.cpu": q("4"), "requests.memory": q("8Gi"), "pods": q("50")}}}},
			"limitRanges": map[string]any{"items": []any{map[string]any{"limits": []any{map[string]any{
				"type":           "Container",
				"default":        map[string]any{"cpu": q("500m"), "memory": q("512Mi")},
				"defaultRequest": map[string]any{"cpu": q("100m"), "memory": q("128Mi")},
				"max":            map[string]any{"cpu": q("2"), "memory": q("2Gi")},
			}}}}},
			"networkPolicies": map[string]any{"items": []any{capsuleNetworkPolicySpec(name)}},
		},
	}}
}

func capsuleNetworkPolicySpec(tenant string) map[string]any {
	return map[string]any{
		"podSelector": map[string]any{},
		"policyTypes": []any{"Ingress"},
		"ingress": []any{map[string]any{"from": []any{
			map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{capsuleNamespaceLabel: tenant}}},
			map[string]any{"namespaceSelector": map[string]any{"matchExpressions": []any{map[string]any{
				"key": "kubernetes.io/metadata.name", "operator": "In", "values": []any{"ingress-nginx"}}}}},
		}}},
	}
}

// capsuleNamespaces are Tenant t's namespaces as its owner creates them, with
// the ownerReference Capsule's namespace webhook would have set (the bench
// does not register the webhook); labelled, the floor's, also carry the
// tenant label Capsule adds.
func capsuleNamespaces(t *unstructured.Unstructured, labelled bool) []*corev1.Namespace {
	out := make([]*corev1.Namespace, 0, len(tenantEnvs))
	for _, env := range tenantEnvs {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: t.GetName() + "-" + env, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: capsuleTenantGVK.GroupVersion().String(), Kind: capsuleTenantGVK.Kind, Name: t.GetName(), UID: t.GetUID()}}}}
		if labelled {
			ns.Labels = map[string]string{capsuleNamespaceLabel: t.GetName()}
		}
		out = append(out, ns)
	}
	return out
}

// capsuleFloor makes, for n Tenants, the writes any operator of Capsule's
// Tenants must make: the user's Tenant and namespaces (b.c, as in Capsule's
// run, with b.cfg.workers in flight), and, through c with workers Tenants
// in flight, as each Tenant's namespaces
// exist, what Capsule writes for it: kind after kind (network policies,
// limit ranges, quotas, RoleBindings, as Capsule syncs them), each kind in
// its namespaces in parallel, then one status patch, Ready.
func (b *bench) capsuleFloor(ctx context.Context, c client.Client, workers int, round string, n int) error {
	made := make(chan *unstructured.Unstructured, n)
	errc := make(chan error, 1)
	go func() {
		errc <- parallel(n, b.cfg.workers, func(i int) error {
			t := capsuleTenant(fmt.Sprintf("fcap%s%d", round, i))
			if err := b.c.Create(ctx, t); err != nil {
				return err
			}
			for _, ns := range capsuleNamespaces(t, true) {
				if err := b.c.Create(ctx, ns); err != nil {
					return err
				}
			}
			made <- t
			return nil
		})
		close(made)
	}()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range workers {
		wg.Go(func() {
			for t := range made {
				if err := capsuleFloorTenant(ctx, c, t); err != nil {
					mu.Lock()
					first = errors.Join(first, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(<-errc, first)
}

// capsuleFloorTenant writes what Capsule writes for Tenant t: the same
// objects (names, labels, owner reference, spec) and one status patch.
func capsuleFloorTenant(ctx context.Context, c client.Client, t *unstructured.Unstructured) error {
	name := t.GetName()
	owner := []metav1.OwnerReference{{APIVersion: capsuleTenantGVK.GroupVersion().String(), Kind: capsuleTenantGVK.Kind, Name: name, UID: t.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	meta := func(ns, objName, kindLabel, value string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: objName, OwnerReferences: owner, Labels: map[string]string{
			capsuleTenantLabel: name, "projectcapsule.dev/managed-by": "controller", kindLabel: value}}
	}
	spec := capsuleTenantSpec(t)
	kinds := []func(ns string) client.Object{
		func(ns string) client.Object {
			o := &networkingv1.NetworkPolicy{ObjectMeta: meta(ns, "capsule-"+name+"-0", "capsule.clastix.io/network-policy", "0")}
			o.Spec = spec.networkPolicy
			return o
		},
		func(ns string) client.Object {
			o := &corev1.LimitRange{ObjectMeta: meta(ns, "capsule-"+name+"-0", "capsule.clastix.io/limit-range", "0")}
			o.Spec = spec.limitRange
			return o
		},
		func(ns string) client.Object {
			o := &corev1.ResourceQuota{ObjectMeta: meta(ns, "capsule-"+name+"-0", "capsule.clastix.io/resource-quota", "0")}
			o.Spec = spec.quota
			return o
		},
		func(ns string) client.Object {
			return &rbacv1.RoleBinding{ObjectMeta: meta(ns, "capsule:managed:"+name+"-admin", "capsule.clastix.io/role-binding", name+"-admin"),
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
				Subjects: []rbacv1.Subject{{Kind: "Group", Name: name + "-admins", APIGroup: rbacv1.GroupName}}}
		},
	}
	for _, kind := range kinds {
		if err := parallel(len(tenantEnvs), len(tenantEnvs), func(i int) error {
			return c.Create(ctx, kind(name+"-"+tenantEnvs[i]))
		}); err != nil {
			return err
		}
	}
	namespaces := make([]any, 0, len(tenantEnvs))
	for _, env := range tenantEnvs {
		namespaces = append(namespaces, name+"-"+env)
	}
	patch := map[string]any{"status": map[string]any{
		"state": "Active", "size": int64(len(tenantEnvs)), "namespaces": namespaces,
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Succeeded", "message": "reconciled",
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}},
	}}
	raw, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	return c.Status().Patch(ctx, t, client.RawPatch(types.MergePatchType, raw))
}

// capsuleSpec is the typed spec of a Capsule Tenant's one item of each kind.
type capsuleSpec struct {
	networkPolicy networkingv1.NetworkPolicySpec
	limitRange    corev1.LimitRangeSpec
	quota         corev1.ResourceQuotaSpec
}

func capsuleTenantSpec(t *unstructured.Unstructured) capsuleSpec {
	var s capsuleSpec
	item := func(field string, into any) {
		items, _, _ := unstructured.NestedSlice(t.Object, "spec", field, "items")
		utilruntime.Must(runtime.DefaultUnstructuredConverter.FromUnstructured(items[0].(map[string]any), into))
	}
	item("networkPolicies", &s.networkPolicy)
	item("limitRanges", &s.limitRange)
	item("resourceQuotas", &s.quota)
	return s
}

// orphanCapsuleTenants deletes the floor's Capsule Tenants of round, their
// namespaces and objects orphaned by the garbage collector (kept, without
// the owner reference), and waits until they are gone.
func (b *bench) orphanCapsuleTenants(ctx context.Context, round string) error {
	list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": capsuleGroup + "/v1beta2", "kind": "TenantList"}}
	if err := b.c.List(ctx, list); err != nil {
		return err
	}
	var mine []unstructured.Unstructured
	for _, t := range list.Items {
		if strings.HasPrefix(t.GetName(), "fcap"+round) {
			mine = append(mine, t)
		}
	}
	start := time.Now()
	if err := parallel(len(mine), b.cfg.workers, func(i int) error {
		return client.IgnoreNotFound(b.c.Delete(ctx, &mine[i], client.PropagationPolicy(metav1.DeletePropagationOrphan)))
	}); err != nil {
		return err
	}
	err := waitFor(10*time.Minute, func() (bool, error) {
		left := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": capsuleGroup + "/v1beta2", "kind": "TenantList"}}
		if err := b.c.List(ctx, left); err != nil {
			return false, err
		}
		for _, t := range left.Items {
			if strings.HasPrefix(t.GetName(), "fcap"+round) {
				return false, nil
			}
		}
		return true, nil
	}, time.Second)
	log("capsule floor %s: %d Tenants deleted, objects orphaned, in %s", round, len(mine), time.Since(start).Round(time.Second))
	return err
}

// writeLoopbackCert writes a self-signed serving certificate for 127.0.0.1
// (tls.crt, tls.key) into dir: Capsule's webhook server will not start
// without one, though no webhook is registered.
func writeLoopbackCert(dir string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "capsule-bench"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
}
