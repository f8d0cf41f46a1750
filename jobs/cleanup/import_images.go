package cleanup

import "context"

// purgeImportImages deletes what imports keep for later: the before-images of imports that
// ended longer ago than import.undo_ttl (they can no longer be undone) or are gone, and the
// file codes a dry run or a replace left when it ended without its last step and can no
// longer be resumed.
func (c *Cleaner) purgeImportImages(ctx context.Context) (int, error) {
	if c.cfg.UndoTTL <= 0 {
		return 0, nil
	}
	return c.store.PruneImportImages(ctx, c.cfg.UndoTTL, c.cfg.BatchSize)
}
