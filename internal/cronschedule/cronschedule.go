// Package cronschedule turns a cron schedule and an IANA time zone into
// schedule slots, and decides which slot is due at a given time by the rules
// of the Kubernetes CronJob controller. It is pure: every function takes the
// current time as an argument, so callers inject their clock.
package cronschedule

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	// Time zones must resolve even in images without /usr/share/zoneinfo
	// (distroless): embed the zone database.
	_ "time/tzdata"
)

// MaxMissed is how many missed slots are counted before a schedule is
// reported as having missed too many (the CronJob controller's limit).
const MaxMissed = 100

// parser accepts the standard 5 fields and the @hourly/@daily/.../@every
// descriptors, like the CronJob controller.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ErrNeverFires is returned for a schedule that parses but has no slot
// (such as "0 0 31 2 *").
var ErrNeverFires = errors.New("schedule never fires")

// DefaultMinInterval is the shortest time allowed between two runs of a
// schedule unless the manager is told otherwise: each run patches every
// workload it selects and writes the schedule's status, so a tenant's
// "@every 1s" would cost the API server a write per workload each second.
// A 5-field expression never fires more often; only "@every" can.
const DefaultMinInterval = time.Minute

// ShortestInterval is a lower bound, exact for "@every", on the time
// between two consecutive firings of a schedule ParseSchedule returned.
// "@every d" fires every d (the cron library drops sub-seconds). The
// parser has no seconds field, so a 5-field expression or another
// descriptor fires on whole minutes: two firings are at least a minute
// apart in real time, in every zone (offsets are whole minutes, and a
// wall-clock jump only moves which minutes fire).
func ShortestInterval(s cron.Schedule) time.Duration {
	if every, ok := s.(cron.ConstantDelaySchedule); ok {
		return every.Delay
	}
	return time.Minute
}

// CheckInterval returns an error when s may fire more often than once per
// min, saying how often it fires.
func CheckInterval(s cron.Schedule, min time.Duration) error {
	if gap := ShortestInterval(s); gap < min {
		return fmt.Errorf("fires every %s: the shortest interval allowed between two runs is %s", gap, min)
	}
	return nil
}

// Schedule is a parsed cron schedule evaluated in a time zone.
type Schedule struct {
	cron cron.Schedule
	loc  *time.Location
}

// ParseSchedule parses a cron expression. The error is the parser's message.
// Time zone prefixes (CRON_TZ=, TZ=) are refused: the time zone is a separate
// field. A schedule that never fires returns ErrNeverFires; now is the time
// the check starts from.
func ParseSchedule(spec string, now time.Time) (cron.Schedule, error) {
	s := strings.TrimSpace(spec)
	if strings.HasPrefix(s, "CRON_TZ=") || strings.HasPrefix(s, "TZ=") {
		return nil, errors.New("a time zone in the schedule is not supported, set timeZone instead")
	}
	sched, err := parser.Parse(s)
	if err != nil {
		return nil, err
	}
	if rest, ok := strings.CutPrefix(s, "@every "); ok {
		// The cron library rounds non-positive durations up to one second;
		// refuse them instead of guessing.
		if d, err := time.ParseDuration(strings.TrimSpace(rest)); err == nil && d < time.Second {
			return nil, fmt.Errorf("@every needs a duration of at least 1s, got %q", rest)
		}
	}
	// Evaluate the "never fires" check in UTC; a slot that exists in one zone
	// exists in every zone (zones only shift wall clocks).
	if sched.Next(now.UTC()).IsZero() {
		return nil, ErrNeverFires
	}
	return sched, nil
}

