package cleanup

import "context"

// expiredResults deletes result files past their expiry and keeps the task rows.
func (c *Cleaner) expiredResults(ctx context.Context) (int, error) {
	tasks, err := c.store.ExpiredResults(ctx, c.cfg.BatchSize)
	if err != nil || len(tasks) == 0 {
		return 0, err
	}
	ids := c.removeFilesOf(ctx, tasks, "could not delete an expired result file")
	return len(ids), c.store.ForgetResultFiles(ctx, ids)
}
