package main

// Item 9, leakfleet: restart on need against a nightly restart and against
// nothing, on one fleet of leaking pods, with time compressed so that a
// simulated day takes minutes. The fleet's usage is simulated by kwok from
// pod annotations and served by a real metrics-server
// (docs/local-cluster-metrics.md); every figure comes from the bench's own
// pod watch and PodMetrics samples, not from what the controller reports.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/controller/restartschedule"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
)

// fleetPolicy is what restarts one copy of the fleet.
type fleetPolicy string

const (
	policyNone    fleetPolicy = "none"
	policyNightly fleetPolicy = "nightly"
	policyNeed    fleetPolicy = "need"
)

var fleetPolicies = []fleetPolicy{policyNone, policyNightly, policyNeed}

// fleetSeed fixes the leak rates' draw: every run measures the same fleet.
const fleetSeed = 20261127

// leak classes of the fleet's workloads.
const (
	leakFlat = "flat"
	leakSlow = "slow"
	leakFast = "fast"
)

// fleetPlan is the fleet and the compressed clock of one run.
type fleetPlan struct {
	// Day is the real duration of a simulated day; Days how many are run.
	Day  time.Duration `json:"simulatedDay"`
	Days int           `json:"days"`
	// Window is the real length of each night's maintenance window, at the
	// end of each simulated day: a window is "HH:MM" to "HH:MM", so a
	// minute is the shortest.
	Window    time.Duration `json:"window"`
	Replicas  int           `json:"replicasPerWorkload"`
	Limit     int64         `json:"limitBytes"`
	Base      int64         `json:"baseBytes"`
	Threshold int32         `json:"thresholdPercentOfLimit"`
	// For, MinPodAge and Urgent are the need policy's memory trigger
	// for, action.minPodAge and urgency.predictedLimitWithin, real time.
	For       time.Duration  `json:"for"`
	MinPodAge time.Duration  `json:"minPodAge"`
	Urgent    time.Duration  `json:"predictedLimitWithin"`
	Workloads []workloadLeak `json:"workloads"`
}

// workloadLeak is one workload's leak: every pod of it leaks alike, from
// its creation (a leak is a property of the code the pods run).
type workloadLeak struct {
	Name  string `json:"name"`
	Class string `json:"class"`
	// HoursToLimit is the simulated hours a new pod takes from its base to
	// its limit (0: flat).
	HoursToLimit float64 `json:"simulatedHoursToLimit"`
	// PerSecond is the leak in bytes per real second.
	PerSecond int64 `json:"bytesPerSecond"`
}

// hour is the real duration of a simulated hour.
func (p fleetPlan) hour() time.Duration { return p.Day / 24 }

// podsAtOnce is the need policy's action.maxConcurrent.
func (p fleetPlan) podsAtOnce() int32 { return int32((p.Replicas + 3) / 4) }

// simHours is d of real time in simulated hours.
func (p fleetPlan) simHours(d time.Duration) float64 { return float64(d) / float64(p.hour()) }

// newFleetPlan draws the fleet: a third of the workloads flat, a third slow
// (a new pod reaches its limit in 48 to 120 simulated hours, uniform: a
// nightly restart keeps every one below it), the rest fast (14 to 40 hours,
// uniform: those under a day reach it between two nightly restarts).
func newFleetPlan(cfg *config) fleetPlan {
	p := fleetPlan{
		Day: time.Duration(cfg.size(6, 2)) * time.Minute, Days: cfg.size(2, 1), Window: time.Minute,
		Replicas: cfg.size(10, 3), Limit: 256 << 20, Base: 64 << 20, Threshold: 90,
	}
	// The trigger's durations in the compressed clock: for 2 hours,
	// minPodAge 1 hour, urgent within 3 hours. for is at least two
	// metric resolutions whatever the day's length.
	p.For = max(2*p.hour(), 2*fleetResolution)
	p.MinPodAge = p.hour()
	p.Urgent = 3 * p.hour()
	n := cfg.size(20, 6)
	rng := rand.New(rand.NewPCG(fleetSeed, fleetSeed))
	for i := range n {
		w := workloadLeak{Name: fmt.Sprintf("app-%02d", i)}
		switch {
		case i < (n+2)/3:
			w.Class = leakFlat
		case i < (2*n+2)/3:
			w.Class, w.HoursToLimit = leakSlow, 48+72*rng.Float64()
		default:
			w.Class, w.HoursToLimit = leakFast, 14+26*rng.Float64()
		}
		if w.HoursToLimit > 0 {
			w.HoursToLimit = float64(int(w.HoursToLimit*10)) / 10
			w.PerSecond = int64(float64(p.Limit-p.Base) / (w.HoursToLimit * p.hour().Seconds()))
		}
		p.Workloads = append(p.Workloads, w)
	}
	return p
}

