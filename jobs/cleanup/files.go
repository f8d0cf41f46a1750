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

// removeResultFiles deletes the files a task's result points to.
func (c *Cleaner) removeResultFiles(ctx context.Context, t *store.Task) error {
	for _, rel := range jobs.ResultFiles(t) {
		if err := c.files.Delete(ctx, rel); err != nil {
			return err
		}
	}
	return nil
}
