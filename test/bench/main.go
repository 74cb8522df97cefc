// Command bench measures Trellis at scale on a fresh local KWOK cluster with
// a real versitygw and the manager as a real process (make bench). Every time
// is reported next to a floor measured in the same run — the same objects
// created directly by a concurrent client — because absolute times on shared
// machines drift. It prints a table and writes JSON under bench/results/.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// scaleResultsPath is where make bench-scale keeps its results: in docs/,
// beside the chart its point joins, because one run takes an hour.
const scaleResultsPath = "docs/performance-scale.json"

// shardsResultsPath is where make bench-shards keeps its results.
const shardsResultsPath = "docs/performance-shards.json"

type config struct {
	// viewSizes are the MarkdownView counts of the convergence runs (the chart's x axis).
	viewSizes                                                  []int
	markdownViews, unrelated, tenants, buckets, edits, workers int
	// viewsPerNamespace spreads a convergence run's views over namespaces
	// of at most this many (0: one namespace per run).
	viewsPerNamespace int
	// floorOnce measures the MarkdownView floor before Trellis only.
	floorOnce bool
	// profileDir, if set, gets a CPU profile of the API server over the
	// first profileFor of every measured run.
	profileDir                          string
	profileFor                          time.Duration
	bucketInterval, quiet, bucketWindow time.Duration
	out                                 string
	keep                                bool
	managerArgs                         string
	// capsuleArgs are extra flags for Capsule (the capsule scenario).
	capsuleArgs string
	scenarios   string
	// tenantGuardrails says which Tenant variants run: none, all, or both.
	tenantGuardrails string
	// bucketStores are the servers the bucket scenario runs on, in order.
	bucketStores string
	// tenantRounds is how many Trellis runs each Tenant variant has, each
	// between two floor runs; the round with the median ratio is reported.
	tenantRounds int
	// chart is where the converge-time chart (SVG) goes; scaleResults adds
	// points from a make bench-scale run (its JSON) to it; saveAs also
	// writes the results to this path (the scale run's, kept in docs/).
	chart, scaleResults, saveAs string
	// gitPages is the size of the gitsite scenario's repository, in pages;
	// gitPushes its one-page pushes; gitSearch how long it loads the viewer.
	gitPages, gitPushes int
	gitSearch           time.Duration
	// shardViews are the shards scenario's MarkdownViews, on shardCount
	// shards and then on one manager.
	shardViews, shardCount int
}

