package manager

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/trellis-dev/trellis/internal/concurrency"
	"github.com/trellis-dev/trellis/internal/controller/setup"
)

// knownControllers stands in for the controllers cmd/manager registers.
var knownControllers = []string{"markdownview", "other"}

// parseFlags binds fresh defaults to a fresh FlagSet and parses args.
func parseFlags(t *testing.T, args ...string) (*Options, error) {
	t.Helper()
	o := NewOptions()
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.BindFlags(fs)
	return o, fs.Parse(args)
}

func TestNewOptionsDefaults(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("POD_NAMESPACE", "")

	o := NewOptions()

	g.Expect(o.MetricsAddr).To(Equal(":8443"))
	g.Expect(o.SecureMetrics).To(BeTrue())
	g.Expect(o.ProbeAddr).To(Equal(":8081"))
	g.Expect(o.PprofAddr).To(BeEmpty())
	g.Expect(o.LeaderElect).To(BeFalse())
	g.Expect(o.LeaderElectionID).To(Equal("trellis.trellis.dev"))
	g.Expect(o.LeaseDuration).To(Equal(15 * time.Second))
	g.Expect(o.RenewDeadline).To(Equal(10 * time.Second))
	g.Expect(o.RetryPeriod).To(Equal(2 * time.Second))
	g.Expect(o.GracefulShutdownTimeout).To(Equal(30 * time.Second))
	g.Expect(o.SyncPeriod).To(Equal(10 * time.Hour))
	g.Expect(o.KubeAPIQPS).To(Equal(-1.0), "no client-side limit")
	g.Expect(o.KubeAPIBurst).To(Equal(100))
	g.Expect(o.Namespace).To(Equal(DefaultNamespace))
	g.Expect(o.Namespace).To(Equal("trellis-system"))
	g.Expect(o.Controllers).To(BeEmpty())
	g.Expect(o.MaxConcurrentReconciles.Default).To(Equal(4))
	g.Expect(o.MaxConcurrentReconciles.PerController).To(Equal(map[string]int{"tenant": 16}))
	g.Expect(o.RateLimit).To(Equal(setup.RateLimit{
		BaseDelay: 5 * time.Millisecond,
		MaxDelay:  1000 * time.Second,
		QPS:       10,
		Burst:     100,
	}))
	g.Expect(o.ViewerImage).To(Equal(DefaultViewerImage))
	g.Expect(o.TenantProtected).To(BeEmpty())
	g.Expect(o.TenantReverifyInterval).To(Equal(time.Minute))

	// The defaults are valid, with and without leader election.
	g.Expect(o.Validate(knownControllers)).To(Succeed())
	o.LeaderElect = true
	g.Expect(o.Validate(knownControllers)).To(Succeed())
}

func TestNewOptionsNamespaceFromEnv(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("POD_NAMESPACE", "team-a")

	g.Expect(NewOptions().Namespace).To(Equal("team-a"))

	o, err := parseFlags(t, "--namespace=team-b")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.Namespace).To(Equal("team-b"), "the flag wins over $POD_NAMESPACE")
}

func TestParseWithoutFlagsKeepsDefaults(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("POD_NAMESPACE", "")

	o, err := parseFlags(t)

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o).To(Equal(NewOptions()))
}

