package cleanup

import (
	"context"

	"github.com/taskcenter/taskcenter/internal/storage"
)

// uploads deletes uploaded files whose record (store/uploads' RecordUpload, touched by every
// accepted upload of the same content) is older than UploadTTL and that no waiting or running
// task needs; then, for files from before records existed, any unrecorded upload past its age.
func (c *Cleaner) uploads(ctx context.Context) (int, error) {
	n, err := c.store.SweepUploads(ctx, c.cfg.UploadTTL, c.cfg.BatchSize, func(key string) error { return c.files.Delete(ctx, key) })
	if err != nil {
		return n, err
	}
	m, err := c.sweep(ctx, storage.Uploads+"/", c.cfg.UploadTTL, func(ctx context.Context, keys []string) (map[string]bool, error) {
		keep, err := c.store.RecordedUploads(ctx, keys)
		if err != nil {
			return nil, err
		}
		live, err := c.store.LiveUploads(ctx, keys)
		if err != nil {
			return nil, err
		}
		for p := range live {
			keep[p] = true
		}
		return keep, nil
	})
	return n + m, err
}
