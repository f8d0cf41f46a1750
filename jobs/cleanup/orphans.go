package cleanup

import (
	"context"
	"errors"

	"github.com/taskcenter/taskcenter/store"
)

// orphans hands waiting tasks asynq does not hold to asynq again. Tasks asynq still holds
// are checked and left alone; only the ones actually enqueued are counted.
func (c *Cleaner) orphans(ctx context.Context) (int, error) {
	tasks, err := c.store.TakeOrphans(ctx, c.cfg.OrphanGrace, c.cfg.BatchSize)
	if err != nil {
		return 0, err
	}
	return c.handOver(ctx, tasks)
}

// handOver enqueues tasks and returns how many jobs it created.
func (c *Cleaner) handOver(ctx context.Context, tasks []store.Task) (int, error) {
	var errs []error
	n := 0
	for i := range tasks {
		t := &tasks[i]
		created, err := c.enqueuer.EnqueueNew(ctx, t)
		if err != nil {
			errs = append(errs, err)
			if err := c.store.MarkEnqueueFailed(ctx, t.ID, t.Attempt); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if created {
			n++
		}
	}
	return n, errors.Join(errs...)
}