func TestParseMaxConcurrentReconciles(t *testing.T) {
	tests := []struct {
		name          string
		value         string
		wantDefault   int
		wantPerCtl    map[string]int
		wantErrSubstr string
	}{
		{name: "default and override", value: "2,markdownview=4", wantDefault: 2, wantPerCtl: map[string]int{"markdownview": 4}},
		{name: "default only", value: "3", wantDefault: 3, wantPerCtl: map[string]int{}},
		{name: "override only keeps the defaults", value: "markdownview=4", wantDefault: 4, wantPerCtl: map[string]int{"markdownview": 4, "tenant": 16}},
		{name: "several overrides", value: "markdownview=4,other=2", wantDefault: 4, wantPerCtl: map[string]int{"markdownview": 4, "other": 2, "tenant": 16}},
		{name: "tenant overridden", value: "tenant=2", wantDefault: 4, wantPerCtl: map[string]int{"tenant": 2}},
		{name: "a bare N sets every controller, tenant too", value: "8", wantDefault: 8, wantPerCtl: map[string]int{}},
		{name: "spaces and empty items", value: " 2 , markdownview = 4 ,", wantDefault: 2, wantPerCtl: map[string]int{"markdownview": 4}},
		{name: "empty", value: "", wantDefault: 4, wantPerCtl: map[string]int{"tenant": 16}},
		{name: "zero parses (Validate rejects it)", value: "0", wantDefault: 0, wantPerCtl: map[string]int{}},
		{name: "not a number", value: "x", wantErrSubstr: `"x": want N or name=N`},
		{name: "override not a number", value: "2,markdownview=x", wantErrSubstr: `"markdownview=x": want N or name=N`},
		{name: "override without number", value: "markdownview=", wantErrSubstr: "want N or name=N"},
		{name: "float", value: "1.5", wantErrSubstr: "want N or name=N"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			o, err := parseFlags(t, "--max-concurrent-reconciles="+tt.value)
			if tt.wantErrSubstr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErrSubstr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(o.MaxConcurrentReconciles.Default).To(Equal(tt.wantDefault))
			g.Expect(o.MaxConcurrentReconciles.PerController).To(Equal(tt.wantPerCtl))
		})
	}
}

func TestParseControllers(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{name: "two", args: []string{"--controllers=a,b"}, want: []string{"a", "b"}},
		{name: "one", args: []string{"--controllers=markdownview"}, want: []string{"markdownview"}},
		{name: "spaces and empty items", args: []string{"--controllers= a , ,b,"}, want: []string{"a", "b"}},
		{name: "empty means all", args: []string{"--controllers="}, want: nil},
		{name: "not given", args: nil, want: nil},
		{name: "the last flag wins", args: []string{"--controllers=a", "--controllers=b"}, want: []string{"b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			o, err := parseFlags(t, tt.args...)
			g.Expect(err).NotTo(HaveOccurred())
			if tt.want == nil {
				g.Expect(o.Controllers).To(BeEmpty())
			} else {
				g.Expect([]string(o.Controllers)).To(Equal(tt.want))
			}
			g.Expect(o.Controllers.String()).To(Equal(strings.Join(tt.want, ",")))
		})
	}
}

