// Command bench measures Deckhand side by side with Kubernetes' own
// controllers on local control planes (internal/test/localcluster) and writes
// docs/benchmarks.md. `make bench` runs the full sizes, `make bench-quick`
// small ones (a smoke run that keeps the code from rotting). Every figure is
// reported with a baseline taken in the same run: on a shared machine only
// the ratios mean something.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
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
	// costPods are the pod counts of the trigger cost item.
	costPods []int
	// scalePods are the pod counts of the scale item (full size), smallest
	// first.
	scalePods []int
}

func (c *config) size(full, quick int) int {
	if c.quick {
		return quick
	}
	return full
}

var allItems = []string{"micro", "admission", "rollout", "podset", "restart", "webserver", "memory", "scale", "leakfleet", "triggercost"}

func main() {
	// The bench's own clients log nothing worth reading; without a logger
	// controller-runtime prints a stack trace saying so.
	ctrllog.SetLogger(logr.Discard())
	cfg := &config{}
	flag.BoolVar(&cfg.quick, "quick", false, "Small sizes and short waits: a smoke run of every benchmark (about 3.5 minutes).")
	flag.StringVar(&cfg.k8sBin, "k8s-bin", localcluster.DefaultBinDir(), "Directory of the control-plane binaries.")
	flag.StringVar(&cfg.deckhand, "deckhand", "bin/deckhand", "The deckhand manager binary (make build).")
	flag.StringVar(&cfg.out, "out", "", "Markdown report to write (default docs/benchmarks.md, or docs/benchmarks-quick.md with -quick... see Makefile).")
	costPods := flag.String("triggercost-pods", "10000,50000", "Comma-separated pod counts of the triggercost item (full size).")
	scalePods := flag.String("scale-pods", "10000,25000,50000", "Comma-separated pod counts of the scale item (full size), smallest first; Kubernetes' published limit is 150000.")
	only := flag.String("only", "", "Comma-separated subset of: "+strings.Join(allItems, ","))
	flag.Parse()
	if cfg.quick {
		settleTime = time.Second
	}
	var err error
	if cfg.costPods, err = podCounts(*costPods); err != nil {
		fmt.Fprintf(os.Stderr, "bench: -triggercost-pods: %v\n", err)
		os.Exit(2)
	}
	if cfg.scalePods, err = podCounts(*scalePods); err == nil && !slices.IsSorted(cfg.scalePods) {
		err = fmt.Errorf("%v is not smallest first", cfg.scalePods)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: -scale-pods: %v\n", err)
		os.Exit(2)
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
	if cfg.want("scale") { // a cluster of its own, stopped before cluster B starts
		step("scale", func() error { return benchScale(ctx, cfg, r) })
	}
	if cfg.want("leakfleet") { // a cluster of its own, with metrics-server
		step("leakfleet", func() error { return benchLeakFleet(ctx, cfg, r) })
	}
	if cfg.want("triggercost") { // a cluster of its own per pod count
		step("triggercost", func() error { return benchTriggerCost(ctx, cfg, r) })
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

// podCounts parses a comma-separated list of pod counts.
func podCounts(list string) ([]int, error) {
	var out []int
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a pod count", s)
		}
		out = append(out, n)
	}
	return out, nil
}
