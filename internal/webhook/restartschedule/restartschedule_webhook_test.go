package restartschedule

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

func valid() *deckhandv1alpha1.RestartSchedule {
	return &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Spec: deckhandv1alpha1.RestartScheduleSpec{
			Schedule: "0 3 * * *", TimeZone: "Europe/Paris",
			Target:            deckhandv1alpha1.RestartTarget{TargetRef: &deckhandv1alpha1.RestartWorkloadReference{Kind: "Deployment", Name: "web"}},
			ConcurrencyPolicy: deckhandv1alpha1.RestartForbid, MaxConcurrent: 1, HistoryLimit: 10,
			RolloutTimeout: &metav1.Duration{Duration: time.Minute},
		},
	}
}

// validQuery is a query trigger on the DCGM exporter's GPU memory in use,
// through an https Prometheus with a token and a CA bundle.
func validQuery() *deckhandv1alpha1.RestartQueryTrigger {
	return &deckhandv1alpha1.RestartQueryTrigger{
		Prometheus: deckhandv1alpha1.RestartPrometheusEndpoint{URL: "https://prometheus.monitoring:9090",
			BearerTokenSecret: &deckhandv1alpha1.RestartKeyReference{Name: "prometheus", Key: "token"},
			CABundle:          &deckhandv1alpha1.RestartCABundleSource{ConfigMap: &deckhandv1alpha1.RestartKeyReference{Name: "prometheus-ca", Key: "ca.crt"}}},
		Expr:  "max by (namespace, pod) (DCGM_FI_DEV_FB_USED)",
		Above: resource.MustParse("20000"),
	}
}

// withQuery sets one query trigger, validQuery changed by mutate.
func withQuery(mutate func(*deckhandv1alpha1.RestartQueryTrigger)) func(*deckhandv1alpha1.RestartSchedule) {
	return func(r *deckhandv1alpha1.RestartSchedule) {
		q := validQuery()
		mutate(q)
		r.Spec.Triggers = []deckhandv1alpha1.RestartNeedTrigger{{Query: q}}
	}
}

