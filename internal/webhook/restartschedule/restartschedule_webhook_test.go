package restartschedule

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
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

// The webhook's own checks (the API-server table is in the controller
// package's end-to-end tests).
func TestValidate(t *testing.T) {
	cases := map[string]struct {
		mutate func(*deckhandv1alpha1.RestartSchedule)
		want   string // "" = valid
	}{
		"valid":       {func(*deckhandv1alpha1.RestartSchedule) {}, ""},
		"valid every": {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.Schedule = "@every 90m" }, ""},
		"valid selector": {func(r *deckhandv1alpha1.RestartSchedule) {
			r.Spec.Target = deckhandv1alpha1.RestartTarget{Selector: &metav1.LabelSelector{}}
		}, ""},
		"cron":           {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.Schedule = "0 25 * * *" }, "spec.schedule"},
		"never fires":    {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.Schedule = "0 0 31 2 *" }, "spec.schedule: Invalid value: \"0 0 31 2 *\": schedule never fires"},
		"zone":           {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.TimeZone = "Europe/Atlantis" }, "spec.timeZone"},
		"both":           {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.Target.Selector = &metav1.LabelSelector{} }, "spec.target"},
		"neither":        {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.Target.TargetRef = nil }, "spec.target: Required"},
		"kind":           {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.Target.TargetRef.Kind = "CronJob" }, "spec.target.targetRef.kind"},
		"deadline":       {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.StartingDeadlineSeconds = ptr.To[int64](-1) }, "spec.startingDeadlineSeconds"},
		"timeout":        {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.RolloutTimeout.Duration = 0 }, "spec.rolloutTimeout"},
		"history":        {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.HistoryLimit = 0 }, "spec.historyLimit"},
		"max concurrent": {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.MaxConcurrent = 0 }, "spec.maxConcurrent"},
		"policy":         {func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.ConcurrencyPolicy = "Allow" }, "spec.concurrencyPolicy"},
	}
	v := &Validator{}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rs := valid()
			tc.mutate(rs)
			_, err := v.ValidateCreate(t.Context(), rs)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
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
