package cleanup

import (
	"context"
	"time"
)

// BacklogAlerter is told when a queue's backlog has stayed over the threshold.
type BacklogAlerter interface {
	BacklogHigh(ctx context.Context, queue string, waiting, threshold int, since time.Time)
}

// backlog raises one alert per episode of a queue's backlog staying over the threshold.
func (c *Cleaner) backlog(ctx context.Context) (int, error) {
	if c.cfg.BacklogThreshold <= 0 {
		return 0, nil
	}
	counts, err := c.store.WaitingByQueue(ctx)
	if err != nil {
		return 0, err
	}
	fired := 0
	over := map[string]bool{}
	for q, n := range counts {
		if n <= c.cfg.BacklogThreshold {
			continue
		}
		over[q] = true
		since, fire, err := c.store.ConditionHolds(ctx, "backlog:"+q, c.cfg.BacklogFor)
		if err != nil {
			return fired, err
		}
		if fire && c.alerter != nil {
			c.alerter.BacklogHigh(ctx, q, n, c.cfg.BacklogThreshold, since)
			fired++
		}
	}
	for _, q := range c.queues(counts) {
		if !over[q] {
			if err := c.store.ConditionCleared(ctx, "backlog:"+q); err != nil {
				return fired, err
			}
		}
	}
	return fired, nil
}

// queues lists the queues to re-arm: every queue that has or had waiting tasks.
func (c *Cleaner) queues(counts map[string]int) []string {
	out := make([]string, 0, len(counts)+len(c.cfg.Queues))
	seen := map[string]bool{}
	for _, q := range c.cfg.Queues {
		seen[q] = true
		out = append(out, q)
	}
	for q := range counts {
		if !seen[q] {
			out = append(out, q)
		}
	}
	return out
}