// The webhook's own checks (the API-server table is in the controller
// package's end-to-end tests).
func TestValidate(t *testing.T) {
	cases := map[string]struct {
		mutate func(*deckhandv1alpha1.RestartSchedule)
		want   string // "" = valid
	}{
		"valid":        {func(*deckhandv1alpha1.RestartSchedule) {}, ""},
		"valid every":  {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.Schedule = "@every 90m" }, ""},
		"every minute": {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.Schedule = "@every 1m" }, ""},
		"too often": {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.Schedule = "@every 59s" },
			`spec.schedule: Invalid value: "@every 59s": fires every 59s: the shortest interval allowed between two runs is 1m0s`},
		"valid selector": {func(r *deckhandv1alpha1.RestartSchedule) {
			r.Spec.Target = deckhandv1alpha1.RestartTarget{Selector: &metav1.LabelSelector{}}
		}, ""},
		"cron":        {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.Schedule = "0 25 * * *" }, "spec.schedule"},
		"never fires": {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.Schedule = "0 0 31 2 *" }, "spec.schedule: Invalid value: \"0 0 31 2 *\": schedule never fires"},
		"zone":        {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.TimeZone = "Europe/Atlantis" }, "spec.timeZone"},
		"both":        {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.Target.Selector = &metav1.LabelSelector{} }, "spec.target"},
		"neither":     {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.Target.TargetRef = nil }, "spec.target: Required"},
		"kind":        {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.Target.TargetRef.Kind = "CronJob" }, "spec.target.targetRef.kind"},
		"deadline":    {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.StartingDeadlineSeconds = ptr.To[int64](-1) }, "spec.startingDeadlineSeconds"},
		"timeout":     {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.RolloutTimeout.Duration = 0 }, "spec.rolloutTimeout"},
		"deadline overflowing a duration": {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.StartingDeadlineSeconds = ptr.To[int64](1<<63 - 1) },
			"spec.startingDeadlineSeconds: Invalid value: 9223372036854775807: must be between 1 and 31536000 seconds"},
		"deadline a year":    {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.StartingDeadlineSeconds = ptr.To[int64](31536000) }, ""},
		"timeout a week":     {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.RolloutTimeout.Duration = 169 * time.Hour }, "spec.rolloutTimeout"},
		"max concurrent 101": {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.MaxConcurrent = 101 }, "spec.maxConcurrent"},
		"history":            {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.HistoryLimit = 0 }, "spec.historyLimit"},
		"max concurrent":     {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.MaxConcurrent = 0 }, "spec.maxConcurrent"},
		"policy":             {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.ConcurrencyPolicy = "Allow" }, "spec.concurrencyPolicy"},
		"podset target":      {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.Target.TargetRef.Kind = "PodSet" }, ""},
		"valid calendar": {func(r *deckhandv1alpha1.RestartSchedule) {
			r.Spec.Windows = []deckhandv1alpha1.RestartWindow{{Days: []deckhandv1alpha1.RestartWeekday{"Sat", "Sun"}, Start: "22:00", End: "02:00"}, {Start: "00:00", End: "24:00"}}
			r.Spec.BlackoutDates = []string{"2026-12-24", "2026-12-20/2027-01-05"}
			r.Spec.OutsideWindowPolicy, r.Spec.FailurePolicy = deckhandv1alpha1.RestartOutsideWindowDefer, deckhandv1alpha1.RestartFailureStop
			r.Spec.Jitter = &metav1.Duration{Duration: 5 * time.Minute}
		}, ""},
		"window day": {func(r *deckhandv1alpha1.RestartSchedule) {
			r.Spec.Windows = []deckhandv1alpha1.RestartWindow{{Start: "01:00", End: "02:00"}, {Days: []deckhandv1alpha1.RestartWeekday{"Mon", "Monday"}, Start: "01:00", End: "02:00"}}
		}, `spec.windows[1].days[1]: Invalid value: "Monday": unknown day`},
		"window start": {func(r *deckhandv1alpha1.RestartSchedule) {
			r.Spec.Windows = []deckhandv1alpha1.RestartWindow{{Start: "1:00", End: "02:00"}}
		}, `spec.windows[0].start: Invalid value: "1:00"`},
		"window end": {func(r *deckhandv1alpha1.RestartSchedule) {
			r.Spec.Windows = []deckhandv1alpha1.RestartWindow{{Start: "01:00", End: "24:30"}}
		}, `spec.windows[0].end: Invalid value: "24:30"`},
		"empty window": {func(r *deckhandv1alpha1.RestartSchedule) {
			r.Spec.Windows = []deckhandv1alpha1.RestartWindow{{Start: "01:00", End: "01:00"}}
		}, `spec.windows[0].end: Invalid value: "01:00": must differ from start`},
		"blackout date": {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.BlackoutDates = []string{"2026-12-24", "2026-13-01"} }, `spec.blackoutDates[1]: Invalid value: "2026-13-01"`},
		"blackout range": {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.BlackoutDates = []string{"2027-01-05/2026-12-20"} },
			`spec.blackoutDates[0]: Invalid value: "2027-01-05/2026-12-20": date range "2027-01-05/2026-12-20" ends before it starts`},
		"outside policy": {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.OutsideWindowPolicy = "Wait" }, "spec.outsideWindowPolicy"},
		"failure policy": {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.FailurePolicy = "Abort" }, "spec.failurePolicy"},
		"jitter":         {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.Jitter = &metav1.Duration{Duration: 25 * time.Hour} }, "spec.jitter"},
		"no schedule, no trigger": {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.Schedule = "" },
			"spec.schedule: Required value: a schedule is required unless triggers are set"},
		"triggers without schedule": {func(r *deckhandv1alpha1.RestartSchedule) {
			r.Spec.Schedule = ""
			r.Spec.Triggers = []deckhandv1alpha1.RestartNeedTrigger{{PodAge: &deckhandv1alpha1.RestartPodAgeTrigger{MaxAge: metav1.Duration{Duration: 24 * time.Hour}}}}
			r.Spec.Action = deckhandv1alpha1.RestartAction{Scope: deckhandv1alpha1.RestartScopePod, MaxConcurrent: 1, MinPodAge: &metav1.Duration{Duration: 10 * time.Minute}}
		}, ""},
		"empty trigger": {func(r *deckhandv1alpha1.RestartSchedule) {
			r.Spec.Triggers = []deckhandv1alpha1.RestartNeedTrigger{{}}
		}, "spec.triggers[0]: Required value: exactly one kind of trigger (podAge, memory, query) must be set"},
		"pod age zero": {func(r *deckhandv1alpha1.RestartSchedule) {
			r.Spec.Triggers = []deckhandv1alpha1.RestartNeedTrigger{{PodAge: &deckhandv1alpha1.RestartPodAgeTrigger{}}}
		}, `spec.triggers[0].podAge.maxAge: Invalid value: "0s": must be between 1s and 8760h`},
		"memory percent": {func(r *deckhandv1alpha1.RestartSchedule) {
			r.Spec.Triggers = []deckhandv1alpha1.RestartNeedTrigger{{Memory: &deckhandv1alpha1.RestartMemoryTrigger{Container: "app", PercentOfLimit: ptr.To[int32](90), For: &metav1.Duration{Duration: 5 * time.Minute}}}}
		}, ""},
		"memory above": {func(r *deckhandv1alpha1.RestartSchedule) {
			r.Spec.Triggers = []deckhandv1alpha1.RestartNeedTrigger{{Memory: &deckhandv1alpha1.RestartMemoryTrigger{Above: ptr.To(resource.MustParse("900Mi"))}}}
		}, ""},
		"memory both thresholds": {func(r *deckhandv1alpha1.RestartSchedule) {
			r.Spec.Triggers = []deckhandv1alpha1.RestartNeedTrigger{{Memory: &deckhandv1alpha1.RestartMemoryTrigger{PercentOfLimit: ptr.To[int32](90), Above: ptr.To(resource.MustParse("900Mi"))}}}
		}, "spec.triggers[0].memory: Required value: exactly one of percentOfLimit or above must be set"},
		"memory percent 0": {func(r *deckhandv1alpha1.RestartSchedule) {
			r.Spec.Triggers = []deckhandv1alpha1.RestartNeedTrigger{{Memory: &deckhandv1alpha1.RestartMemoryTrigger{PercentOfLimit: ptr.To[int32](0)}}}
		}, "spec.triggers[0].memory.percentOfLimit: Invalid value: 0"},
		"memory above 0": {func(r *deckhandv1alpha1.RestartSchedule) {
			r.Spec.Triggers = []deckhandv1alpha1.RestartNeedTrigger{{Memory: &deckhandv1alpha1.RestartMemoryTrigger{Above: ptr.To(resource.MustParse("0"))}}}
		}, "spec.triggers[0].memory.above"},
		"memory for": {func(r *deckhandv1alpha1.RestartSchedule) {
			r.Spec.Triggers = []deckhandv1alpha1.RestartNeedTrigger{{Memory: &deckhandv1alpha1.RestartMemoryTrigger{Above: ptr.To(resource.MustParse("1Gi")), For: &metav1.Duration{Duration: 25 * time.Hour}}}}
		}, "spec.triggers[0].memory.for"},
		"memory container": {func(r *deckhandv1alpha1.RestartSchedule) {
			r.Spec.Triggers = []deckhandv1alpha1.RestartNeedTrigger{{Memory: &deckhandv1alpha1.RestartMemoryTrigger{Container: "App_1", Above: ptr.To(resource.MustParse("1Gi"))}}}
		}, "spec.triggers[0].memory.container"},
		"two kinds in one trigger": {func(r *deckhandv1alpha1.RestartSchedule) {
			r.Spec.Triggers = []deckhandv1alpha1.RestartNeedTrigger{{PodAge: &deckhandv1alpha1.RestartPodAgeTrigger{MaxAge: metav1.Duration{Duration: time.Hour}},
				Memory: &deckhandv1alpha1.RestartMemoryTrigger{Above: ptr.To(resource.MustParse("1Gi"))}}}
		}, "spec.triggers[0]: Required value: exactly one kind"},
		"query": {withQuery(func(*deckhandv1alpha1.RestartQueryTrigger) {}), ""},
		"query with podAge": {func(r *deckhandv1alpha1.RestartSchedule) {
			r.Spec.Triggers = []deckhandv1alpha1.RestartNeedTrigger{{Query: validQuery(), PodAge: &deckhandv1alpha1.RestartPodAgeTrigger{MaxAge: metav1.Duration{Duration: time.Hour}}}}
		}, "spec.triggers[0]: Required value: exactly one kind of trigger (podAge, memory, query) must be set"},
		"query no expr":       {withQuery(func(q *deckhandv1alpha1.RestartQueryTrigger) { q.Expr = "" }), "spec.triggers[0].query.expr: Required value"},
		"query expr too long": {withQuery(func(q *deckhandv1alpha1.RestartQueryTrigger) { q.Expr = strings.Repeat("x", 4097) }), "spec.triggers[0].query.expr: Too long: may not be more than 4096"},
		"query no url":        {withQuery(func(q *deckhandv1alpha1.RestartQueryTrigger) { q.Prometheus.URL = "" }), "spec.triggers[0].query.prometheus.url: Required value"},
		"query url scheme":    {withQuery(func(q *deckhandv1alpha1.RestartQueryTrigger) { q.Prometheus.URL = "prometheus:9090" }), `spec.triggers[0].query.prometheus.url: Invalid value: "prometheus:9090": must be an http or https URL with a host`},
		"query url too long": {withQuery(func(q *deckhandv1alpha1.RestartQueryTrigger) {
			q.Prometheus.URL = "http://p/" + strings.Repeat("x", 2048)
		}), "spec.triggers[0].query.prometheus.url: Too long"},
		"query CA from both": {withQuery(func(q *deckhandv1alpha1.RestartQueryTrigger) {
			ref := &deckhandv1alpha1.RestartKeyReference{Name: "ca", Key: "ca.crt"}
			q.Prometheus.CABundle = &deckhandv1alpha1.RestartCABundleSource{Secret: ref, ConfigMap: ref}
		}), "spec.triggers[0].query.prometheus.caBundle: Required value: exactly one of secret or configMap"},
		"query for":   {withQuery(func(q *deckhandv1alpha1.RestartQueryTrigger) { q.For = &metav1.Duration{Duration: 25 * time.Hour} }), "spec.triggers[0].query.for"},
		"query limit": {withQuery(func(q *deckhandv1alpha1.RestartQueryTrigger) { q.Limit = ptr.To(resource.MustParse("24000")) }), ""},
		"query limit under above": {withQuery(func(q *deckhandv1alpha1.RestartQueryTrigger) { q.Limit = ptr.To(resource.MustParse("1000")) }),
			`spec.triggers[0].query.limit: Invalid value: "1k": must be at least above (20k)`},
		"urgency": {func(r *deckhandv1alpha1.RestartSchedule) {
			withQuery(func(*deckhandv1alpha1.RestartQueryTrigger) {})(r)
			r.Spec.Urgency = &deckhandv1alpha1.RestartUrgency{PredictedLimitWithin: metav1.Duration{Duration: 10 * time.Minute}}
		}, ""},
		"urgency with no memory or query trigger": {func(r *deckhandv1alpha1.RestartSchedule) {
			r.Spec.Triggers = []deckhandv1alpha1.RestartNeedTrigger{{PodAge: &deckhandv1alpha1.RestartPodAgeTrigger{MaxAge: metav1.Duration{Duration: time.Hour}}}}
			r.Spec.Urgency = &deckhandv1alpha1.RestartUrgency{PredictedLimitWithin: metav1.Duration{Duration: 10 * time.Minute}}
		}, "spec.urgency: Invalid value: \"\": urgency needs a memory or query trigger"},
		"urgency predictedLimitWithin": {func(r *deckhandv1alpha1.RestartSchedule) {
			withQuery(func(*deckhandv1alpha1.RestartQueryTrigger) {})(r)
			r.Spec.Urgency = &deckhandv1alpha1.RestartUrgency{}
		}, `spec.urgency.predictedLimitWithin: Invalid value: "0s": must be between 1s and 168h`},
		"action scope":          {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.Action.Scope = "Node" }, "spec.action.scope: Unsupported value"},
		"action scope Workload": {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.Action.Scope = deckhandv1alpha1.RestartScopeWorkload }, ""},
		"action max concurrent": {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.Action.MaxConcurrent = 101 }, "spec.action.maxConcurrent"},
		"action min pod age": {func(r *deckhandv1alpha1.RestartSchedule) {
			r.Spec.Action.MinPodAge = &metav1.Duration{Duration: -time.Second}
		},
			`spec.action.minPodAge: Invalid value: "-1s"`},
		"action cooldown": {func(r *deckhandv1alpha1.RestartSchedule) {
			r.Spec.Action.Cooldown = &metav1.Duration{Duration: 169 * time.Hour}
		},
			`spec.action.cooldown: Invalid value: "169h0m0s"`},
	}
	v := &Validator{}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rs := valid()
			tc.mutate(rs)
			_, err := v.ValidateCreate(t.Context(), rs)
			testutil.WantError(t, err, tc.want)
		})
	}
}

// An update leaves an unchanged schedule alone (so an object accepted
// earlier stays editable) but checks a changed one.
func TestValidateUpdateRatchets(t *testing.T) {
	v := &Validator{}
	old := valid()
	old.Spec.Schedule = "0 0 31 2 *" // accepted while the webhook was down
	cur := old.DeepCopy()
	cur.Spec.Suspend = true
	if _, err := v.ValidateUpdate(t.Context(), old, cur); err != nil {
		t.Fatalf("unchanged schedule re-checked: %v", err)
	}
	cur.Spec.Schedule = "0 0 30 2 *"
	if _, err := v.ValidateUpdate(t.Context(), old, cur); err == nil || !strings.Contains(err.Error(), "spec.schedule") {
		t.Fatalf("changed schedule not checked: %v", err)
	}
}
