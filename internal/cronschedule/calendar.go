package cronschedule

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Calendar says when a restart may start: inside one of its weekly
// maintenance windows (any time when it has none) and never on one of its
// blackout dates, both read in the calendar's time zone. Like Schedule it
// has no clock: every method takes the time it judges.
type Calendar struct {
	loc       *time.Location
	windows   []window
	blackouts []dateRange
}

// window opens on the days set in days at start and closes at end, both in
// minutes after midnight. end < start crosses midnight: the window closes on
// the next day, and belongs to the day it opens on.
type window struct {
	days       [7]bool // indexed by time.Weekday
	start, end int
	text       string
}

// dateRange is an inclusive range of civil dates, as days since 1970-01-01.
type dateRange struct {
	from, to int64
	text     string
}

// NewCalendar builds the calendar of windows and blackout dates in the time
// zone tz. A nil calendar (no windows, no blackout dates) allows every time;
// all its methods accept a nil receiver.
func NewCalendar(tz string, windows []WindowSpec, blackouts []string) (*Calendar, error) {
	if len(windows) == 0 && len(blackouts) == 0 {
		return nil, nil
	}
	loc, err := LoadLocation(tz)
	if err != nil {
		return nil, err
	}
	c := &Calendar{loc: loc}
	for i, w := range windows {
		pw, ferr := parseWindow(w)
		if ferr != nil {
			return nil, fmt.Errorf("windows[%d].%s: %s", i, ferr.Field, ferr.Message)
		}
		c.windows = append(c.windows, pw)
	}
	for i, b := range blackouts {
		from, to, err := ParseDateRange(b)
		if err != nil {
			return nil, fmt.Errorf("blackoutDates[%d]: %w", i, err)
		}
		c.blackouts = append(c.blackouts, dateRange{from: dayNumber(from), to: dayNumber(to), text: b})
	}
	return c, nil
}

// dayNumber is the civil date of t (read in t's own location) as days since
// 1970-01-01.
func dayNumber(t time.Time) int64 {
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC).Unix() / 86400
}

// blackout returns the blackout range t's date (in the calendar's zone)
// falls in, if any; of overlapping ranges, the one that ends last.
func (c *Calendar) blackout(t time.Time) (dateRange, bool) {
	day := dayNumber(t.In(c.loc))
	var found dateRange
	ok := false
	for _, b := range c.blackouts {
		if day >= b.from && day <= b.to && (!ok || b.to > found.to) {
			found, ok = b, true
		}
	}
	return found, ok
}

// inWindow reports whether t (in the calendar's zone) is inside a window.
func (c *Calendar) inWindow(t time.Time) bool {
	if len(c.windows) == 0 {
		return true
	}
	lt := t.In(c.loc)
	m := lt.Hour()*60 + lt.Minute()
	today, yesterday := lt.Weekday(), (lt.Weekday()+6)%7
	for _, w := range c.windows {
		if w.end > w.start {
			if w.days[today] && m >= w.start && m < w.end {
				return true
			}
			continue
		}
		// Crosses midnight: the evening part opens today, the morning part
		// belongs to the window that opened yesterday.
		if (w.days[today] && m >= w.start) || (w.days[yesterday] && m < w.end) {
			return true
		}
	}
	return false
}

// Allowed reports whether a restart may start at t.
func (c *Calendar) Allowed(t time.Time) bool {
	if c == nil {
		return true
	}
	if _, ok := c.blackout(t); ok {
		return false
	}
	return c.inWindow(t)
}

// Blocked says why a restart may not start at t, or "" when it may.
func (c *Calendar) Blocked(t time.Time) string {
	if c == nil {
		return ""
	}
	lt := t.In(c.loc)
	if b, ok := c.blackout(t); ok {
		return fmt.Sprintf("%s is a blackout date (blackoutDates %q)", lt.Format(time.DateOnly), b.text)
	}
	if !c.inWindow(t) {
		return fmt.Sprintf("%s %s is outside every maintenance window (%s)", lt.Format("Mon"), lt.Format("15:04 MST"), c.windowsText())
	}
	return ""
}

func (c *Calendar) windowsText() string {
	parts := make([]string, 0, len(c.windows))
	for _, w := range c.windows {
		parts = append(parts, w.text)
	}
	return strings.Join(parts, "; ")
}

// maxSteps bounds the walks below. Each step jumps a whole blocked stretch
// (a blackout range, the time to the next window opening), so it is reached
// only by calendars that allow nothing for years.
const maxSteps = 1000

// ErrNoOpening is returned when no allowed time is found within maxSteps
// steps.
var ErrNoOpening = errors.New("no maintenance window opens outside the blackout dates within the next thousand windows")

// NextAllowed returns the earliest instant at or after t at which a restart
// may start.
func (c *Calendar) NextAllowed(t time.Time) (time.Time, error) {
	if c == nil {
		return t, nil
	}
	cur := t
	for range maxSteps {
		if b, ok := c.blackout(cur); ok {
			// Midnight after the range's last day.
			y, m, d := time.Unix((b.to+1)*86400, 0).UTC().Date()
			next := time.Date(y, m, d, 0, 0, 0, 0, c.loc)
			if !next.After(cur) {
				return time.Time{}, ErrNoOpening
			}
			cur = next
			continue
		}
		if c.inWindow(cur) {
			return cur, nil
		}
		cur = c.nextOpening(cur)
		if cur.IsZero() {
			return time.Time{}, ErrNoOpening
		}
	}
	return time.Time{}, ErrNoOpening
}

