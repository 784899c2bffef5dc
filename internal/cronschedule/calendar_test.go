package cronschedule

import (
	"strings"
	"testing"
	"time"

	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

func mustCalendar(t *testing.T, tz string, windows []WindowSpec, blackouts ...string) *Calendar {
	t.Helper()
	c, err := NewCalendar(tz, windows, blackouts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The cases' dates: 2026-11-24 is a Tuesday.
func TestCalendarAllowed(t *testing.T) {
	weeknights := []WindowSpec{{Days: []string{"Mon", "Tue", "Wed", "Thu", "Fri"}, Start: "02:00", End: "04:00"}}
	overnight := []WindowSpec{{Days: []string{"Fri"}, Start: "22:00", End: "02:00"}}
	cases := map[string]struct {
		tz        string
		windows   []WindowSpec
		blackouts []string
		at        string
		want      bool
		why       string
	}{
		"no calendar":                           {"UTC", nil, nil, "2026-11-24T12:00:00Z", true, ""},
		"inside a window":                       {"UTC", weeknights, nil, "2026-11-24T02:00:00Z", true, ""},
		"end is exclusive":                      {"UTC", weeknights, nil, "2026-11-24T04:00:00Z", false, "outside every maintenance window"},
		"wrong day":                             {"UTC", weeknights, nil, "2026-11-28T03:00:00Z", false, "Sat 03:00 UTC is outside"},
		"time zone of the window":               {"Europe/Paris", weeknights, nil, "2026-11-24T01:30:00Z", true, ""}, // 02:30 in Paris
		"time zone, outside":                    {"Europe/Paris", weeknights, nil, "2026-11-24T03:30:00Z", false, "04:30 CET"},
		"crossing midnight, evening of its day": {"UTC", overnight, nil, "2026-11-27T23:00:00Z", true, ""},
		"crossing midnight, next morning":       {"UTC", overnight, nil, "2026-11-28T01:59:00Z", true, ""},
		"crossing midnight, closed":             {"UTC", overnight, nil, "2026-11-28T02:00:00Z", false, "outside"},
		"crossing midnight, other evening":      {"UTC", overnight, nil, "2026-11-28T23:00:00Z", false, "outside"},
		"end of day":                            {"UTC", []WindowSpec{{Start: "23:00", End: "24:00"}}, nil, "2026-11-24T23:59:59Z", true, ""},
		"blackout date":                         {"UTC", nil, []string{"2026-11-24"}, "2026-11-24T12:00:00Z", false, `2026-11-24 is a blackout date (blackoutDates "2026-11-24")`},
		"blackout beats a window":               {"UTC", weeknights, []string{"2026-11-24"}, "2026-11-24T03:00:00Z", false, "blackout"},
		"blackout range, inclusive end":         {"UTC", nil, []string{"2026-11-20/2026-11-24"}, "2026-11-24T23:59:00Z", false, "blackout"},
		"after a blackout range":                {"UTC", nil, []string{"2026-11-20/2026-11-24"}, "2026-11-25T00:00:00Z", true, ""},
		"blackout date in the zone":             {"America/New_York", nil, []string{"2026-11-24"}, "2026-11-25T03:00:00Z", false, "2026-11-24 is a blackout"}, // 22:00 on the 24th in New York
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := mustCalendar(t, tc.tz, tc.windows, tc.blackouts...)
			at := testutil.Time(t, tc.at)
			if got := c.Allowed(at); got != tc.want {
				t.Fatalf("Allowed(%s) = %v, want %v", tc.at, got, tc.want)
			}
			why := c.Blocked(at)
			if (why == "") != tc.want || !strings.Contains(why, tc.why) {
				t.Fatalf("Blocked(%s) = %q, want one containing %q", tc.at, why, tc.why)
			}
		})
	}
}

func TestCalendarNextAllowed(t *testing.T) {
	weeknights := []WindowSpec{{Days: []string{"Mon", "Tue", "Wed", "Thu", "Fri"}, Start: "02:00", End: "04:00"}}
	cases := map[string]struct {
		tz        string
		windows   []WindowSpec
		blackouts []string
		from      string
		want      string
	}{
		"already allowed":          {"UTC", weeknights, nil, "2026-11-24T03:00:00Z", "2026-11-24T03:00:00Z"},
		"later today":              {"UTC", weeknights, nil, "2026-11-24T01:00:00Z", "2026-11-24T02:00:00Z"},
		"tomorrow":                 {"UTC", weeknights, nil, "2026-11-24T05:00:00Z", "2026-11-25T02:00:00Z"},
		"over the weekend":         {"UTC", weeknights, nil, "2026-11-27T05:00:00Z", "2026-11-30T02:00:00Z"},
		"end of a blackout":        {"UTC", nil, []string{"2026-11-24"}, "2026-11-24T05:00:00Z", "2026-11-25T00:00:00Z"},
		"chained blackouts":        {"UTC", nil, []string{"2026-11-24/2026-11-25", "2026-11-26"}, "2026-11-24T05:00:00Z", "2026-11-27T00:00:00Z"},
		"window after a blackout":  {"UTC", weeknights, []string{"2026-11-24/2026-11-26"}, "2026-11-24T03:00:00Z", "2026-11-27T02:00:00Z"},
		"window in a time zone":    {"Europe/Paris", weeknights, nil, "2026-11-24T05:00:00Z", "2026-11-25T01:00:00Z"},
		"blackout in a time zone":  {"Europe/Paris", nil, []string{"2026-11-24"}, "2026-11-24T05:00:00Z", "2026-11-24T23:00:00Z"},
		"opening in a DST gap":     {"Europe/Paris", []WindowSpec{{Start: "02:30", End: "04:00"}}, nil, "2026-03-29T00:00:00Z", "2026-03-29T01:30:00Z"}, // 02:30 does not exist: 03:30 CEST
		"window wholly in the gap": {"Europe/Paris", []WindowSpec{{Start: "02:00", End: "03:00"}}, nil, "2026-03-28T23:30:00Z", "2026-03-30T00:00:00Z"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := mustCalendar(t, tc.tz, tc.windows, tc.blackouts...)
			got, err := c.NextAllowed(testutil.Time(t, tc.from))
			if err != nil {
				t.Fatal(err)
			}
			if want := testutil.Time(t, tc.want); !got.Equal(want) {
				t.Fatalf("NextAllowed(%s) = %s, want %s", tc.from, got.UTC().Format(time.RFC3339), tc.want)
			}
		})
	}
}