func TestParseBindsEveryFlag(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("POD_NAMESPACE", "")

	o, err := parseFlags(t,
		"--metrics-bind-address=:9000",
		"--metrics-secure=false",
		"--health-probe-bind-address=:9001",
		"--pprof-bind-address=:9002",
		"--leader-elect",
		"--leader-election-id=custom-id",
		"--leader-election-namespace=le-ns",
		"--leader-elect-lease-duration=60s",
		"--leader-elect-renew-deadline=40s",
		"--leader-elect-retry-period=5s",
		"--graceful-shutdown-timeout=1m",
		"--sync-period=1h",
		"--kube-api-qps=50.5",
		"--kube-api-burst=70",
		"--namespace=ns",
		"--controllers=markdownview",
		"--max-concurrent-reconciles=3,markdownview=5",
		"--rate-limiter-base-delay=10ms",
		"--rate-limiter-max-delay=1m",
		"--rate-limiter-qps=2.5",
		"--rate-limiter-burst=7",
		"--viewer-image=registry.example.com/viewer:1",
		"--viewer-image-allow=registry.example.com/*",
		"--artifact-hosts=source-controller.flux.svc.cluster.local., artifacts.example.com:8443",
		"--tenant-protected-namespaces=^prod-.*$",
		"--tenant-reverify-interval=5m",
		"--storage-sweep-interval=10m",
	)

	g.Expect(err).NotTo(HaveOccurred())
	want := NewOptions()
	want.MetricsAddr = ":9000"
	want.SecureMetrics = false
	want.ProbeAddr = ":9001"
	want.PprofAddr = ":9002"
	want.LeaderElect = true
	want.LeaderElectionID = "custom-id"
	want.LeaderElectionNamespace = "le-ns"
	want.LeaseDuration = 60 * time.Second
	want.RenewDeadline = 40 * time.Second
	want.RetryPeriod = 5 * time.Second
	want.GracefulShutdownTimeout = time.Minute
	want.SyncPeriod = time.Hour
	want.KubeAPIQPS = 50.5
	want.KubeAPIBurst = 70
	want.Namespace = "ns"
	want.Controllers = stringList{"markdownview"}
	want.MaxConcurrentReconciles = concurrency.Flag{Default: 3, PerController: map[string]int{"markdownview": 5}, Defaults: defaultConcurrency}
	want.RateLimit = setup.RateLimit{BaseDelay: 10 * time.Millisecond, MaxDelay: time.Minute, QPS: 2.5, Burst: 7}
	want.ViewerImage = "registry.example.com/viewer:1"
	want.ViewerImageAllow = "registry.example.com/*"
	want.ArtifactHosts = stringList{"source-controller.flux.svc.cluster.local.", "artifacts.example.com:8443"}
	want.TenantProtected = "^prod-.*$"
	want.TenantReverifyInterval = 5 * time.Minute
	want.StorageSweepInterval = 10 * time.Minute
	g.Expect(o).To(Equal(want))
	g.Expect(o.Validate(knownControllers)).To(Succeed())
}