// NextClosing returns the first instant after t at which restarts may
// no longer start, with ok false when restarts may start through the next
// eight days (a calendar of blackout dates alone, windows that cover
// every day, or none). Only a window's end or a midnight (where a
// blackout date begins) can close the calendar, so only those instants
// are judged.
func (c *Calendar) NextClosing(t time.Time) (closing time.Time, ok bool) {
	if c == nil {
		return time.Time{}, false
	}
	lt := t.In(c.loc)
	for d := range 9 {
		day := time.Date(lt.Year(), lt.Month(), lt.Day()+d, 0, 0, 0, 0, c.loc)
		var edges []time.Time
		if day.After(t) {
			edges = append(edges, day)
		}
		for _, w := range c.windows {
			// time.Date carries an end of 24:00 to the next midnight.
			if end := time.Date(day.Year(), day.Month(), day.Day(), w.end/60, w.end%60, 0, 0, c.loc); end.After(t) {
				edges = append(edges, end)
			}
		}
		slices.SortFunc(edges, time.Time.Compare)
		for _, e := range edges {
			if !c.Allowed(e) {
				return e, true
			}
		}
	}
	return time.Time{}, false
}

// nextOpening returns the first window opening strictly after t.
func (c *Calendar) nextOpening(t time.Time) time.Time {
	lt := t.In(c.loc)
	var best time.Time
	for d := range 9 {
		day := time.Date(lt.Year(), lt.Month(), lt.Day()+d, 0, 0, 0, 0, c.loc)
		for _, w := range c.windows {
			if !w.days[day.Weekday()] {
				continue
			}
			// time.Date moves a wall-clock time that does not exist
			// (clocks going forward) to the same offset after the gap.
			open := time.Date(day.Year(), day.Month(), day.Day(), w.start/60, w.start%60, 0, 0, c.loc)
			if open.After(t) && (best.IsZero() || open.Before(best)) {
				best = open
			}
		}
		if !best.IsZero() {
			return best
		}
	}
	return best
}

// Verdict is what to do with a run that is due.
type Verdict struct {
	// Run: start it now.
	Run bool
	// WaitUntil, when set, is when to look again (deferred to a window).
	WaitUntil time.Time
	// Reason says why it does not run now (skipped or deferred).
	Reason string
}

// Admit judges a run of time slot (a scheduled time, or a run-now
// request's time) that is due at now. Without deferToWindow (policy Skip)
// it runs only if both its own time and now are allowed. With deferToWindow
// (policy Defer) it runs now if now is allowed; otherwise it waits for the
// next allowed time, unless that is more than deadline after slot.
func (c *Calendar) Admit(slot, now time.Time, deferToWindow bool, deadline *time.Duration) Verdict {
	if c == nil {
		return Verdict{Run: true}
	}
	blockedNow := c.Blocked(now)
	if !deferToWindow {
		if why := c.Blocked(slot); why != "" {
			return Verdict{Reason: why}
		}
		if blockedNow != "" {
			return Verdict{Reason: blockedNow}
		}
		return Verdict{Run: true}
	}
	if blockedNow == "" {
		return Verdict{Run: true}
	}
	next, err := c.NextAllowed(now)
	if err != nil {
		return Verdict{Reason: blockedNow + "; " + err.Error()}
	}
	if deadline != nil && next.Sub(slot) > *deadline {
		return Verdict{Reason: fmt.Sprintf("%s; restarts may start again at %s, more than startingDeadlineSeconds (%s) after %s",
			blockedNow, next.UTC().Format(time.RFC3339), *deadline, slot.UTC().Format(time.RFC3339))}
	}
	return Verdict{WaitUntil: next, Reason: fmt.Sprintf("%s; deferred to %s", blockedNow, next.UTC().Format(time.RFC3339))}
}

// NextRun walks the slots after earliest (every slot at or before it has
// been handled) and returns the first run that will really start at or after
// now under cal: slot is its scheduled time and start when it starts (later
// than slot only when deferToWindow waits for a window, or when the slot is
// already due). Slots are judged as PlanAt and Calendar.Admit judge them:
// only the latest due slot runs, a slot more than deadline late does not.
// Both are zero when no run starts within maxSteps steps.
func (s *Schedule) NextRun(earliest, now time.Time, cal *Calendar, deferToWindow bool, deadline *time.Duration) (slot, start time.Time) {
	cand := s.Next(earliest)
	if !cand.IsZero() && !cand.After(now) {
		cand = s.latestAtOrBefore(cand, now)
	}
	for range maxSteps {
		if cand.IsZero() {
			return time.Time{}, time.Time{}
		}
		at := cand
		if at.Before(now) {
			at = now
		}
		if deadline != nil && at.Sub(cand) > *deadline {
			// Too late to start (Missed): the next slot is the candidate.
			cand = s.Next(at)
			continue
		}
		if cal == nil {
			return cand, at
		}
		if !deferToWindow {
			if cal.Allowed(cand) && cal.Allowed(at) {
				return cand, at
			}
			// The next slot that can be allowed is the first at or after
			// the next allowed instant.
			open, err := cal.NextAllowed(at)
			if err != nil {
				return time.Time{}, time.Time{}
			}
			if open.Equal(at) {
				// at is allowed but cand was not (a late slot): move on.
				cand = s.Next(at)
			} else {
				cand = s.Next(open.Add(-time.Nanosecond))
			}
			continue
		}
		open, err := cal.NextAllowed(at)
		if err != nil {
			return time.Time{}, time.Time{}
		}
		// Slots due by the opening supersede this one: the latest runs.
		latest := s.latestAtOrBefore(cand, open)
		if deadline == nil || open.Sub(latest) <= *deadline {
			return latest, open
		}
		cand = s.Next(open)
	}
	return time.Time{}, time.Time{}
}
