package cleanup

import "context"

// staleRuns times out RUNNING tasks whose worker stopped reporting, and deletes their
// partial files.
func (c *Cleaner) staleRuns(ctx context.Context) (int, error) {
	tasks, err := c.store.TimeoutStale(ctx, c.cfg.BatchSize)
	if err != nil {
		return 0, err
	}
	for _, t := range tasks {
		c.logger.Warn("task timed out: no heartbeat", "task_no", t.TaskNo, "type", t.Type, "attempt", t.Attempt)
		// The partial files on this node; other nodes drop theirs in their own scratch sweep
		// (SweepScratch) once the task is no longer running.
		if _, err := c.files.RemoveAttemptTemp(t.TaskNo, 0); err != nil {
			c.logger.Warn("could not remove partial files", "task_no", t.TaskNo, "err", err)
		}
		if c.board != nil {
			c.board.Changed(ctx, t.TaskNo, t.Owner) //nolint:errcheck // live streams also poll
		}
	}
	return len(tasks), nil
}