// fleetResolution is how old a working set may be when the manager reads
// it: metrics-server scrapes every 10 s and the manager reuses a
// namespace's PodMetrics list for 15 s. The larger is the resolution the
// latency target counts.
var fleetResolution = max(localcluster.MetricsServerResolution, restartschedule.DefaultMetricsResolution)

// fleetClock places the simulated days on the wall clock: day k starts at
// start + k*Day, and its night's window is its last Window.
type fleetClock struct {
	start time.Time
	plan  fleetPlan
}

func (c fleetClock) end() time.Time { return c.start.Add(time.Duration(c.plan.Days) * c.plan.Day) }

// windows are the nights' [open, close) on the wall clock.
func (c fleetClock) windows() [][2]time.Time {
	var w [][2]time.Time
	for k := 1; k <= c.plan.Days; k++ {
		closes := c.start.Add(time.Duration(k) * c.plan.Day)
		w = append(w, [2]time.Time{closes.Add(-c.plan.Window), closes})
	}
	return w
}

// spec is the windows as RestartSchedule windows and the nightly cron
// (each window's first minute of the days run), in UTC. The windows go on
// one night past the run, as a real nightly window does: a calendar that
// ended with the run would tell the last night's predictions that no
// window follows for a real day, and replace in that night every pod that
// leaks at all.
func (c fleetClock) spec() (windows []deckhandv1alpha1.RestartWindow, cron string) {
	var minutes []string
	nights := c.windows()
	closes := c.end().Add(c.plan.Day)
	for i, w := range append(nights, [2]time.Time{closes.Add(-c.plan.Window), closes}) {
		o, cl := w[0].UTC(), w[1].UTC()
		windows = append(windows, deckhandv1alpha1.RestartWindow{Start: o.Format("15:04"), End: cl.Format("15:04")})
		if i < len(nights) {
			minutes = append(minutes, strconv.Itoa(o.Minute()))
		}
	}
	return windows, strings.Join(minutes, ",") + " * * * *"
}

// fleetNamespace is the namespace of a policy's copy of the fleet.
func fleetNamespace(p fleetPolicy) string { return "leakfleet-" + string(p) }

const fleetLabel = "bench.deckhand.dev/fleet"

// fleetDeployment is one workload of the fleet: replicas pods on the fake
// node, container "app" with the plan's memory limit, simulated usage from
// base growing PerSecond.
func fleetDeployment(p fleetPlan, ns string, w workloadLeak) *appsv1.Deployment {
	t := scaleTemplate(w.Name)
	t.Annotations = map[string]string{
		localcluster.SimMemoryWorkingSetAnnotation:    strconv.FormatInt(p.Base, 10),
		localcluster.SimMemoryLeakPerSecondAnnotation: strconv.FormatInt(w.PerSecond, 10),
	}
	t.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(p.Limit, resource.BinarySI)}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: ns, Labels: map[string]string{fleetLabel: "leak"}},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(int32(p.Replicas)), Selector: &metav1.LabelSelector{MatchLabels: t.Labels}, Template: t},
	}
}

