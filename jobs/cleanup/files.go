package cleanup

import (
	"context"
	"errors"
	"time"

	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/store"
)

// errEnough stops a listing that has found a round's worth.
var errEnough = errors.New("enough for this round")

// sweep deletes up to BatchSize objects under prefix older than ttl, except those keep
// claims. The store is listed first; the database is asked only about actual candidates, so
// a round with nothing old stored costs no query at all.
func (c *Cleaner) sweep(ctx context.Context, prefix string, ttl time.Duration, keep func(context.Context, []string) (map[string]bool, error)) (int, error) {
	var candidates []string
	err := c.files.List(ctx, prefix, time.Now().Add(-ttl), func(i storage.Info) error {
		candidates = append(candidates, i.Key)
		if len(candidates) >= 4*c.cfg.BatchSize {
			return errEnough
		}
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		return 0, err
	}
	if len(candidates) == 0 {
		return 0, nil
	}
	kept, err := keep(ctx, candidates)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, key := range candidates {
		if n >= c.cfg.BatchSize {
			break
		}
		if kept[key] {
			continue
		}
		if err := c.files.Delete(ctx, key); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// removeFilesOf deletes the result files of tasks and returns the ids of the tasks whose
// files are gone. A task whose files could not all be deleted is logged with warning and
// left for a later round.
func (c *Cleaner) removeFilesOf(ctx context.Context, tasks []store.Task, warning string) []int64 {
	ids := make([]int64, 0, len(tasks))
	for i := range tasks {
		if err := c.removeResultFiles(ctx, &tasks[i]); err != nil {
			c.logger.Warn(warning, "task_no", tasks[i].TaskNo, "err", err)
			continue
		}
		ids = append(ids, tasks[i].ID)
	}
	return ids
}

// removeResultFiles deletes the files a task's result points to.
func (c *Cleaner) removeResultFiles(ctx context.Context, t *store.Task) error {
	for _, rel := range jobs.ResultFiles(t) {
		if err := c.files.Delete(ctx, rel); err != nil {
			return err
		}
	}
	return nil
}
