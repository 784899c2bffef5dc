package restartschedule

import (
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/cronschedule"
)

// Event and condition reasons of the restart calendar and failurePolicy.
const (
	// ReasonInvalidWindows: spec.windows or spec.blackoutDates cannot be
	// used (only possible past a webhook that was down).
	ReasonInvalidWindows = "InvalidWindows"
	// ReasonRunStopped: failurePolicy Stop halted a run after a failed
	// restart (Warning Event, and the reason of RunStopped and Ready).
	ReasonRunStopped = "RunStopped"
	// ReasonRunNotStopped: the RunStopped condition is False.
	ReasonRunNotStopped = "NotStopped"
	// ReasonRunDeferred: a run due outside the windows or on a blackout date
	// waits for the next opening (outsideWindowPolicy Defer).
	ReasonRunDeferred = "RunDeferred"
)

// calendarSkipPrefix starts the message of a history entry for a run the
// calendar skipped; consecutive such entries are folded into one.
const calendarSkipPrefix = "not started: "

// parseCalendar builds the calendar of spec.windows and spec.blackoutDates
// in spec.timeZone; nil when neither is set.
func parseCalendar(spec deckhandv1alpha1.RestartScheduleSpec) (*cronschedule.Calendar, error) {
	windows := make([]cronschedule.WindowSpec, 0, len(spec.Windows))
	for _, w := range spec.Windows {
		days := make([]string, 0, len(w.Days))
		for _, d := range w.Days {
			days = append(days, string(d))
		}
		windows = append(windows, cronschedule.WindowSpec{Days: days, Start: w.Start, End: w.End})
	}
	c, err := cronschedule.NewCalendar(spec.TimeZone, windows, spec.BlackoutDates)
	if err != nil {
		return nil, fmt.Errorf("spec.%w", err)
	}
	return c, nil
}

// deferToWindow reports whether outsideWindowPolicy is Defer.
func deferToWindow(spec deckhandv1alpha1.RestartScheduleSpec) bool {
	return spec.OutsideWindowPolicy == deckhandv1alpha1.RestartOutsideWindowDefer
}

// startingDeadline is spec.startingDeadlineSeconds as a duration, nil when
// unset.
func startingDeadline(spec deckhandv1alpha1.RestartScheduleSpec) *time.Duration {
	if spec.StartingDeadlineSeconds == nil {
		return nil
	}
	d := time.Duration(*spec.StartingDeadlineSeconds) * time.Second
	return &d
}

// recordCalendarSkip records a scheduled run the calendar did not let
// start. A run of such entries is folded into the newest one, so that an
// hourly schedule with a weekend window does not push every real run out
// of the history; only the first of a run of skips has an Event.
func recordCalendarSkip(s *scope, rec deckhandv1alpha1.RestartRecord) (folded bool) {
	st := &s.rs.Status
	rec.Result = deckhandv1alpha1.RestartSkipped
	if len(st.History) > 0 {
		h := st.History[0]
		if h.Workload == "" && h.Result == deckhandv1alpha1.RestartSkipped && h.Trigger != deckhandv1alpha1.RestartTriggerRunNow &&
			strings.HasPrefix(h.Message, calendarSkipPrefix) {
			st.History = st.History[1:]
			folded = true
		}
	}
	s.record(rec)
	return folded
}

// jitterDelay is how long after its run's time a workload's restart waits
// under spec.jitter: a hash of the schedule's UID, the workload and the
// run's time, scaled to [0, bound), to the millisecond.
//
// Note: the delay is derived, never drawn (math/rand). A manager killed
// and restarted in the middle of a run computes the same delay for every
// workload, so a workload not yet restarted is neither started early nor
// pushed later than announced, and replicas agree with each other, with
// nothing written to the status before each start. The restarted-at
// annotation already makes a second patch for the same run a no-op; a
// stable delay keeps the one patch at a stable time too, which matters
// when windows close or a deadline runs out in between. Different UIDs
// spread schedules that share an instant, and different workloads spread
// the members of one run.
func jitterDelay(uid types.UID, workload string, run time.Time, bound time.Duration) time.Duration {
	ms := uint64(bound / time.Millisecond)
	if ms == 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(string(uid) + "\x00" + workload + "\x00" + formatSlot(run)))
	return time.Duration(h.Sum64()%ms) * time.Millisecond
}

// jitterBound is spec.jitter, zero when unset.
func jitterBound(spec deckhandv1alpha1.RestartScheduleSpec) time.Duration {
	if spec.Jitter == nil || spec.Jitter.Duration < 0 {
		return 0
	}
	return spec.Jitter.Duration
}