// row is one line of the result table.
type row struct {
	Scenario string  `json:"scenario"`
	Figure   string  `json:"figure"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	Floor    float64 `json:"floor,omitempty"`
	Ratio    float64 `json:"ratio,omitempty"`
	Target   string  `json:"target"`
	Met      bool    `json:"met"`
}

type bench struct {
	cfg        config
	root, bin  string
	cluster    string
	kubeconfig string
	// c creates Trellis' objects and reads results; floor creates the floor's
	// objects and counts its writes. Neither is rate-limited on the client:
	// the API server's own flow control is the only limit, as for a real
	// cluster's controllers.
	c, floor    client.Client
	floorWrites *writeCounter
	// wc waits on watches (watchUntil), not on repeated lists.
	wc     client.WithWatch
	s3Port int
	// restCfg reaches the cluster's API server as its admin.
	restCfg *rest.Config
	// s3Keys are the store's access key ID and secret, for the bucket floor.
	s3Keys [2]string
	mgr    *managerProc
	rows   []row
	// tenantRowsEnd is where the Tenant scenario's rows end: peers' rows
	// (capsule.go) are shown there, next to them.
	tenantRowsEnd int
	// points are the convergence times per size, for the chart.
	points []convergence
	// progressSeen: the progress lines already logged.
	progressMu   sync.Mutex
	progressSeen map[string]bool
	// started names the results file.
	started time.Time
	// storePids are the bucket scenario's servers other than versitygw
	// while they run, by name, for their CPU.
	storePids map[string]int
}

func main() {
	var cfg config
	smoke := flag.Bool("smoke", false, "small sizes, for make test: checks the bench runs, not the figures")
	sizes := flag.String("view-sizes", "100,300,1000", "MarkdownView counts of the convergence runs, comma-separated; the largest also runs the write, quiet, restart and edit figures")
	flag.StringVar(&cfg.chart, "chart", "", "write the converge-time chart (SVG) here; default <out>/converge.svg")
	flag.StringVar(&cfg.scaleResults, "scale-results", scaleResultsPath, "results of make bench-scale whose points join the chart, if the file exists")
	flag.IntVar(&cfg.unrelated, "unrelated", 10000, "unrelated ConfigMaps and Secrets (2 KiB each, half of each) for the memory scenario")
	flag.IntVar(&cfg.tenants, "tenants", 300, "Tenants of 3 namespaces each")
	flag.IntVar(&cfg.tenantRounds, "tenant-rounds", 3, "Trellis runs per Tenant variant, each between two floor runs; the round with the median ratio is reported (the machine's noise is larger than the difference measured)")
	flag.StringVar(&cfg.tenantGuardrails, "tenant-guardrails", "none,all", "Tenant variants to run: none (namespaces and admins), all (every guardrail), or both")
	flag.IntVar(&cfg.buckets, "buckets", 1000, "StorageBuckets")
	flag.DurationVar(&cfg.bucketInterval, "bucket-interval", 60*time.Second, "health-check interval of the buckets")
	flag.DurationVar(&cfg.bucketWindow, "bucket-window", 120*time.Second, "how long bucket checks are sampled")
	flag.StringVar(&cfg.bucketStores, "bucket-stores", "seaweedfs,minio,versitygw", "servers the bucket scenario runs on, one after another in this order (versitygw last), each against its own floor")
	flag.DurationVar(&cfg.quiet, "quiet", 60*time.Second, "quiet window after convergence")
	flag.IntVar(&cfg.edits, "edits", 50, "edits of one MarkdownView for the edit-latency scenario")
	flag.IntVar(&cfg.viewsPerNamespace, "views-per-namespace", 0, "spread each convergence run's MarkdownViews over namespaces of at most this many (0: one namespace per run)")
	flag.BoolVar(&cfg.floorOnce, "floor-once", false, "measure the MarkdownView floor once, before Trellis, instead of before and after (saves a run at scale; favours the floor)")
	flag.StringVar(&cfg.profileDir, "profile-apiserver", "", "write a CPU profile of the API server over the start of every measured run, and of the manager over the start of Trellis' runs, into this directory (go tool pprof), and a heap profile of the manager after the restart scenario")
	flag.DurationVar(&cfg.profileFor, "profile-seconds", 5*time.Second, "how much of each run --profile-apiserver profiles")
	flag.IntVar(&cfg.workers, "workers", 16, "concurrent client workers (for the floor and for creating objects)")
	flag.StringVar(&cfg.out, "out", "bench/results", "directory for the JSON results")
	flag.BoolVar(&cfg.keep, "keep", false, "keep the cluster afterwards")
	flag.StringVar(&cfg.managerArgs, "manager-args", "", "extra manager flags, space-separated (to compare settings)")
	flag.StringVar(&cfg.capsuleArgs, "capsule-args", "", "extra Capsule flags, space-separated (the capsule scenario runs it with its chart's defaults)")
	flag.StringVar(&cfg.scenarios, "scenarios", "markdownview,tenant,bucket,restart,memory,tenantquota,gitsite,capsule,writecost", "which scenarios to run (tenantquota: --tenants Tenants of 10 namespaces with quota.tenant; memory needs markdownview; gitsite needs git and bin/source-controller (make source-controller) and restarts the manager; capsule needs bin/capsule (make capsule) and stops the manager; writecost runs last and stops the manager; shards needs bin/sharder (make sharder), stops the manager and starts it again, and make test's smoke run has it where bin/sharder is)")
	flag.IntVar(&cfg.gitPages, "git-pages", 2000, "pages of the gitsite scenario's repository (about 5 KiB each, in folders, with 32 images: 10 MiB at 2000)")
	flag.IntVar(&cfg.gitPushes, "git-pushes", 5, "one-page pushes the gitsite scenario times")
	flag.DurationVar(&cfg.gitSearch, "git-search", 10*time.Second, "how long the gitsite scenario searches the site, and then gets its pages")
	replot := flag.String("replot", "", "no cluster: redraw the chart (--chart) from the points of this saved make bench results file and of --scale-results")
	scale := flag.Bool("scale", false, "the one-off scale run (make bench-scale): --scale-size MarkdownViews, Tenants and StorageBuckets; its results (docs/performance-scale.json) join the chart of later runs")
	scaleSize := flag.Int("scale-size", 10000, "objects of each kind in the --scale run")
	shards := flag.Bool("shards", false, "the one-off sharding run (make bench-shards): --shard-views MarkdownViews on --shard-count shards of a ring, then on one manager and its standby; its results are kept in "+shardsResultsPath)
	flag.IntVar(&cfg.shardViews, "shard-views", 10000, "MarkdownViews of the shards scenario")
	flag.IntVar(&cfg.shardCount, "shard-count", 3, "shards of the shards scenario")
	flag.Parse()
	var err error
	if cfg.viewSizes, err = parseSizes(*sizes); err != nil {
		fmt.Fprintln(os.Stderr, "bench: --view-sizes:", err)
		os.Exit(2)
	}
	cfg.markdownViews = cfg.viewSizes[len(cfg.viewSizes)-1]
	if *smoke {
		cfg = config{viewSizes: []int{10, 20}, markdownViews: 20, unrelated: 200, tenants: 10, buckets: 20, edits: 5, workers: 8,
			bucketInterval: 10 * time.Second, bucketWindow: 10 * time.Second, quiet: 5 * time.Second, out: cfg.out,
			managerArgs: cfg.managerArgs, capsuleArgs: cfg.capsuleArgs, scenarios: cfg.scenarios, tenantGuardrails: cfg.tenantGuardrails, tenantRounds: 1, bucketStores: cfg.bucketStores,
			profileDir: cfg.profileDir, profileFor: cfg.profileFor,
			viewsPerNamespace: 8, // spread, so the smoke runs that path too
			gitPages:          100, gitPushes: 2, gitSearch: time.Second,
			shardViews: 30, shardCount: 3}
	}
	if *smoke && !flagSet("scenarios") {
		// make test's smoke run must not depend on the peers' source
		// (make capsule, make sharder); --scenarios can still ask for it.
		// The shards scenario runs where the sharder was built, and kills
		// real shard processes there.
		cfg.scenarios = strings.Join(slices.DeleteFunc(splitList(cfg.scenarios), func(s string) bool { return s == "capsule" }), ",")
		if err := testenv.SharderBuilt(); err == nil {
			cfg.scenarios += ",shards"
		} else {
			log("no shards scenario: %v", err)
		}
	}
	if *shards {
		cfg.viewSizes, cfg.scenarios, cfg.scaleResults, cfg.saveAs = nil, "shards", "", shardsResultsPath
		if cfg.viewsPerNamespace == 0 {
			cfg.viewsPerNamespace = 100 // teams' namespaces, as in the scale run
		}
	}
	if *scale {
		n := *scaleSize
		cfg.viewSizes, cfg.markdownViews, cfg.tenants, cfg.buckets = []int{n}, n, n, n
		cfg.bucketInterval, cfg.bucketWindow, cfg.edits = 60*time.Second, 120*time.Second, 20
		cfg.scenarios, cfg.scaleResults, cfg.saveAs = "markdownview,tenant,bucket,restart", "", scaleResultsPath
		// Teams' namespaces, not one namespace of 10,000 (see viewRun); one
		// floor run instead of two, to fit the run in about an hour.
		if cfg.viewsPerNamespace == 0 {
			cfg.viewsPerNamespace = 100
		}
		cfg.floorOnce = true
		// Tenants with no guardrails unless asked: every guardrail at
		// 10,000 Tenants would add about half an hour.
		if cfg.tenantGuardrails == "none,all" {
			cfg.tenantGuardrails = "none"
		}
		cfg.tenantRounds = 1
		// Buckets on versitygw only unless asked: each other server costs
		// about as much again (at 1000 buckets, 5 minutes each).
		if !flagSet("bucket-stores") {
			cfg.bucketStores = "versitygw"
		}
	}
	if cfg.tenantRounds < 1 || cfg.tenantRounds > 26 { // a round is named by a letter
		fmt.Fprintln(os.Stderr, "bench: --tenant-rounds must be 1 to 26")
		os.Exit(2)
	}
	if cfg.chart == "" {
		cfg.chart = filepath.Join(cfg.out, "converge.svg")
	}
	if *replot != "" {
		points, err := readPoints(*replot)
		if err == nil {
			err = (&bench{cfg: cfg, points: points}).chart()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(cfg config) error {
	wd, _ := os.Getwd()
	b := &bench{cfg: cfg, root: wd, bin: filepath.Join(wd, "bin"), cluster: fmt.Sprintf("trellis-bench-%d", os.Getpid()), started: time.Now()}
	views := 0
	for _, n := range cfg.viewSizes {
		views += n
	}
	runs := 3 // two floor runs and Trellis: every Deployment runs a pod, and they stay; 110 pods a node
	if cfg.floorOnce {
		runs = 2
	}
	shardViews := 0 // one run of them, their pods kept
	if slices.Contains(splitList(cfg.scenarios), "shards") {
		shardViews = cfg.shardViews
	}
	nodes := (runs*views+shardViews)/100 + 2
	log("cluster %s with %d simulated nodes", b.cluster, nodes)
	up := exec.Command(filepath.Join(b.root, "hack", "cluster.sh"), "up", b.cluster, strconv.Itoa(nodes))
	up.Env = append(os.Environ(), "TRELLIS_KWOK_DISABLE_QPS_LIMITS=1")
	out, err := up.Output()
	if err != nil {
		return fmt.Errorf("cluster: %w %s", err, exitStderr(err))
	}
	b.kubeconfig = strings.TrimSpace(string(out))
	defer func() {
		if b.mgr != nil {
			b.mgr.stop()
		}
		_ = exec.Command(filepath.Join(b.root, "hack", "cluster.sh"), "s3-down", b.cluster).Run()
		if !cfg.keep {
			_ = exec.Command(filepath.Join(b.root, "hack", "cluster.sh"), "down", b.cluster).Run()
		}
	}()
	if err := b.setup(); err != nil {
		return err
	}
	if err := b.startManager(); err != nil {
		return err
	}
	steps := []struct {
		name string
		run  func() error
	}{{"markdownview", b.markdownViewScenarios}, {"tenant", b.tenantScenario}, {"bucket", b.bucketScenario},
		{"restart", b.restartScenario}, {"memory", b.memoryScenario},
		{"tenantquota", b.tenantQuotaScenario}, // after restart: its Tenants are not counted there
		{"shards", b.shardsScenario},           // before gitsite, whose view needs its source-controller; stops the manager and starts it again
		{"gitsite", b.gitSiteScenario},         // restarts the manager with Flux's CRDs installed
		{"capsule", b.capsuleScenario},         // after every scenario that needs the manager: it stops it
		{"writecost", b.writeCostScenario}}     // last: it stops the manager
	for _, step := range steps {
		if !b.ran(step.name) {
			continue
		}
		if err := step.run(); err != nil {
			return fmt.Errorf("%s: %w", step.name, err)
		}
		// Saved after every scenario, so a long run that fails late keeps
		// what it measured.
		if err := b.save(); err != nil {
			return err
		}
	}
	if err := b.chart(); err != nil {
		return err
	}
	return b.report()
}

// flagSet says whether the command line set the flag name.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parseSizes(s string) ([]int, error) {
	fields := strings.Split(s, ",")
	out := make([]int, 0, len(fields))
	for _, f := range fields {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive count", f)
		}
		if len(out) > 0 && n <= out[len(out)-1] {
			return nil, fmt.Errorf("sizes must grow: %s", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func log(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func (b *bench) setup() error {
	ctrllog.SetLogger(zap.New(zap.WriteTo(io.Discard))) // controller-runtime's clients would otherwise complain of no logger
	restCfg, err := clientcmd.BuildConfigFromFlags("", b.kubeconfig)
	if err != nil {
		return err
	}
	b.restCfg = restCfg
	restCfg.QPS = -1 // no client-side limit: the floor must not wait on its own client
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(viewv1.AddToScheme(scheme))
	utilruntime.Must(tenancyv1.AddToScheme(scheme))
	utilruntime.Must(storagev1.AddToScheme(scheme))
	if b.c, err = client.New(restCfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	if b.wc, err = client.NewWithWatch(restCfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	b.floorWrites = &writeCounter{}
	if b.floor, err = client.New(b.floorWrites.wrap(restCfg), client.Options{Scheme: scheme}); err != nil {
		return err
	}
	crds, err := exec.Command(filepath.Join(b.bin, "kustomize"), "build", filepath.Join(b.root, "config", "crd")).Output()
	if err != nil {
		return fmt.Errorf("kustomize: %w", err)
	}
	if err := b.kubectlIn(crds, "apply", "--server-side", "-f", "-"); err != nil {
		return err
	}
	if err := b.kubectlIn(nil, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"); err != nil {
		return err
	}
	ctx := context.Background()
	for _, ns := range []string{"trellis-system", "unrelated", "buckets"} {
		if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	if err := exec.Command(filepath.Join(b.root, "hack", "cluster.sh"), "s3-credentials", b.cluster).Run(); err != nil {
		return err
	}
	creds, err := os.ReadFile(filepath.Join(b.root, ".dev", b.cluster+"-s3", "credentials"))
	if err != nil {
		return err
	}
	vals := map[string]string{}
	for _, line := range strings.Split(string(creds), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			vals[k] = v
		}
	}
	b.s3Keys = [2]string{vals["AWS_ACCESS_KEY_ID"], vals["AWS_SECRET_ACCESS_KEY"]}
	if err := b.c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "trellis-system", Name: "s3"},
		Data:       map[string][]byte{"accessKeyID": []byte(vals["AWS_ACCESS_KEY_ID"]), "secretAccessKey": []byte(vals["AWS_SECRET_ACCESS_KEY"])},
	}); err != nil {
		return err
	}
	b.s3Port = freePort()
	if out, err := exec.Command(filepath.Join(b.root, "hack", "cluster.sh"), "s3-up", b.cluster, strconv.Itoa(b.s3Port)).CombinedOutput(); err != nil {
		return fmt.Errorf("versitygw: %w %s", err, out)
	}
	return nil
}
