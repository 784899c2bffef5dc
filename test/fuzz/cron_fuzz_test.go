package fuzz

import (
	"testing"
	"time"

	"github.com/deckhand-dev/deckhand/internal/cronschedule"
)

// FuzzCronSchedule: any schedule, time zone and moment. Parsing never
// panics; Next is strictly later; PlanAt's slot lies in (earliest, now]; and
// once a slot is handled (earliest = slot) nothing is due again before the
// next slot: the rule behind "each slot restarts a workload at most once".
func FuzzCronSchedule(f *testing.F) {
	for _, s := range []struct {
		spec, tz string
	}{
		{"0 3 * * *", "Europe/Paris"}, {"30 2 * * *", "America/New_York"}, {"*/5 * * * *", "UTC"},
		{"@every 90m", ""}, {"@hourly", "Australia/Lord_Howe"}, {"0 0 31 2 *", "UTC"}, {"0 0 29 2 *", "Asia/Kathmandu"},
		{"CRON_TZ=Europe/Paris 0 3 * * *", ""}, {"@every 0s", ""}, {"@every -1h", ""}, {"60 * * * *", "UTC"},
		{"* * * * * *", ""}, {"0 1-3/2 * JAN-DEC MON-FRI", "Local"}, {"", "Mars/Olympus"}, {"@every 1s", "../../etc/passwd"},
	} {
		f.Add(s.spec, s.tz, int64(1774747800), uint32(3600*30))
	}
	f.Fuzz(func(t *testing.T, spec, tz string, nowUnix int64, back uint32) {
		// Times in [2000, 2100), looking back at most ~1.5 years.
		now := time.Unix(946684800+((nowUnix%3155760000)+3155760000)%3155760000, 0).UTC()
		earliest := now.Add(-time.Duration(back%(550*86400)) * time.Second)
		sched, err := cronschedule.New(spec, tz, now)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an empty error message")
			}
			return
		}
		if n := sched.Next(now); !n.IsZero() && !n.After(now) {
			t.Fatalf("Next(%s) = %s, not after it", now, n)
		}
		deadline := 10 * time.Minute
		p := sched.PlanAt(earliest, now, &deadline)
		if p.Slot.IsZero() {
			return
		}
		if !p.Slot.After(earliest) || p.Slot.After(now) {
			t.Fatalf("slot %s outside (%s, %s]", p.Slot, earliest, now)
		}
		if p.Count < 1 {
			t.Fatalf("slot %s with count %d", p.Slot, p.Count)
		}
		if again := sched.PlanAt(p.Slot, now, &deadline); !again.Slot.IsZero() {
			t.Fatalf("slot %s was handled, yet %s is due again at %s (schedule %q, zone %q)", p.Slot, again.Slot, now, spec, tz)
		}
	})
}
