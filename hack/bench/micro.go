package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

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
// injection package's BenchmarkInject -count times; each figure is the
// median of the runs, shown with their minimum and maximum.
func benchMicro(ctx context.Context, cfg *config, r *report) error {
	count, benchtime := "6", "2000x"
	if cfg.quick {
		count, benchtime = "3", "300x"
	}
	runs := map[string]*microRuns{}
	var raw strings.Builder
	for _, x := range []struct{ pkg, bench string }{{"./test/bench", "."}, {"./internal/inject", "^BenchmarkInject$"}} {
		pkg := x.pkg
		cmd := exec.CommandContext(ctx, "go", "test", "-run=^$", "-bench="+x.bench, "-benchmem", "-count="+count, "-benchtime="+benchtime, pkg)
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
			cpu := ns // the injection package's benchmark reports no CPU time
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
	b.WriteString("\n`BenchmarkInject` (internal/inject) is the injection package's own: 2 of 50 SidecarSets match, with volume sharing, env transfer and a native-sidecar init container (it reports no CPU time: its CPU column is wall time).\n")
	fmt.Fprintf(&b, "\n<details><summary>raw</summary>\n\n```\n%s```\n</details>\n", raw.String())
	r.section("1b. Injection handler (Go benchmark, 10-container pod)", b.String())

	inj := fig["BenchmarkInject1of1"]
	us := func(v float64) string { return fmt.Sprintf("%.1f µs", v/1e3) }
	r.target("1b", "injection handler CPU time per op (1 SidecarSet, 10-container pod), median", "<= 50 µs", atMost(50e3), inj.CPUNs.figure(), us,
		fmt.Sprintf("%s CPU (wall %s); %.3fx the CR defaulter's CPU (%s)", inj.CPUNs.format(us), inj.WallNs.format(us), inj.CPUNs.Median/base.CPUNs.Median, us(base.CPUNs.Median)))
	worst, worstName := inj.Bytes, "BenchmarkInject1of1"
	for _, k := range []string{"BenchmarkInject1of100", "BenchmarkInject"} {
		if m, ok := fig[k]; ok && m.Bytes.Median > worst.Median {
			worst, worstName = m.Bytes, k
		}
	}
	kib := func(v float64) string { return fmt.Sprintf("%.1f KiB", v/1024) }
	r.target("1b", "injection handler allocation per op (worst median of the three)", "<= 30 KiB", atMost(30*1024), worst.figure(), kib, worst.format(kib)+" ("+worstName+")")
	return nil
}
