package schedule

import (
	"strconv"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/jobs/cleanup"
)

// CheckInterval refuses a spec (already valid: Validate) that fires more often than min, with
// a *SpecError that names the minimum.
func CheckInterval(spec, timezone string, min time.Duration) error {
	sched, err := cleanup.ParseSpec(Spec(spec, timezone))
	if err != nil {
		return err
	}
	if gap := shortestGap(sched, min); gap < min {
		return &SpecError{Field: "cron", Message: msg.New("field_error.cron_too_often",
			"value", strconv.Quote(spec), "gap", gap.String(), "min", min.String(), "setting", "schedules.min_interval")}
	}
	return nil
}

// shortestGap is the shortest time between two fires of sched over the coming year, or the
// first gap found under min (enough to refuse it).
func shortestGap(sched cron.Schedule, min time.Duration) time.Duration {
	if every, ok := sched.(cron.ConstantDelaySchedule); ok {
		return every.Delay
	}
	start := time.Now()
	shortest := time.Duration(1<<63 - 1)
	prev := sched.Next(start)
	for i := 0; i < 50_000 && !prev.IsZero() && prev.Sub(start) < 366*24*time.Hour; i++ {
		next := sched.Next(prev)
		if next.IsZero() {
			break
		}
		if gap := next.Sub(prev); gap < shortest {
			shortest = gap
			if shortest < min {
				break
			}
		}
		prev = next
	}
	return shortest
}
