package dx

import (
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// cronParser reads five fields (minute first) or six (seconds first), and descriptors such as
// @daily.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// fireSpec computes the fire times of a ScheduleSpec. A cron expression is evaluated on the local
// wall clock of its time zone and each wall time is then mapped to an instant: a wall time that
// a spring-forward change skips maps to the instant of the jump (several skipped times become one
// firing there), and a wall time an autumn change repeats maps to its first occurrence only.
type fireSpec struct {
	cron          cron.Schedule // evaluated on wall times written in UTC
	loc           *time.Location
	every, offset time.Duration
	jitter        time.Duration
	start, end    time.Time
	seed          string
}

// maxSpecSteps bounds the wall times looked at for one next fire time.
const maxSpecSteps = 100000

func compileSpec(s ScheduleSpec, seed string) (*fireSpec, error) {
	f := &fireSpec{every: s.Every, offset: s.Offset, jitter: s.Jitter, start: s.Start, end: s.End, seed: seed, loc: time.UTC}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("dx: schedule spec: "+format+" (%w)", append(args, ErrInvalidInput)...)
	}
	if s.Jitter < 0 {
		return nil, bad("negative jitter %v", s.Jitter)
	}
	if !s.Start.IsZero() && !s.End.IsZero() && s.End.Before(s.Start) {
		return nil, bad("end %v is before start %v", s.End, s.Start)
	}
	if s.TimeZone != "" {
		loc, err := time.LoadLocation(s.TimeZone)
		if err != nil || s.TimeZone == "Local" {
			return nil, bad("unknown time zone %q (an IANA name such as Europe/Berlin)", s.TimeZone)
		}
		f.loc = loc
	}
	switch {
	case s.Cron != "" && s.Every != 0:
		return nil, bad("give a cron expression or an interval, not both")
	case s.Every != 0:
		if s.Every < time.Second {
			return nil, bad("interval %v is under one second", s.Every)
		}
		if s.Offset < 0 || s.Offset >= s.Every {
			return nil, bad("offset %v is outside [0, %v)", s.Offset, s.Every)
		}
	case s.Cron != "":
		expr := strings.TrimSpace(s.Cron)
		if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") || strings.HasPrefix(expr, "@every") {
			return nil, bad("%q: give the time zone in TimeZone and an interval in Every", s.Cron)
		}
		if s.Offset != 0 {
			return nil, bad("an offset applies to an interval, not to a cron expression")
		}
		sched, err := cronParser.Parse(expr)
		if err != nil {
			return nil, bad("cron %q: %v", s.Cron, err)
		}
		spec, ok := sched.(*cron.SpecSchedule)
		if !ok {
			return nil, bad("cron %q is not a calendar expression", s.Cron)
		}
		spec.Location = time.UTC
		f.cron = spec
		if spec.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
			return nil, bad("cron %q never fires", s.Cron)
		}
	default:
		return nil, bad("give a cron expression (Cron) or an interval (Every)")
	}
	return f, nil
}

// next returns the first fire time after t, or false when there is none (past End).
func (f *fireSpec) next(t time.Time) (time.Time, bool) {
	if !f.start.IsZero() && t.Before(f.start) {
		t = f.start.Add(-time.Nanosecond)
	}
	var n time.Time
	if f.every > 0 {
		a := t.UnixNano() - int64(f.offset)
		k := a / int64(f.every)
		if a < 0 && a%int64(f.every) != 0 {
			k--
		}
		n = time.Unix(0, (k+1)*int64(f.every)+int64(f.offset)).UTC()
	} else {
		wall := wallOf(t, f.loc)
		for range maxSpecSteps {
			wall = f.cron.Next(wall)
			if wall.IsZero() {
				return time.Time{}, false
			}
			if n = instantOf(wall, f.loc); n.After(t) {
				break
			}
		}
		if !n.After(t) {
			return time.Time{}, false
		}
	}
	if !f.end.IsZero() && n.After(f.end) {
		return time.Time{}, false
	}
	return n.UTC(), true
}

// at is when the run of fire time t starts: t plus its jitter, a whole number of milliseconds up
// to Jitter drawn from the schedule and the fire time (the same on every host and replay).
func (f *fireSpec) at(t time.Time) time.Time {
	if f.jitter < time.Millisecond {
		return t
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s@%d", f.seed, t.UnixNano())
	return t.Add(time.Duration(h.Sum64() % uint64(f.jitter/time.Millisecond) * uint64(time.Millisecond)))
}

// wallOf is t's wall clock in loc, written as a UTC time.
func wallOf(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
}

// instantOf maps a wall time of loc (written as UTC) to an instant: its first occurrence, or, for
// a wall time that a forward change skips, the instant of the change.
func instantOf(wall time.Time, loc *time.Location) time.Time {
	guess := time.Date(wall.Year(), wall.Month(), wall.Day(), wall.Hour(), wall.Minute(), wall.Second(), wall.Nanosecond(), loc)
	var best time.Time
	for _, probe := range []time.Time{guess.Add(-12 * time.Hour), guess, guess.Add(12 * time.Hour)} {
		_, off := probe.Zone()
		cand := wall.Add(-time.Duration(off) * time.Second)
		if wallOf(cand, loc).Equal(wall) && (best.IsZero() || cand.Before(best)) {
			best = cand
		}
	}
	if best.IsZero() { // skipped by a forward change: the change's instant
		start, end := guess.ZoneBounds()
		if wallOf(guess, loc).After(wall) { // normalized past the change
			return start.UTC()
		}
		return end.UTC()
	}
	return best.UTC()
}
