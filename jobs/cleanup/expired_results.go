package cleanup

import "context"

// expiredResults deletes result files past their expiry and keeps the task rows.
func (c *Cleaner) expiredResults(ctx context.Context) (int, error) {
	tasks, err := c.store.ExpiredResults(ctx, c.cfg.BatchSize)
	if err != nil || len(tasks) == 0 {
		return 0, err
	}
	ids := make([]int64, 0, len(tasks))
	for i := range tasks {
		if err := c.removeResultFiles(ctx, &tasks[i]); err != nil {
			c.logger.Warn("could not delete an expired result file", "task_no", tasks[i].TaskNo, "err", err)
			continue
		}
		ids = append(ids, tasks[i].ID)
	}
	return len(ids), c.store.ForgetResultFiles(ctx, ids)
}
