// Command bench measures Deckhand side by side with Kubernetes' own
// controllers on local control planes (internal/test/localcluster) and writes
// docs/benchmarks.md. `make bench` runs the full sizes, `make bench-quick`
// small ones (a smoke run that keeps the code from rotting). Every figure is
// reported with a baseline taken in the same run: on a shared machine only
// the ratios mean something.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
)

type config struct {
	quick    bool
	root     string
	k8sBin   string
	deckhand string
	out      string
	only     map[string]bool
}

func (c *config) size(full, quick int) int {
	if c.quick {
		return quick
	}
	return full
}

var allItems = []string{"micro", "admission", "rollout", "podset", "restart", "webserver", "memory"}

func main() {
	// The bench's own clients log nothing worth reading; without a logger
	// controller-runtime prints a stack trace saying so.
	ctrllog.SetLogger(logr.Discard())
	cfg := &config{}
	flag.BoolVar(&cfg.quick, "quick", false, "Small sizes and short waits: a smoke run of every benchmark (about 3.5 minutes).")
	flag.StringVar(&cfg.k8sBin, "k8s-bin", localcluster.DefaultBinDir(), "Directory of the control-plane binaries.")
	flag.StringVar(&cfg.deckhand, "deckhand", "bin/deckhand", "The deckhand manager binary (make build).")
	flag.StringVar(&cfg.out, "out", "", "Markdown report to write (default docs/benchmarks.md, or docs/benchmarks-quick.md with -quick... see Makefile).")
	only := flag.String("only", "", "Comma-separated subset of: "+strings.Join(allItems, ","))
	flag.Parse()
	if cfg.quick {
		settleTime = time.Second
	}
	cfg.only = map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		if s = strings.TrimSpace(s); s != "" {
			cfg.only[s] = true
		}
	}
	root, err := localcluster.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg.root = root
	if !filepath.IsAbs(cfg.deckhand) {
		cfg.deckhand = filepath.Join(root, cfg.deckhand)
	}
	src, err := sourceProvenance(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if cfg.out != "" {
		if cfg.out, err = filepath.Abs(cfg.out); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	if src.Dirty {
		// A report in docs/ is committed: its figures must belong to the
		// commit it names. Refused before anything is built or started.
		if cfg.out != "" && insideDir(cfg.out, filepath.Join(root, "docs")) {
			fmt.Fprintf(os.Stderr, "bench: the working tree is dirty (%s; untracked sources: %v): commit or stash before writing %s\n", src.Describe, src.Untracked, cfg.out)
			os.Exit(2)
		}
		logf("measuring a DIRTY tree (%s): the report says so", src.Describe)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	r := newReport(cfg, src)
	failed := run(ctx, cfg, r)
	r.finish()
	if cfg.out != "" {
		data := r.dataPath(cfg.out)
		if err := r.writeData(data); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		r.dataLink, _ = filepath.Rel(filepath.Dir(cfg.out), data)
		logf("wrote %s", data)
		if err := os.WriteFile(cfg.out, []byte(r.markdown()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		logf("wrote %s", cfg.out)
	} else {
		fmt.Print(r.markdown())
	}
	if failed {
		os.Exit(1)
	}
}

func (c *config) want(item string) bool { return len(c.only) == 0 || c.only[item] }

func run(ctx context.Context, cfg *config, r *report) (failed bool) {
	step := func(name string, fn func() error) {
		if ctx.Err() != nil {
			return
		}
		t0 := time.Now()
		logf("=== %s", name)
		if err := fn(); err != nil {
			failed = true
			logf("=== %s FAILED: %v", name, err)
			r.note(fmt.Sprintf("**%s failed**: `%s`", name, firstLine(err.Error())))
			return
		}
		logf("=== %s done in %s", name, time.Since(t0).Round(time.Second))
	}
	if cfg.only["kruise-smoke"] { // on request only: it needs bin/kruise (make kruise)
		step("kruise smoke", func() error { return kruiseSmoke(ctx, cfg, r) })
	}
	if cfg.want("micro") {
		step("micro", func() error { return benchMicro(ctx, cfg, r) })
	}
	if cfg.want("admission") {
		step("admission", func() error { return benchAdmission(ctx, cfg, r) })
	}
	if cfg.want("rollout") { // before cluster B, which would otherwise keep running meanwhile
		step("sidecar rollout, Deckhand vs OpenKruise", func() error { return benchRollout(ctx, cfg, r) })
	}
	if cfg.want("podset") {
		step("podset (a) limited", func() error { return benchPodSetLimited(ctx, cfg, r) })
	}
	need := func(items ...string) bool {
		for _, i := range items {
			if cfg.want(i) {
				return true
			}
		}
		return false
	}
	if need("podset", "restart", "webserver", "memory") {
		// One cluster with every client limit raised: kube-controller-manager
		// and kube-scheduler at QPS 1000/burst 2000, Deckhand unlimited.
		opts := localcluster.Full(1)
		opts.ClientQPS, opts.ClientBurst = 1000, 2000
		var e *env
		step("cluster B (limits off)", func() error {
			var err error
			e, err = startEnv(ctx, cfg, "unlimited", opts, nil)
			return err
		})
		if e == nil {
			return true
		}
		defer e.stop()
		var empty *managerFigures
		if cfg.want("memory") {
			step("memory baseline (empty cluster)", func() error {
				var err error
				empty, err = measureManager(ctx, cfg, e, "heap-empty", 0, nil)
				return err
			})
		}
		if cfg.want("podset") {
			step("podset (b) unlimited", func() error { return benchPodSetUnlimited(ctx, cfg, e, r) })
		}
		if cfg.want("restart") {
			step("restartschedule skew", func() error { return benchRestart(ctx, cfg, e, r) })
		}
		if cfg.want("webserver") {
			step("webserver churn", func() error { return benchWebServer(ctx, cfg, e, r) })
		}
		if cfg.want("memory") {
			step("memory", func() error { return benchMemory(ctx, cfg, e, r, empty) })
		}
	}
	return failed
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// ---- micro-benchmarks ----

var (
	benchLine = regexp.MustCompile(`^(Benchmark\S+?)(-\d+)?\s+(\d+)\s+([\d.]+) ns/op\s.*?([\d.]+) B/op\s+([\d.]+) allocs/op`)
	cpuMetric = regexp.MustCompile(`([\d.]+) cpu-ns/op`)
)

// microRuns are one benchmark's figures, one value per -count run.
type microRuns struct{ ns, cpu, bytes, allocs []float64 }

// microFigures is the spread of each of a benchmark's figures.
type microFigures struct {
	WallNs spread `json:"wallNsPerOp"`
	CPUNs  spread `json:"cpuNsPerOp"`
	Bytes  spread `json:"bytesPerOp"`
	Allocs spread `json:"allocsPerOp"`
}

// benchMicro runs test/bench's Go benchmarks (the pod injection handler and
// controller-runtime's own defaulter on the same 10-container pod) and the
// SidecarSet package's BenchmarkInject -count times; each figure is the
// median of the runs, shown with their minimum and maximum.
func benchMicro(ctx context.Context, cfg *config, r *report) error {
	count, benchtime := "6", "2000x"
	if cfg.quick {
		count, benchtime = "3", "300x"
	}
	runs := map[string]*microRuns{}
	var raw strings.Builder
	for _, pkg := range []string{"./test/bench", "./internal/webhook/sidecarset"} {
		cmd := exec.CommandContext(ctx, "go", "test", "-run=^$", "-bench=.", "-benchmem", "-count="+count, "-benchtime="+benchtime, pkg)
		cmd.Dir = cfg.root
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("go test -bench %s: %w\n%s", pkg, err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			m := benchLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			raw.WriteString(line + "\n")
			ns, _ := strconv.ParseFloat(m[4], 64)
			b, _ := strconv.ParseFloat(m[5], 64)
			a, _ := strconv.ParseFloat(m[6], 64)
			cpu := ns // the SidecarSet package's benchmark reports no CPU time
			if c := cpuMetric.FindStringSubmatch(line); c != nil {
				cpu, _ = strconv.ParseFloat(c[1], 64)
			}
			x := runs[m[1]]
			if x == nil {
				x = &microRuns{}
				runs[m[1]] = x
			}
			x.ns, x.cpu, x.bytes, x.allocs = append(x.ns, ns), append(x.cpu, cpu), append(x.bytes, b), append(x.allocs, a)
		}
	}
	fig := map[string]microFigures{}
	for name, x := range runs {
		fig[name] = microFigures{spreadOf(x.ns), spreadOf(x.cpu), spreadOf(x.bytes), spreadOf(x.allocs)}
	}
	r.record("micro", fig)
	base, ok := fig["BenchmarkBaselineCRDefaulter"]
	if !ok {
		return errors.New("no baseline benchmark result")
	}
	num := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	var b strings.Builder
	fmt.Fprintf(&b, "`go test -bench -benchmem -count=%s -benchtime=%s`; each figure is the median of the runs, with the smallest and largest in brackets, and the targets are judged on the median. "+
		"*CPU/op* is the benchmark process's user+system time per op (every thread, garbage collection included): on a shared machine wall time also counts waiting for a CPU. "+
		"`BenchmarkBaselineCRDefaulter` is controller-runtime's typed defaulter webhook (decode, Default adding one annotation, marshal, JSON diff) on the same request: the baseline.\n\n", count, benchtime)
	b.WriteString("| benchmark | wall ns/op | CPU ns/op | B/op | allocs/op | CPU vs baseline (medians) |\n|---|---|---|---|---|---|\n")
	for _, name := range []string{"BenchmarkBaselineCRDefaulter", "BenchmarkInject1of1", "BenchmarkInject1of100", "BenchmarkInject"} {
		m, ok := fig[name]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %.3fx |\n", name, m.WallNs.format(num), m.CPUNs.format(num), m.Bytes.format(num), m.Allocs.format(num), m.CPUNs.Median/base.CPUNs.Median)
	}
	b.WriteString("\n`BenchmarkInject` (internal/webhook/sidecarset) is the SidecarSet package's own: 2 of 50 SidecarSets match, with volume sharing, env transfer and a native-sidecar init container (it reports no CPU time: its CPU column is wall time).\n")
	fmt.Fprintf(&b, "\n<details><summary>raw</summary>\n\n```\n%s```\n</details>\n", raw.String())
	r.section("1b. Injection handler (Go benchmark, 10-container pod)", b.String())

	inj := fig["BenchmarkInject1of1"]
	us := func(v float64) string { return fmt.Sprintf("%.1f µs", v/1e3) }
	r.target("1b", "injection handler CPU time per op (1 SidecarSet, 10-container pod), median", "<= 50 µs",
		fmt.Sprintf("%s CPU (wall %s); %.3fx the CR defaulter's CPU (%s)", inj.CPUNs.format(us), inj.WallNs.format(us), inj.CPUNs.Median/base.CPUNs.Median, us(base.CPUNs.Median)),
		inj.CPUNs.Median <= 50e3)
	worst, worstName := inj.Bytes, "BenchmarkInject1of1"
	for _, k := range []string{"BenchmarkInject1of100", "BenchmarkInject"} {
		if m, ok := fig[k]; ok && m.Bytes.Median > worst.Median {
			worst, worstName = m.Bytes, k
		}
	}
	kib := func(v float64) string { return fmt.Sprintf("%.1f KiB", v/1024) }
	r.target("1b", "injection handler allocation per op (worst median of the three)", "<= 30 KiB", worst.format(kib)+" ("+worstName+")", worst.Median <= 30*1024)
	return nil
}

// ---- report ----

type row struct {
	item, what, target, measured string
	// met is nil for a row without a target: it is reported, not judged.
	met *bool
}

type report struct {
	cfg      *config
	start    time.Time
	end      time.Time
	load0    string
	load1    string
	rows     []row
	sections []string
	notes    []string
	// raw holds each benchmark's raw results by name, written beside the
	// report as JSON so that every figure can be recomputed.
	raw map[string]any
	src provenance
	// dataLink is the raw results' JSON, relative to the report.
	dataLink string
}

func newReport(cfg *config, src provenance) *report {
	return &report{cfg: cfg, start: time.Now(), load0: loadavg(), raw: map[string]any{}, src: src}
}

func (r *report) machine() string {
	return fmt.Sprintf("%d CPUs (%s), %s RAM, %s/%s", runtime.NumCPU(), cpuModel(), memTotal(), runtime.GOOS, runtime.GOARCH)
}

// versions is the control plane's bin/k8s/.versions.
func (r *report) versions() string {
	vers, _ := os.ReadFile(filepath.Join(r.cfg.k8sBin, ".versions"))
	return strings.TrimSpace(string(vers))
}

func (r *report) finish() { r.end = time.Now(); r.load1 = loadavg() }

func (r *report) section(title, body string) {
	r.sections = append(r.sections, "## "+title+"\n\n"+body)
}

func (r *report) target(item, what, target, measured string, met bool) {
	r.rows = append(r.rows, row{item, what, target, measured, &met})
	logf("TARGET %s %s: %s (target %s) met=%v", item, what, measured, target, met)
}

// info records a figure that has no target: the summary prints "n/a" in
// its met column.
func (r *report) info(item, what, measured string) {
	r.rows = append(r.rows, row{item: item, what: what, target: "n/a", measured: measured})
	logf("FIGURE %s %s: %s", item, what, measured)
}

// record keeps a benchmark's raw results under name for the JSON beside
// the report; a second record under the same name replaces the first.
func (r *report) record(name string, v any) { r.raw[name] = v }

func (r *report) note(s string) { r.notes = append(r.notes, s) }

func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func cpuModel() string {
	return procField("/proc/cpuinfo", "model name", func(line string) (string, bool) {
		i := strings.IndexByte(line, ':')
		return strings.TrimSpace(line[i+1:]), i >= 0
	})
}

func memTotal() string {
	return procField("/proc/meminfo", "MemTotal:", func(line string) (string, bool) {
		f := strings.Fields(line)
		kb, err := strconv.ParseFloat(f[1], 64)
		return fmt.Sprintf("%.1f GiB", kb/1024/1024), err == nil
	})
}

// procField reads the first line of the /proc file path that starts with
// prefix and returns what value makes of it, or "?" when the file, the line
// or the value is missing.
func procField(path, prefix string, value func(line string) (string, bool)) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, prefix) {
			if v, ok := value(line); ok {
				return v
			}
		}
	}
	return "?"
}

func (r *report) markdown() string {
	var b strings.Builder
	mode := "full sizes (`make bench`)"
	if r.cfg.quick {
		mode = "quick sizes (`make bench-quick`): a smoke run, the figures are not the targets' sizes"
	}
	b.WriteString("# Benchmarks\n\n")
	b.WriteString("Generated by `hack/bench` (" + mode + "). Do not edit by hand: run `make bench` again. " +
		"What the numbers mean, the targets that this machine's control plane cannot meet, and what was changed to meet the others: [benchmark-analysis.md](benchmark-analysis.md) (hand-written).\n\n")
	b.WriteString("Performance of an operator is how little it adds to the cluster's own limits, so every figure below is taken " +
		"next to a baseline measured in the same run on the same local control plane (`internal/test/localcluster`): " +
		"ReplicaSets run by kube-controller-manager, a plain client, the API server without the webhook, controller-runtime's own defaulter. " +
		"Absolute times on a shared machine are noise; the ratios are what count.\n\n")
	b.WriteString("## Summary\n\n| item | measure | target | measured | met |\n|---|---|---|---|---|\n")
	for _, x := range r.rows {
		met := "n/a"
		switch {
		case x.met == nil:
		case *x.met:
			met = "yes"
		default:
			met = "**no**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", x.item, x.what, x.target, x.measured, met)
	}
	b.WriteString("\n## Method and machine\n\n")
	fmt.Fprintf(&b, "- Run: %s, %s (%s).\n", r.start.UTC().Format(time.RFC3339), r.end.Sub(r.start).Round(time.Second), mode)
	fmt.Fprintf(&b, "- Source: `git describe --always --dirty` = `%s`, commit `%s`.", r.src.Describe, r.src.Commit)
	if r.src.Dirty {
		fmt.Fprintf(&b, " **The tree was dirty** (untracked sources: %v): these figures belong to no commit.", r.src.Untracked)
	}
	b.WriteString("\n")
	if r.dataLink != "" {
		fmt.Fprintf(&b, "- Raw results (every repeat, the summary rows, source and machine): [%s](%s).\n", r.dataLink, filepath.ToSlash(r.dataLink))
	}
	fmt.Fprintf(&b, "- Machine: %s. Load average (1/5/15 min) at start %s, at end %s.\n", r.machine(), r.load0, r.load1)
	fmt.Fprintf(&b, "- Control plane (`bin/k8s/.versions`): %s. Deckhand built with %s.\n", r.versions(), runtime.Version())
	b.WriteString("- Statistics: a figure measured more than once is given as its median with the smallest and largest value and the number of repeats, `median (min–max, n=N)`, and judged on the median. " +
		"Compared workloads run interleaved (A B B A ...), each repeat in a fresh namespace, so that a drift of the machine's load falls on both sides.\n")
	b.WriteString("- **etcd runs with `--unsafe-no-fsync`** in every benchmark cluster (`localcluster`'s default): on these machines a disk sync costs about 20 ms a write and would hide every CPU cost. The data is throw-away.\n")
	b.WriteString("- The Deckhand manager runs as a process (`bin/deckhand`, all controllers and webhooks, `--leader-elect=false`), started by `localcluster.StartDeckhand`. " +
		"Its metrics are read over plain HTTP on loopback (`--metrics-secure=false`); RSS from `/proc/<pid>/status` (VmRSS), heap from `go_memstats_heap_inuse_bytes`.\n")
	b.WriteString("- Clusters: (admission) etcd + kube-apiserver only; (A) kube-controller-manager at its default client limits (QPS 20/burst 30), kube-scheduler raised to QPS 500/burst 1000, Deckhand `--kube-api-qps 20 --kube-api-burst 30`; " +
		"(B) kube-controller-manager and kube-scheduler at QPS 1000/burst 2000, Deckhand without client-side limit (controller-runtime's default). A and B have one kwok fake node that makes bound pods Running and Ready.\n")
	b.WriteString("- How the limits are shaped: Deckhand's `--kube-api-qps/--kube-api-burst` is one token bucket on the rest config, shared by every client, cache and controller of the process (leader election has its own, off in the benchmarks). " +
		"kube-controller-manager's `--kube-api-qps/--kube-api-burst` is a bucket per controller: its client builder copies the rest config for each controller and builds a clientset from it " +
		"(`SimpleControllerClientBuilder.Config`/`Client`, staging/src/k8s.io/controller-manager/pkg/clientbuilder/client_builder.go; e.g. `ClientBuilder.ClientOrDie(logger, \"replicaset-controller\")` in cmd/kube-controller-manager/app), " +
		"and `kubernetes.NewForConfigAndClient` creates a fresh `flowcontrol.NewTokenBucketRateLimiter(QPS, Burst)` for each clientset; its shared informers have one more client (\"shared-informers\"). " +
		"So in cluster A the ReplicaSet controller alone may send 20 requests a second while the garbage collector, endpoint-slice and other controllers spend their own buckets, and Deckhand's whole process is held to 20: the comparison favours kube-controller-manager, not Deckhand.\n")
	for _, s := range r.sections {
		b.WriteString("\n" + s + "\n")
	}
	if len(r.notes) > 0 {
		b.WriteString("\n## Notes\n\n")
		for _, n := range r.notes {
			b.WriteString("- " + n + "\n")
		}
	}
	return b.String()
}
