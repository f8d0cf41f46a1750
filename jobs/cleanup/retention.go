package cleanup

import "context"

// retention archives terminal tasks past retention with their runs, logs and failed rows, and
// deletes their files.
func (c *Cleaner) retention(ctx context.Context) (int, error) {
	tasks, err := c.store.PastRetention(ctx, c.cfg.Retention, c.cfg.BatchSize)
	if err != nil || len(tasks) == 0 {
		return 0, err
	}
	ids := c.removeFilesOf(ctx, tasks, "could not delete the files of a task past retention")
	return c.store.ArchiveTasks(ctx, ids)
}