func TestParseRejectsMalformedValues(t *testing.T) {
	for _, arg := range []string{
		"--sync-period=often",
		"--rate-limiter-base-delay=5",
		"--rate-limiter-qps=fast",
		"--rate-limiter-burst=1.5",
		"--kube-api-burst=x",
		"--leader-elect=maybe",
		"--no-such-flag",
	} {
		t.Run(arg, func(t *testing.T) {
			g := NewWithT(t)
			_, err := parseFlags(t, arg)
			g.Expect(err).To(HaveOccurred())
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(o *Options)
		args    []string // parsed before mutate
		wantErr []string // substrings; empty means valid
	}{
		{name: "defaults"},
		{name: "known controllers", args: []string{"--controllers=markdownview,other"}},
		{name: "known override", args: []string{"--max-concurrent-reconciles=2,markdownview=4"}},
		{
			name:    "unknown controller in --controllers",
			args:    []string{"--controllers=markdownview,nope"},
			wantErr: []string{`--controllers: unknown controller "nope"`, "known: markdownview, other"},
		},
		{
			name:    "unknown controller in --max-concurrent-reconciles",
			args:    []string{"--max-concurrent-reconciles=markdownview=2,nope=3"},
			wantErr: []string{`--max-concurrent-reconciles: unknown controller "nope"`},
		},
		{
			name:    "empty controller name in --max-concurrent-reconciles",
			args:    []string{"--max-concurrent-reconciles==3"},
			wantErr: []string{`--max-concurrent-reconciles: unknown controller ""`},
		},
		{
			name:    "zero override",
			args:    []string{"--max-concurrent-reconciles=markdownview=0"},
			wantErr: []string{"--max-concurrent-reconciles: markdownview must be at least 1"},
		},
		{
			name:    "zero default",
			args:    []string{"--max-concurrent-reconciles=0"},
			wantErr: []string{"--max-concurrent-reconciles must be at least 1"},
		},
		{
			name:    "negative default",
			args:    []string{"--max-concurrent-reconciles=-2,markdownview=4"},
			wantErr: []string{"--max-concurrent-reconciles must be at least 1"},
		},
		{
			name:    "rate limiter base delay zero",
			args:    []string{"--rate-limiter-base-delay=0s"},
			wantErr: []string{"rate limiter base delay must be positive"},
		},
		{
			name:    "rate limiter max below base",
			args:    []string{"--rate-limiter-base-delay=1s", "--rate-limiter-max-delay=100ms"},
			wantErr: []string{"rate limiter max delay 100ms is below its base delay 1s"},
		},
		{
			name:    "rate limiter qps zero",
			args:    []string{"--rate-limiter-qps=0"},
			wantErr: []string{"rate limiter QPS must be positive"},
		},
		{
			name:    "rate limiter burst zero",
			args:    []string{"--rate-limiter-burst=0"},
			wantErr: []string{"rate limiter burst must be at least 1"},
		},
		{
			name: "leader election timing valid",
			args: []string{"--leader-elect", "--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=1s"},
		},
		{
			name:    "lease equals renew",
			args:    []string{"--leader-elect", "--leader-elect-lease-duration=10s", "--leader-elect-renew-deadline=10s"},
			wantErr: []string{"leader election needs lease duration (10s) > renew deadline (10s) > retry period (2s) > 0"},
		},
		{
			name:    "lease below renew",
			args:    []string{"--leader-elect", "--leader-elect-lease-duration=5s"},
			wantErr: []string{"leader election needs lease duration"},
		},
		{
			name:    "renew equals retry",
			args:    []string{"--leader-elect", "--leader-elect-retry-period=10s"},
			wantErr: []string{"leader election needs lease duration"},
		},
		{
			name:    "retry zero",
			args:    []string{"--leader-elect", "--leader-elect-retry-period=0s"},
			wantErr: []string{"leader election needs lease duration"},
		},
		{
			name:    "retry negative",
			args:    []string{"--leader-elect", "--leader-elect-retry-period=-1s"},
			wantErr: []string{"leader election needs lease duration"},
		},
		{
			name: "bad leader election timing is ignored without --leader-elect",
			args: []string{"--leader-elect-lease-duration=1s", "--leader-elect-renew-deadline=5s", "--leader-elect-retry-period=0s"},
		},
		{
			name:    "kube api qps zero",
			args:    []string{"--kube-api-qps=0"},
			wantErr: []string{"--kube-api-qps must be positive (then --kube-api-burst at least 1) or negative"},
		},
		{
			name:    "kube api qps not a number",
			args:    []string{"--kube-api-qps=NaN"},
			wantErr: []string{"--kube-api-qps must be positive"},
		},
		{
			name:    "kube api burst zero under a limit",
			args:    []string{"--kube-api-qps=50", "--kube-api-burst=0"},
			wantErr: []string{"--kube-api-burst at least 1"},
		},
		{
			name:    "sync period zero",
			args:    []string{"--sync-period=0s"},
			wantErr: []string{"--sync-period must be positive"},
		},
		{
			name:    "sync period negative",
			mutate:  func(o *Options) { o.SyncPeriod = -time.Minute },
			wantErr: []string{"--sync-period must be positive"},
		},
		{name: "tenant reverify interval of 1s", args: []string{"--tenant-reverify-interval=1s"}},
		{
			name:    "tenant reverify interval below 1s",
			args:    []string{"--tenant-reverify-interval=999ms"},
			wantErr: []string{"--tenant-reverify-interval must be at least 1s"},
		},
		{
			name:    "tenant reverify interval zero",
			args:    []string{"--tenant-reverify-interval=0s"},
			wantErr: []string{"--tenant-reverify-interval must be at least 1s"},
		},
		{name: "storage sweep interval of 1s", args: []string{"--storage-sweep-interval=1s"}},
		{name: "storage sweep off", args: []string{"--storage-sweep-interval=0"}},
		{
			name:    "storage sweep interval below 1s",
			args:    []string{"--storage-sweep-interval=500ms"},
			wantErr: []string{"--storage-sweep-interval must be 0 (off) or at least 1s"},
		},
		{
			name:    "storage sweep interval negative",
			args:    []string{"--storage-sweep-interval=-1m"},
			wantErr: []string{"--storage-sweep-interval must be 0 (off) or at least 1s"},
		},
		{name: "tenant protected namespaces pattern", args: []string{"--tenant-protected-namespaces=^(prod|staging)-"}},
		{
			name:    "tenant protected namespaces not a regular expression",
			args:    []string{"--tenant-protected-namespaces=prod-("},
			wantErr: []string{"--tenant-protected-namespaces: error parsing regexp"},
		},
		{name: "viewer image allow-list", args: []string{"--viewer-image-allow=registry.example.com/team/*, ghcr.io/acme/viewer"}},
		{name: "viewer image allow-list of everything", args: []string{"--viewer-image-allow=*"}},
		{
			name:    "viewer image allow-list with a tag",
			args:    []string{"--viewer-image-allow=registry.example.com/viewer:1"},
			wantErr: []string{`--viewer-image-allow: image pattern "registry.example.com/viewer:1": want a repository without tag or digest`},
		},
		{
			name:    "viewer image allow-list with a * inside",
			args:    []string{"--viewer-image-allow=registry.example.com/*/viewer"},
			wantErr: []string{"--viewer-image-allow: image pattern"},
		},
		{
			name:    "default allow-list needs a viewer image with a repository",
			args:    []string{"--viewer-image="},
			wantErr: []string{"--viewer-image-allow: default viewer image"},
		},
		{
			name: "every problem is reported at once",
			args: []string{
				"--controllers=nope",
				"--max-concurrent-reconciles=0,other=0",
				"--rate-limiter-burst=0",
				"--leader-elect", "--leader-elect-retry-period=0s",
				"--kube-api-qps=0",
				"--sync-period=0s",
				"--tenant-reverify-interval=0s",
				"--tenant-protected-namespaces=[",
			},
			wantErr: []string{
				`--controllers: unknown controller "nope"`,
				"--max-concurrent-reconciles: other must be at least 1",
				"--max-concurrent-reconciles must be at least 1",
				"rate limiter burst must be at least 1",
				"leader election needs lease duration",
				"--kube-api-qps must be positive",
				"--sync-period must be positive",
				"--tenant-reverify-interval must be at least 1s",
				"--tenant-protected-namespaces:",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			o, err := parseFlags(t, tt.args...)
			g.Expect(err).NotTo(HaveOccurred())
			if tt.mutate != nil {
				tt.mutate(o)
			}
			err = o.Validate(knownControllers)
			if len(tt.wantErr) == 0 {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(HaveOccurred())
			for _, want := range tt.wantErr {
				g.Expect(err.Error()).To(ContainSubstring(want))
			}
		})
	}
}

func TestEnabled(t *testing.T) {
	tests := []struct {
		name        string
		controllers stringList
		enabled     []string
		disabled    []string
	}{
		{name: "nil list enables all", controllers: nil, enabled: []string{"markdownview", "other", "anything"}},
		{name: "empty list enables all", controllers: stringList{}, enabled: []string{"markdownview", "other"}},
		{name: "one", controllers: stringList{"markdownview"}, enabled: []string{"markdownview"}, disabled: []string{"other", ""}},
		{name: "two", controllers: stringList{"markdownview", "other"}, enabled: []string{"markdownview", "other"}, disabled: []string{"third"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			o := NewOptions()
			o.Controllers = tt.controllers
			for _, name := range tt.enabled {
				g.Expect(o.Enabled(name)).To(BeTrue(), name)
			}
			for _, name := range tt.disabled {
				g.Expect(o.Enabled(name)).To(BeFalse(), name)
			}
		})
	}
}

func TestControllerOptions(t *testing.T) {
	g := NewWithT(t)
	o, err := parseFlags(t,
		"--max-concurrent-reconciles=2,markdownview=4",
		"--namespace=ops",
		"--viewer-image=registry.example.com/viewer:2",
		"--rate-limiter-base-delay=20ms",
		"--rate-limiter-max-delay=30s",
		"--rate-limiter-qps=3",
		"--rate-limiter-burst=9",
		"--tenant-protected-namespaces=^prod-",
		"--tenant-reverify-interval=2m",
		"--viewer-image-allow=registry.example.com/*",
		"--storage-sweep-interval=30s",
	)
	g.Expect(err).NotTo(HaveOccurred())
	wantRL := setup.RateLimit{BaseDelay: 20 * time.Millisecond, MaxDelay: 30 * time.Second, QPS: 3, Burst: 9}

	for name, wantN := range map[string]int{"markdownview": 4, "other": 2} {
		got := o.ControllerOptions(name)
		g.Expect(got.MaxConcurrentReconciles).To(Equal(wantN), name)
		g.Expect(got.RateLimit).To(Equal(wantRL), name)
		g.Expect(got.Namespace).To(Equal("ops"), name)
		g.Expect(got.ViewerImage).To(Equal("registry.example.com/viewer:2"), name)
		g.Expect(got.ViewerImageAllow).To(Equal("registry.example.com/*"), name)
		g.Expect(got.TenantProtectedNamespaces).To(Equal("^prod-"), name)
		g.Expect(got.TenantReverifyInterval).To(Equal(2*time.Minute), name)
		g.Expect(got.StorageSweepInterval).To(Equal(30*time.Second), name)
	}
}

func TestControllerOptionsDefaults(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("POD_NAMESPACE", "")

	got := NewOptions().ControllerOptions("markdownview")

	g.Expect(got.MaxConcurrentReconciles).To(Equal(4))
	g.Expect(NewOptions().ControllerOptions("tenant").MaxConcurrentReconciles).To(Equal(16))
	g.Expect(got.RateLimit).To(Equal(setup.DefaultRateLimit))
	g.Expect(got.Namespace).To(Equal(DefaultNamespace))
	g.Expect(got.ViewerImage).To(Equal(DefaultViewerImage))
	g.Expect(got.ViewerImageAllow).To(BeEmpty(), "empty: the repository of the viewer image")
	g.Expect(got.TenantProtectedNamespaces).To(BeEmpty())
	g.Expect(got.TenantReverifyInterval).To(Equal(time.Minute))
	g.Expect(got.StorageSweepInterval).To(Equal(5*time.Minute), "a few minutes")
}

func TestHelpListsEveryFlag(t *testing.T) {
	g := NewWithT(t)
	o := NewOptions()
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	var help strings.Builder
	fs.SetOutput(&help)
	o.BindFlags(fs)

	// PrintDefaults calls String on zero values of the custom flag types.
	g.Expect(fs.PrintDefaults).NotTo(Panic())

	for _, name := range []string{
		"metrics-bind-address", "metrics-secure", "health-probe-bind-address", "pprof-bind-address",
		"leader-elect", "leader-election-id", "leader-election-namespace",
		"leader-elect-lease-duration", "leader-elect-renew-deadline", "leader-elect-retry-period",
		"graceful-shutdown-timeout", "sync-period", "kube-api-qps", "kube-api-burst", "namespace",
		"controllers", "max-concurrent-reconciles",
		"rate-limiter-base-delay", "rate-limiter-max-delay", "rate-limiter-qps", "rate-limiter-burst",
		"viewer-image", "viewer-image-allow", "tenant-protected-namespaces", "tenant-reverify-interval",
		"storage-sweep-interval",
	} {
		g.Expect(fs.Lookup(name)).NotTo(BeNil(), name)
		g.Expect(help.String()).To(ContainSubstring("-"+name), name)
	}
	g.Expect(fs.Lookup("max-concurrent-reconciles").Value.String()).To(Equal("4,tenant=16"))
	g.Expect(fs.Lookup("sync-period").DefValue).To(Equal("10h0m0s"))
}
