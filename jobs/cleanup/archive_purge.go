package cleanup

import "context"

// purgeArchive deletes archived tasks past the archive retention; their aggregates stay.
func (c *Cleaner) purgeArchive(ctx context.Context) (int, error) {
	if c.cfg.ArchiveRetention <= 0 {
		return 0, nil
	}
	return c.store.PurgeArchive(ctx, c.cfg.ArchiveRetention, c.cfg.BatchSize)
}
