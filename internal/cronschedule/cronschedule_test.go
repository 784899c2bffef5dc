package cronschedule

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

var now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestNextAcrossZonesAndDST(t *testing.T) {
	cases := map[string]struct {
		spec, tz, from string
		want           []string
	}{
		"utc daily": {"0 3 * * *", "UTC", "2026-01-01T10:00:00Z",
			[]string{"2026-01-02T03:00:00Z", "2026-01-03T03:00:00Z"}},
		"empty zone is utc": {"0 3 * * *", "", "2026-01-01T10:00:00Z",
			[]string{"2026-01-02T03:00:00Z"}},
		"paris winter (UTC+1)": {"0 3 * * *", "Europe/Paris", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T02:00:00Z"}},
		"paris summer (UTC+2)": {"0 3 * * *", "Europe/Paris", "2026-07-01T00:00:00Z",
			[]string{"2026-07-01T01:00:00Z"}},
		"half-hour offset zone": {"0 3 * * *", "Asia/Kolkata", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T21:30:00Z"}},
		"southern hemisphere": {"@daily", "Australia/Sydney", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T13:00:00Z", "2026-01-02T13:00:00Z"}},
		// 2026-03-08 02:30 does not exist in New York: that day has no slot.
		"spring forward skips the missing wall time": {"30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z",
			[]string{"2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z"}},
		// 2026-11-01 01:30 happens twice in New York: fires once, at the first.
		"fall back fires a fixed time once": {"30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		"fall back in Europe fires once": {"30 2 * * *", "Europe/Paris", "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		// An hourly schedule runs in both of the repeated hours: they are
		// distinct hours of real time.
		"fall back hourly keeps both hours": {"0 * * * *", "America/New_York", "2026-11-01T04:30:00Z",
			[]string{"2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z"}},
		"spring forward hourly": {"0 * * * *", "America/New_York", "2026-03-08T05:30:00Z",
			[]string{"2026-03-08T06:00:00Z", "2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z"}},
		"hourly descriptor": {"@hourly", "UTC", "2026-01-01T10:15:00Z",
			[]string{"2026-01-01T11:00:00Z"}},
		"every is relative and drops sub-seconds": {"@every 90m", "Europe/Paris", "2026-01-01T00:00:00.5Z",
			[]string{"2026-01-01T01:30:00Z", "2026-01-01T03:00:00Z"}},
		"weekday list": {"0 9 * * 1-5", "UTC", "2026-01-02T10:00:00Z", // a Friday
			[]string{"2026-01-05T09:00:00Z"}},
		"leap day": {"0 0 29 2 *", "UTC", "2026-01-01T00:00:00Z",
			[]string{"2028-02-29T00:00:00Z"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := New(tc.spec, tc.tz, now)
			if err != nil {
				t.Fatalf("New(%q, %q): %v", tc.spec, tc.tz, err)
			}
			at := testutil.Time(t, tc.from)
			for i, w := range tc.want {
				at = s.Next(at)
				if !at.Equal(testutil.Time(t, w)) {
					t.Fatalf("slot %d: got %s, want %s", i, at.Format(time.RFC3339), w)
				}
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	cases := map[string]struct {
		spec, tz string
		want     string
	}{
		"never fires":          {"0 0 31 2 *", "UTC", "never fires"},
		"out of range":         {"61 * * * *", "UTC", "end of range (61) above maximum (59)"},
		"too few fields":       {"* * * *", "UTC", "expected exactly 5 fields"},
		"seconds field":        {"0 0 3 * * *", "UTC", "expected exactly 5 fields"},
		"unknown descriptor":   {"@fortnightly", "UTC", "unrecognized descriptor"},
		"bad every":            {"@every soon", "UTC", "failed to parse duration"},
		"every below a second": {"@every 10ms", "UTC", "at least 1s"},
		"zone in schedule":     {"CRON_TZ=Europe/Paris 0 3 * * *", "UTC", "set timeZone instead"},
		"unknown zone":         {"0 3 * * *", "Mars/Olympus_Mons", `unknown time zone "Mars/Olympus_Mons"`},
		"host local zone":      {"0 3 * * *", "Local", `unknown time zone "Local"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := New(tc.spec, tc.tz, now)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New(%q, %q) = %v, want an error containing %q", tc.spec, tc.tz, err, tc.want)
			}
		})
	}
	if _, err := ParseSchedule("0 0 30 2 *", now); !errors.Is(err, ErrNeverFires) {
		t.Fatalf("Feb 30: got %v, want ErrNeverFires", err)
	}
}

func TestPlanAt(t *testing.T) {
	dur := func(d time.Duration) *time.Duration { return &d }
	cases := map[string]struct {
		spec      string
		earliest  string
		now       string
		deadline  *time.Duration
		wantSlot  string // "" = nothing due
		wantCount int
		missed    bool
		tooMany   bool
		wantNext  string
	}{
		"nothing due yet": {spec: "0 * * * *", earliest: "2026-01-01T10:00:00Z", now: "2026-01-01T10:30:00Z",
			wantNext: "2026-01-01T11:00:00Z"},
		// Creation at 10:00:30 with an every-minute schedule: the first run is
		// 10:01, never "at once".
		"creating never fires at once": {spec: "* * * * *", earliest: "2026-01-01T10:00:30Z", now: "2026-01-01T10:00:30Z",
			wantNext: "2026-01-01T10:01:00Z"},
		// An edit sets earliest to the edit time: slots of the new schedule
		// before the edit never run.
		"edit never fires retroactively": {spec: "0 * * * *", earliest: "2026-01-01T10:59:59Z", now: "2026-01-01T10:59:59Z",
			wantNext: "2026-01-01T11:00:00Z"},
		"slot time itself is due": {spec: "0 * * * *", earliest: "2026-01-01T10:00:00Z", now: "2026-01-01T11:00:00Z",
			wantSlot: "2026-01-01T11:00:00Z", wantCount: 1, wantNext: "2026-01-01T12:00:00Z"},
		"handled slot is not due again": {spec: "0 * * * *", earliest: "2026-01-01T11:00:00Z", now: "2026-01-01T11:00:05Z",
			wantNext: "2026-01-01T12:00:00Z"},
		"only the latest missed slot runs": {spec: "0 * * * *", earliest: "2026-01-01T10:00:00Z", now: "2026-01-01T15:30:00Z",
			wantSlot: "2026-01-01T15:00:00Z", wantCount: 5, wantNext: "2026-01-01T16:00:00Z"},
		"within the starting deadline": {spec: "0 * * * *", earliest: "2026-01-01T10:00:00Z", now: "2026-01-01T15:05:00Z",
			deadline: dur(10 * time.Minute), wantSlot: "2026-01-01T15:00:00Z", wantCount: 5, wantNext: "2026-01-01T16:00:00Z"},
		"exactly at the starting deadline still runs": {spec: "0 * * * *", earliest: "2026-01-01T10:00:00Z", now: "2026-01-01T15:10:00Z",
			deadline: dur(10 * time.Minute), wantSlot: "2026-01-01T15:00:00Z", wantCount: 5, wantNext: "2026-01-01T16:00:00Z"},
		"past the starting deadline is missed": {spec: "0 * * * *", earliest: "2026-01-01T10:00:00Z", now: "2026-01-01T15:30:00Z",
			deadline: dur(10 * time.Minute), wantSlot: "2026-01-01T15:00:00Z", wantCount: 5, missed: true, wantNext: "2026-01-01T16:00:00Z"},
		"more than 100 missed": {spec: "0 * * * *", earliest: "2026-01-01T00:00:00Z", now: "2026-01-10T12:30:00Z",
			wantSlot: "2026-01-10T12:00:00Z", wantCount: MaxMissed + 1, tooMany: true, wantNext: "2026-01-10T13:00:00Z"},
		"every: latest slot": {spec: "@every 10m", earliest: "2026-01-01T00:00:00Z", now: "2026-01-01T00:35:00Z",
			wantSlot: "2026-01-01T00:30:00Z", wantCount: 3, wantNext: "2026-01-01T00:45:00Z"},
		"every: more than 100 missed keeps the chain": {spec: "@every 10m", earliest: "2026-01-01T00:00:00Z", now: "2026-01-02T00:03:00Z",
			wantSlot: "2026-01-02T00:00:00Z", wantCount: MaxMissed + 1, tooMany: true, wantNext: "2026-01-02T00:13:00Z"},
		"irregular schedule, more than 100 missed": {spec: "30 6-16/4 * * 1-5", earliest: "2026-01-01T00:00:00Z", now: "2026-03-04T12:00:00Z",
			wantSlot: "2026-03-04T10:30:00Z", wantCount: MaxMissed + 1, tooMany: true, wantNext: "2026-03-04T14:30:00Z"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := New(tc.spec, "UTC", now)
			if err != nil {
				t.Fatal(err)
			}
			p := s.PlanAt(testutil.Time(t, tc.earliest), testutil.Time(t, tc.now), tc.deadline)
			if tc.wantSlot == "" {
				if !p.Slot.IsZero() {
					t.Fatalf("slot %s due, want none", p.Slot)
				}
			} else if !p.Slot.Equal(testutil.Time(t, tc.wantSlot)) {
				t.Fatalf("slot %s, want %s", p.Slot, tc.wantSlot)
			}
			if p.Count != tc.wantCount || p.Missed != tc.missed || p.TooMany != tc.tooMany {
				t.Fatalf("count=%d missed=%v tooMany=%v, want %d %v %v", p.Count, p.Missed, p.TooMany, tc.wantCount, tc.missed, tc.tooMany)
			}
			if !p.Next.Equal(testutil.Time(t, tc.wantNext)) {
				t.Fatalf("next %s, want %s", p.Next, tc.wantNext)
			}
		})
	}
}

// The shortcut for schedules that missed more than MaxMissed slots must find
// the same slot as walking every slot.
func TestLatestAtOrBeforeMatchesWalk(t *testing.T) {
	specs := []string{"0 * * * *", "30 6-16/4 * * 1-5", "*/7 9-17 * * 1-5", "0 0 1 * *", "15 3 * * 0", "@every 7m", "@every 25h"}
	earliest := testutil.Time(t, "2026-01-01T00:00:00Z")
	for _, spec := range specs {
		for _, tz := range []string{"UTC", "America/New_York"} {
			s, err := New(spec, tz, now)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []string{"2026-02-03T04:05:06Z", "2026-03-08T07:30:00Z", "2026-11-01T06:10:00Z"} {
				at := testutil.Time(t, n)
				walk := time.Time{}
				for x := s.Next(earliest); !x.After(at); x = s.Next(x) {
					walk = x
				}
				got := s.PlanAt(earliest, at, nil).Slot
				if !got.Equal(walk) {
					t.Errorf("%s in %s at %s: got %s, walking gives %s", spec, tz, n, got, walk)
				}
			}
		}
	}
}

func TestShortestInterval(t *testing.T) {
	cases := map[string]struct {
		spec string
		want time.Duration
	}{
		"every second":           {"@every 1s", time.Second},
		"every 59.9s drops subs": {"@every 59.9s", 59 * time.Second},
		"every minute":           {"@every 1m", time.Minute},
		"every 90m":              {"@every 90m", 90 * time.Minute},
		"every minute by cron":   {"* * * * *", time.Minute},
		"hourly":                 {"@hourly", time.Minute},
		"daily":                  {"0 3 * * *", time.Minute},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := ParseSchedule(tc.spec, now)
			if err != nil {
				t.Fatal(err)
			}
			got := ShortestInterval(s)
			// A lower bound: no two consecutive firings of the next
			// thousand are closer.
			for a, i := s.Next(now), 0; i < 1000; i++ {
				b := s.Next(a)
				if b.Sub(a) < got {
					t.Fatalf("%s fires at %s and %s, closer than %s", tc.spec, a, b, got)
				}
				a = b
			}
			if got != tc.want {
				t.Fatalf("ShortestInterval(%q) = %s, want %s", tc.spec, got, tc.want)
			}
			err = CheckInterval(s, DefaultMinInterval)
			if tooOften := tc.want < DefaultMinInterval; (err != nil) != tooOften {
				t.Fatalf("CheckInterval(%q) = %v, want an error: %v", tc.spec, err, tooOften)
			}
		})
	}
}