// LoadLocation resolves an IANA time zone name; empty means UTC. "Local" is
// refused because it would depend on the manager's host.
func LoadLocation(name string) (*time.Location, error) {
	switch name {
	case "", "UTC":
		return time.UTC, nil
	case "Local":
		return nil, fmt.Errorf("unknown time zone %q: use an IANA name such as \"Europe/Paris\"", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q", name)
	}
	return loc, nil
}

// New parses spec in the time zone tz.
func New(spec, tz string, now time.Time) (*Schedule, error) {
	loc, err := LoadLocation(tz)
	if err != nil {
		return nil, err
	}
	c, err := ParseSchedule(spec, now)
	if err != nil {
		return nil, err
	}
	return &Schedule{cron: c, loc: loc}, nil
}

// Next returns the first slot strictly after t, or the zero time if there
// is none within five years.
//
// Daylight saving time: a wall-clock time that does not exist (the hour
// skipped when clocks go forward) has no slot that day, as with the CronJob
// controller. A wall-clock time that happens twice (when clocks go back)
// fires once, at its first occurrence, unless the schedule runs every hour
// (then both hours run, as they are distinct hours).
func (s *Schedule) Next(t time.Time) time.Time {
	n := s.cron.Next(t.In(s.loc))
	for i := 0; i < 2 && !n.IsZero() && s.repeatedWallClock(n); i++ {
		n = s.cron.Next(n)
	}
	if n.IsZero() {
		return n
	}
	return n.UTC()
}

// repeatedWallClock reports whether n is the second occurrence of its wall
// clock time (clocks went back) and the schedule has a fixed hour.
func (s *Schedule) repeatedWallClock(n time.Time) bool {
	spec, ok := s.cron.(*cron.SpecSchedule)
	if !ok {
		return false
	}
	const everyHour = 1<<24 - 1
	if spec.Hour&everyHour == everyHour {
		return false
	}
	n = n.In(s.loc)
	_, offNow := n.Zone()
	_, offBefore := n.Add(-3 * time.Hour).Zone()
	if offBefore <= offNow {
		return false
	}
	earlier := n.Add(-time.Duration(offBefore-offNow) * time.Second)
	return earlier.Format(time.DateTime) == n.Format(time.DateTime)
}

// Plan is what is due at a point in time.
type Plan struct {
	// Slot is the latest slot in (earliest, now]; zero when nothing is due.
	// Older unhandled slots are never run (CronJob rule: only the most
	// recent missed slot runs).
	Slot time.Time
	// Missed is set when Slot is more than the starting deadline old: it
	// must be recorded as missed instead of run.
	Missed bool
	// Count is how many slots fell in (earliest, now] (up to MaxMissed+1).
	Count int
	// TooMany is set when more than MaxMissed slots fell in (earliest, now].
	TooMany bool
	// Next is the first slot strictly after now (zero if none).
	Next time.Time
}

// PlanAt decides what is due at now, given that every slot at or before
// earliest has been handled. startingDeadline, if set, is how late a slot
// may still start.
func (s *Schedule) PlanAt(earliest, now time.Time, startingDeadline *time.Duration) Plan {
	p := Plan{Next: s.Next(now)}
	first := s.Next(earliest)
	if first.IsZero() || first.After(now) {
		return p
	}
	last, count := first, 1
	for {
		n := s.Next(last)
		if n.IsZero() || n.After(now) {
			break
		}
		last, count = n, count+1
		if count > MaxMissed {
			p.TooMany = true
			last = s.latestAtOrBefore(last, now)
			break
		}
	}
	p.Slot, p.Count = last, count
	if startingDeadline != nil && now.Sub(last) > *startingDeadline {
		p.Missed = true
	}
	return p
}

// latestAtOrBefore returns the latest slot at or before now, given a slot
// from at or before now, without walking every slot in between.
func (s *Schedule) latestAtOrBefore(from, now time.Time) time.Time {
	if every, ok := s.cron.(cron.ConstantDelaySchedule); ok {
		// @every slots are from + k*delay.
		k := now.Sub(from) / every.Delay
		return from.Add(k * every.Delay)
	}
	// Look back over a window that doubles until it holds a slot, then
	// walk forward inside it.
	w := 2 * s.Next(from).Sub(from)
	if w < time.Minute {
		w = time.Minute
	}
	for {
		start := now.Add(-w)
		if !start.After(from) {
			start = from
		}
		if t := s.Next(start); !t.IsZero() && !t.After(now) {
			last := t
			for n := s.Next(last); !n.IsZero() && !n.After(now); n = s.Next(n) {
				last = n
			}
			return last
		}
		if start.Equal(from) {
			return from
		}
		w *= 2
	}
}