func TestCalendarParseErrors(t *testing.T) {
	cases := map[string]struct {
		windows   []WindowSpec
		blackouts []string
		want      string
	}{
		"day":             {[]WindowSpec{{Days: []string{"Mon", "Funday"}, Start: "01:00", End: "02:00"}}, nil, `windows[0].days[1]: unknown day "Funday"`},
		"start":           {[]WindowSpec{{Start: "25:00", End: "02:00"}}, nil, `windows[0].start: invalid time "25:00"`},
		"start 24:00":     {[]WindowSpec{{Start: "24:00", End: "02:00"}}, nil, `windows[0].start`},
		"end":             {[]WindowSpec{{Start: "01:00", End: "2:00"}}, nil, `windows[0].end: invalid time "2:00"`},
		"empty window":    {[]WindowSpec{{Start: "01:00", End: "02:00"}, {Start: "03:00", End: "03:00"}}, nil, `windows[1].end: must differ from start`},
		"date":            {nil, []string{"2026-02-30"}, `blackoutDates[0]: invalid date "2026-02-30"`},
		"range":           {nil, []string{"2026-01-01", "2026-01-05/2026-01-01"}, `blackoutDates[1]: date range "2026-01-05/2026-01-01" ends before it starts`},
		"range separator": {nil, []string{"2026-01-01..2026-01-05"}, `blackoutDates[0]: invalid date`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := NewCalendar("UTC", tc.windows, tc.blackouts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestCalendarAdmit(t *testing.T) {
	c := mustCalendar(t, "UTC", []WindowSpec{{Start: "02:00", End: "04:00"}}, "2026-11-26")
	hour := time.Hour
	cases := map[string]struct {
		slot, now string
		deferRun  bool
		deadline  *time.Duration
		run       bool
		wait      string
		why       string
	}{
		"skip: in the window":                    {"2026-11-24T02:00:00Z", "2026-11-24T02:00:01Z", false, nil, true, "", ""},
		"skip: slot outside":                     {"2026-11-24T05:00:00Z", "2026-11-24T05:00:00Z", false, nil, false, "", "outside every maintenance window"},
		"skip: late start after the window":      {"2026-11-24T03:30:00Z", "2026-11-24T04:10:00Z", false, nil, false, "", "04:10"},
		"skip: slot outside, started in one":     {"2026-11-24T01:59:00Z", "2026-11-24T02:01:00Z", false, nil, false, "", "01:59"},
		"skip: blackout":                         {"2026-11-26T03:00:00Z", "2026-11-26T03:00:00Z", false, nil, false, "", "blackout date"},
		"defer: in the window":                   {"2026-11-24T03:00:00Z", "2026-11-24T03:00:00Z", true, nil, true, "", ""},
		"defer: slot outside, started in one":    {"2026-11-24T01:59:00Z", "2026-11-24T02:01:00Z", true, nil, true, "", ""},
		"defer: waits for the opening":           {"2026-11-24T05:00:00Z", "2026-11-24T05:00:00Z", true, nil, false, "2026-11-25T02:00:00Z", "deferred to 2026-11-25T02:00:00Z"},
		"defer: over a blackout":                 {"2026-11-25T05:00:00Z", "2026-11-25T05:00:00Z", true, nil, false, "2026-11-27T02:00:00Z", "deferred"},
		"defer: opening within the deadline":     {"2026-11-24T01:30:00Z", "2026-11-24T01:30:00Z", true, &hour, false, "2026-11-24T02:00:00Z", "deferred"},
		"defer: opening beyond the deadline":     {"2026-11-24T05:00:00Z", "2026-11-24T05:00:00Z", true, &hour, false, "", "more than startingDeadlineSeconds (1h0m0s)"},
		"defer: deadline counts from the slot":   {"2026-11-24T00:30:00Z", "2026-11-24T01:00:00Z", true, &hour, false, "", "more than startingDeadlineSeconds"},
		"defer: deadline exactly at the opening": {"2026-11-24T01:00:00Z", "2026-11-24T01:00:00Z", true, &hour, false, "2026-11-24T02:00:00Z", "deferred"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v := c.Admit(testutil.Time(t, tc.slot), testutil.Time(t, tc.now), tc.deferRun, tc.deadline)
			if v.Run != tc.run {
				t.Fatalf("Run = %v, want %v (%+v)", v.Run, tc.run, v)
			}
			if tc.wait == "" && !v.WaitUntil.IsZero() || tc.wait != "" && !v.WaitUntil.Equal(testutil.Time(t, tc.wait)) {
				t.Fatalf("WaitUntil = %s, want %q", v.WaitUntil, tc.wait)
			}
			if !strings.Contains(v.Reason, tc.why) {
				t.Fatalf("Reason %q, want one containing %q", v.Reason, tc.why)
			}
		})
	}
	if v := (*Calendar)(nil).Admit(testutil.Time(t, "2026-11-24T05:00:00Z"), testutil.Time(t, "2026-11-24T05:00:00Z"), false, nil); !v.Run {
		t.Fatal("a nil calendar must admit every run")
	}
}

func TestNextRun(t *testing.T) {
	hour, day := time.Hour, 24*time.Hour
	window := []WindowSpec{{Days: []string{"Sat", "Sun"}, Start: "02:00", End: "04:00"}}
	cases := map[string]struct {
		schedule  string
		tz        string
		windows   []WindowSpec
		blackouts []string
		deferRun  bool
		deadline  *time.Duration
		earliest  string
		now       string
		slot      string // "" = none
		start     string
	}{
		"no calendar":                       {"0 3 * * *", "UTC", nil, nil, false, nil, "2026-11-24T00:00:00Z", "2026-11-24T00:00:00Z", "2026-11-24T03:00:00Z", "2026-11-24T03:00:00Z"},
		"skip to a slot in the window":      {"0 3 * * *", "UTC", window, nil, false, nil, "2026-11-24T00:00:00Z", "2026-11-24T00:00:00Z", "2026-11-28T03:00:00Z", "2026-11-28T03:00:00Z"},
		"skip over a blackout":              {"0 3 * * *", "UTC", window, []string{"2026-11-28/2026-11-29"}, false, nil, "2026-11-24T00:00:00Z", "2026-11-24T00:00:00Z", "2026-12-05T03:00:00Z", "2026-12-05T03:00:00Z"},
		"skip, every 5m":                    {"*/5 * * * *", "UTC", window, nil, false, nil, "2026-11-24T00:00:00Z", "2026-11-24T00:00:00Z", "2026-11-28T02:00:00Z", "2026-11-28T02:00:00Z"},
		"skip, no slot ever in it":          {"0 5 * * *", "UTC", window, nil, false, nil, "2026-11-24T00:00:00Z", "2026-11-24T00:00:00Z", "", ""},
		"defer to the opening":              {"0 5 * * 5", "UTC", window, nil, true, nil, "2026-11-24T00:00:00Z", "2026-11-24T00:00:00Z", "2026-11-27T05:00:00Z", "2026-11-28T02:00:00Z"},
		"defer, superseded by a later slot": {"0 5 * * *", "UTC", window, nil, true, nil, "2026-11-24T00:00:00Z", "2026-11-24T00:00:00Z", "2026-11-27T05:00:00Z", "2026-11-28T02:00:00Z"},
		"defer within the deadline":         {"0 5 * * *", "UTC", window, nil, true, &day, "2026-11-24T00:00:00Z", "2026-11-24T00:00:00Z", "2026-11-27T05:00:00Z", "2026-11-28T02:00:00Z"},
		"defer beyond the deadline":         {"0 5 * * *", "UTC", window, nil, true, &hour, "2026-11-24T00:00:00Z", "2026-11-24T00:00:00Z", "", ""},
		"defer, hourly, deadline":           {"30 * * * *", "UTC", window, nil, true, &hour, "2026-11-24T00:00:00Z", "2026-11-24T00:00:00Z", "2026-11-28T01:30:00Z", "2026-11-28T02:00:00Z"},
		"a due slot deferred now":           {"0 5 * * *", "UTC", window, nil, true, nil, "2026-11-26T00:00:00Z", "2026-11-26T06:00:00Z", "2026-11-27T05:00:00Z", "2026-11-28T02:00:00Z"},
		"a due slot runs now":               {"0 3 * * *", "UTC", window, nil, false, nil, "2026-11-28T00:00:00Z", "2026-11-28T03:00:01Z", "2026-11-28T03:00:00Z", "2026-11-28T03:00:01Z"},
		"time zone":                         {"0 3 * * *", "Europe/Paris", window, nil, false, nil, "2026-11-24T00:00:00Z", "2026-11-24T00:00:00Z", "2026-11-28T02:00:00Z", "2026-11-28T02:00:00Z"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			now := testutil.Time(t, tc.now)
			s, err := New(tc.schedule, tc.tz, now)
			if err != nil {
				t.Fatal(err)
			}
			c := mustCalendar(t, tc.tz, tc.windows, tc.blackouts...)
			slot, start := s.NextRun(testutil.Time(t, tc.earliest), now, c, tc.deferRun, tc.deadline)
			if tc.slot == "" {
				if !slot.IsZero() || !start.IsZero() {
					t.Fatalf("NextRun = %s at %s, want none", slot, start)
				}
				return
			}
			if !slot.Equal(testutil.Time(t, tc.slot)) || !start.Equal(testutil.Time(t, tc.start)) {
				t.Fatalf("NextRun = slot %s start %s, want slot %s start %s", slot.UTC().Format(time.RFC3339), start.UTC().Format(time.RFC3339), tc.slot, tc.start)
			}
		})
	}
}

func TestCalendarNextClosing(t *testing.T) {
	weeknights := []WindowSpec{{Days: []string{"Mon", "Tue", "Wed", "Thu", "Fri"}, Start: "02:00", End: "04:00"}}
	// "" means the calendar does not close within the walk.
	cases := map[string]struct {
		calendar *Calendar
		from     string
		want     string
	}{
		"no calendar":                        {nil, "2026-11-24T03:00:00Z", ""},
		"the window's end":                   {mustCalendar(t, "UTC", weeknights), "2026-11-24T03:00:00Z", "2026-11-24T04:00:00Z"},
		"the end in the calendar's zone":     {mustCalendar(t, "Europe/Paris", weeknights), "2026-11-24T02:00:00Z", "2026-11-24T03:00:00Z"},
		"windows that meet do not close":     {mustCalendar(t, "UTC", []WindowSpec{{Start: "22:00", End: "24:00"}, {Start: "00:00", End: "01:00"}}), "2026-11-24T23:00:00Z", "2026-11-25T01:00:00Z"},
		"crossing midnight":                  {mustCalendar(t, "UTC", []WindowSpec{{Days: []string{"Fri"}, Start: "22:00", End: "02:00"}}), "2026-11-27T23:00:00Z", "2026-11-28T02:00:00Z"},
		"a blackout closes at midnight":      {mustCalendar(t, "UTC", nil, "2026-11-26"), "2026-11-24T12:00:00Z", "2026-11-26T00:00:00Z"},
		"a blackout before the window's end": {mustCalendar(t, "UTC", []WindowSpec{{Start: "20:00", End: "02:00"}}, "2026-11-25"), "2026-11-24T21:00:00Z", "2026-11-25T00:00:00Z"},
		"every day, all day":                 {mustCalendar(t, "UTC", []WindowSpec{{Start: "00:00", End: "24:00"}}), "2026-11-24T12:00:00Z", ""},
		"a blackout past the walk":           {mustCalendar(t, "UTC", nil, "2026-12-24"), "2026-11-24T12:00:00Z", ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := tc.calendar.NextClosing(testutil.Time(t, tc.from))
			if tc.want == "" {
				if ok {
					t.Fatalf("NextClosing(%s) = %s, want none", tc.from, got.UTC().Format(time.RFC3339))
				}
				return
			}
			if want := testutil.Time(t, tc.want); !ok || !got.Equal(want) {
				t.Fatalf("NextClosing(%s) = %s, %v, want %s", tc.from, got.UTC().Format(time.RFC3339), ok, tc.want)
			}
		})
	}
}
