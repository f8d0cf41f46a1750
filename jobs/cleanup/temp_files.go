package cleanup

import (
	"context"

	"github.com/taskcenter/taskcenter/internal/storage"
)

// tempFiles deletes what no running attempt is writing any more, past TempTTL: this node's
// scratch entries (SweepScratch) and uploads abandoned half-way under storage.Incoming (an
// API node died while it received or checked them; nothing ever points at them).
func (c *Cleaner) tempFiles(ctx context.Context) (int, error) {
	n, err := c.SweepScratch(ctx)
	if err != nil {
		return n, err
	}
	m, err := c.sweep(ctx, storage.Incoming+"/", c.cfg.TempTTL, func(context.Context, []string) (map[string]bool, error) {
		return nil, nil
	})
	return n + m, err
}
