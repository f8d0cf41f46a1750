package cleanup

import "context"

// purgeAudit deletes audit rows past auth.audit.retention.
func (c *Cleaner) purgeAudit(ctx context.Context) (int, error) {
	if c.cfg.AuditRetention <= 0 {
		return 0, nil
	}
	return c.store.PruneAudit(ctx, c.cfg.AuditRetention, c.cfg.BatchSize)
}
