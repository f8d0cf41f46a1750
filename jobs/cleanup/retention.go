package cleanup

import "context"

// retention archives terminal tasks past retention with their runs, logs and failed rows, and
// deletes their files.
func (c *Cleaner) retention(ctx context.Context) (int, error) {
	tasks, err := c.store.PastRetention(ctx, c.cfg.Retention, c.cfg.BatchSize)
	if err != nil || len(tasks) == 0 {
		return 0, err
	}
	ids := make([]int64, 0, len(tasks))
	for i := range tasks {
		if err := c.removeResultFiles(ctx, &tasks[i]); err != nil {
			c.logger.Warn("could not delete the files of a task past retention", "task_no", tasks[i].TaskNo, "err", err)
			continue
		}
		ids = append(ids, tasks[i].ID)
	}
	return c.store.ArchiveTasks(ctx, ids)
}
