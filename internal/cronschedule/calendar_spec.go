package cronschedule

// The API's spelling of maintenance windows and blackout dates, parsed and
// checked here for the webhook (which names the field at fault) and for
// NewCalendar alike, so that what admission accepts is what the calendar
// runs.

import (
	"fmt"
	"strings"
	"time"
)

// WindowSpec is one maintenance window as the API spells it.
type WindowSpec struct {
	// Days are "Mon" ... "Sun"; empty means every day.
	Days []string
	// Start and End are "HH:MM"; End may be "24:00".
	Start, End string
}

var weekdays = map[string]time.Weekday{
	"Sun": time.Sunday, "Mon": time.Monday, "Tue": time.Tuesday, "Wed": time.Wednesday,
	"Thu": time.Thursday, "Fri": time.Friday, "Sat": time.Saturday,
}

// ParseWeekday parses "Mon" ... "Sun".
func ParseWeekday(s string) (time.Weekday, error) {
	d, ok := weekdays[s]
	if !ok {
		return 0, fmt.Errorf("unknown day %q: use Mon, Tue, Wed, Thu, Fri, Sat or Sun", s)
	}
	return d, nil
}

// ParseClock parses "HH:MM" (24-hour clock) into minutes after midnight;
// "24:00" (1440) is accepted only when allowEndOfDay is set.
func ParseClock(s string, allowEndOfDay bool) (int, error) {
	if allowEndOfDay && s == "24:00" {
		return 24 * 60, nil
	}
	t, err := time.Parse("15:04", s)
	if err != nil || len(s) != 5 {
		want := `"HH:MM" from 00:00 to 23:59`
		if allowEndOfDay {
			want = `"HH:MM" from 00:00 to 24:00`
		}
		return 0, fmt.Errorf("invalid time %q: want %s", s, want)
	}
	return t.Hour()*60 + t.Minute(), nil
}

// CheckWindow checks one window and returns its fault, if any, naming the
// part at fault for the caller to prefix with the field path.
func CheckWindow(w WindowSpec) *WindowFieldError {
	_, ferr := parseWindow(w)
	return ferr
}

// WindowFieldError is a window's fault: Field is "days[i]", "start" or
// "end", Value the offending value.
type WindowFieldError struct {
	Field, Value, Message string
}

func parseWindow(w WindowSpec) (window, *WindowFieldError) {
	out := window{text: fmt.Sprintf("%s-%s", w.Start, w.End)}
	for i, d := range w.Days {
		wd, err := ParseWeekday(d)
		if err != nil {
			return out, &WindowFieldError{Field: fmt.Sprintf("days[%d]", i), Value: d, Message: err.Error()}
		}
		out.days[wd] = true
	}
	if len(w.Days) == 0 {
		for i := range out.days {
			out.days[i] = true
		}
	} else {
		out.text = strings.Join(w.Days, ",") + " " + out.text
	}
	var err error
	if out.start, err = ParseClock(w.Start, false); err != nil {
		return out, &WindowFieldError{Field: "start", Value: w.Start, Message: err.Error()}
	}
	if out.end, err = ParseClock(w.End, true); err != nil {
		return out, &WindowFieldError{Field: "end", Value: w.End, Message: err.Error()}
	}
	if out.start == out.end {
		return out, &WindowFieldError{Field: "end", Value: w.End, Message: "must differ from start (an end before the start crosses midnight)"}
	}
	return out, nil
}

// ParseDateRange parses a blackout date, "YYYY-MM-DD", or an inclusive range
// "YYYY-MM-DD/YYYY-MM-DD".
func ParseDateRange(s string) (from, to time.Time, err error) {
	a, b, isRange := strings.Cut(s, "/")
	if from, err = time.Parse(time.DateOnly, a); err != nil {
		return from, to, fmt.Errorf("invalid date %q: want YYYY-MM-DD or YYYY-MM-DD/YYYY-MM-DD", s)
	}
	to = from
	if isRange {
		if to, err = time.Parse(time.DateOnly, b); err != nil {
			return from, to, fmt.Errorf("invalid date range %q: want YYYY-MM-DD/YYYY-MM-DD", s)
		}
		if to.Before(from) {
			return from, to, fmt.Errorf("date range %q ends before it starts", s)
		}
	}
	return from, to, nil
}