// fleetSchedule is the policy's RestartSchedule (none has none).
func fleetSchedule(p fleetPlan, c fleetClock, policy fleetPolicy) *deckhandv1alpha1.RestartSchedule {
	windows, cron := c.spec()
	rs := &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: string(policy), Namespace: fleetNamespace(policy)},
		Spec: deckhandv1alpha1.RestartScheduleSpec{TimeZone: "UTC", Windows: windows,
			Target: deckhandv1alpha1.RestartTarget{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{fleetLabel: "leak"}}}},
	}
	switch policy {
	case policyNightly:
		// Every workload in the night's window: a quarter of them at a
		// time, each rolling as its Deployment's strategy says.
		rs.Spec.Schedule = cron
		rs.Spec.MaxConcurrent = int32(max(1, len(p.Workloads)/4))
	case policyNeed:
		rs.Spec.Triggers = []deckhandv1alpha1.RestartNeedTrigger{{Memory: &deckhandv1alpha1.RestartMemoryTrigger{
			Container: "app", PercentOfLimit: ptr.To(p.Threshold), For: &metav1.Duration{Duration: p.For}}}}
		// As many pods at a time as a Deployment's default rolling update
		// replaces (25%, rounded up): with one at a time, the pods of a
		// workload that cross together wait a turn each, which in the
		// compressed clock is over a simulated hour.
		rs.Spec.Action = deckhandv1alpha1.RestartAction{Scope: deckhandv1alpha1.RestartScopePod, MaxConcurrent: p.podsAtOnce(),
			MinPodAge: &metav1.Duration{Duration: p.MinPodAge}, Cooldown: &metav1.Duration{}}
		rs.Spec.Urgency = &deckhandv1alpha1.RestartUrgency{PredictedLimitWithin: metav1.Duration{Duration: p.Urgent}}
	default:
		return nil
	}
	return rs
}

// benchLeakFleet: item 9. One cluster of its own with metrics-server; the
// same fleet in three namespaces, one per policy, created together at the
// start of simulated day 0 and run for plan.Days simulated days.
func benchLeakFleet(ctx context.Context, cfg *config, r *report) error {
	plan := newFleetPlan(cfg)
	// About 100 pods a fake node: metrics-server scrapes each node in one
	// request, which fails as a whole when it times out.
	opts := localcluster.Full(max(1, len(plan.Workloads)*plan.Replicas*len(fleetPolicies)/100))
	opts.Metrics = true
	opts.ClientQPS, opts.ClientBurst = 1000, 2000
	e, err := startEnv(ctx, cfg, "leakfleet", opts, nil)
	if err != nil {
		return err
	}
	defer e.stop()
	obs, err := watchFleet(ctx, e, plan)
	if err != nil {
		return err
	}
	defer obs.close()
	for _, p := range fleetPolicies {
		if err := e.namespace(ctx, fleetNamespace(p)); err != nil {
			return err
		}
	}
	// Day 0 starts on a whole minute, so that windows ("HH:MM") fall on
	// the simulated nights exactly.
	clk := fleetClock{start: time.Now().Truncate(time.Minute).Add(time.Minute), plan: plan}
	logf("[leakfleet] %d workloads x %d pods x %d policies; day = %s, day 0 starts %s, ends %s", len(plan.Workloads), plan.Replicas, len(fleetPolicies),
		plan.Day, clk.start.UTC().Format(time.TimeOnly), clk.end().UTC().Format(time.TimeOnly))
	for _, p := range fleetPolicies {
		if rs := fleetSchedule(plan, clk, p); rs != nil {
			if err := e.c.Create(ctx, rs); err != nil {
				return fmt.Errorf("RestartSchedule %s: %w", p, err)
			}
		}
	}
	if err := sleepUntil(ctx, clk.start); err != nil {
		return err
	}
	// Workload i of every policy together, so that the three copies are
	// the same age.
	if err := runWorkers(len(plan.Workloads)*len(fleetPolicies), 16, func(i int) error {
		w, p := plan.Workloads[i/len(fleetPolicies)], fleetPolicies[i%len(fleetPolicies)]
		return e.c.Create(ctx, fleetDeployment(plan, fleetNamespace(p), w))
	}); err != nil {
		return err
	}
	for _, p := range fleetPolicies {
		if err := waitDeployments(ctx, e, fleetNamespace(p), len(plan.Workloads), 1, 5*time.Minute); err != nil {
			return fmt.Errorf("%s: first rollout: %w", p, err)
		}
	}
	logf("[leakfleet] fleet rolled out %s after day 0 started", time.Since(clk.start).Round(time.Second))
	if err := sleepUntil(ctx, clk.end()); err != nil {
		return err
	}
	res, err := obs.result(ctx, e, clk)
	if err != nil {
		return err
	}
	r.record("leakfleet", res)
	reportLeakFleet(r, res)
	return nil
}

func sleepUntil(ctx context.Context, t time.Time) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(t)):
		return nil
	}
}
