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
	return c.sweepListed(ctx, func(add func(string) error) error {
		return c.files.List(ctx, prefix, time.Now().Add(-ttl), func(i storage.Info) error { return add(i.Key) })
	}, keep, func(key string) error { return c.files.Delete(ctx, key) })
}

// sweepListed is every sweep's bound: list hands over candidates (stopped at four batches'
// worth), keep says which of them stay, and del removes the others, at most a batch per call,
// in listing order.
func (c *Cleaner) sweepListed(ctx context.Context, list func(add func(string) error) error,
	keep func(context.Context, []string) (map[string]bool, error), del func(string) error) (int, error) {
	var candidates []string
	err := list(func(name string) error {
		candidates = append(candidates, name)
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
	for _, name := range candidates {
		if n >= c.cfg.BatchSize {
			break
		}
		if kept[name] {
			continue
		}
		if err := del(name); err != nil {
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
