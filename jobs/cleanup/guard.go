package cleanup

import (
	"context"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
	"github.com/robfig/cron/v3"
)

// ProcessTask implements asynq.Handler: it claims the current slot and runs the round, or does
// nothing when another replica's job already ran this slot.
func (c *Cleaner) ProcessTask(ctx context.Context, _ *asynq.Task) error {
	slot := Slot(c.cfg.Schedule, time.Now().In(c.cfg.Location))
	won, err := c.store.ClaimCleanupSlot(ctx, slot, c.worker)
	if err != nil {
		return err
	}
	if !won {
		c.logger.Debug("cleanup slot already taken by another replica", "slot", slot)
		return nil
	}
	c.logger.Info("cleanup round started", "slot", slot)
	rep := c.Round(ctx)
	if err := c.store.FinishCleanupRound(context.WithoutCancel(ctx), slot, rep); err != nil {
		c.logger.Warn("could not record cleanup round", "err", err)
	}
	return nil
}

// Slot is the scheduled activation a round belongs to: the latest activation of schedule at
// or before now. Replicas that run the same slot agree on it, which is what the guard keys on.
func Slot(schedule cron.Schedule, now time.Time) time.Time {
	if every, ok := schedule.(cron.ConstantDelaySchedule); ok {
		return now.Truncate(every.Delay)
	}
	// Search back for the window holding the previous activation, doubling it each time.
	for window := time.Minute; window <= 400*24*time.Hour; window *= 2 {
		var last time.Time
		for t := schedule.Next(now.Add(-window)); !t.After(now) && !t.IsZero(); t = schedule.Next(t) {
			last = t
		}
		if !last.IsZero() {
			return last
		}
	}
	return now.Truncate(time.Minute)
}

// ParseSpec parses a cron spec ("* * * * *", "@every 30s", "@hourly") as asynq's scheduler does.
func ParseSpec(spec string) (cron.Schedule, error) {
	s, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, fmt.Errorf("cleanup spec %q: %w", spec, err)
	}
	return s, nil
}
