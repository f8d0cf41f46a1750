package cleanup

import "context"

// takeovers hands RUNNING tasks whose worker went silent to asynq again, into the resume
// lane. It runs right after the stale runs, so a backlog of waiting tasks never delays a
// takeover.
func (c *Cleaner) takeovers(ctx context.Context) (int, error) {
	tasks, err := c.store.TakeSilent(ctx, c.cfg.OrphanGrace, c.cfg.TakeoverAfter, c.cfg.BatchSize)
	if err != nil {
		return 0, err
	}
	return c.handOver(ctx, tasks)
}
