package cleanup

import (
	"context"
	"time"

	"github.com/taskcenter/taskcenter/internal/storage"
)

// incompleteUploads aborts the multipart uploads left in the store past TempTTL, in the
// areas the service writes: an API node killed while it streamed an upload under
// storage.Incoming, or a worker killed while it committed a large result under
// storage.Results, could not abort its own, and the parts would take space for good. No
// upload of this service runs for TempTTL (6 h), so one that old is dead. The local backend
// has none.
func (c *Cleaner) incompleteUploads(ctx context.Context) (int, error) {
	cutoff := time.Now().Add(-c.cfg.TempTTL)
	n := 0
	for _, area := range []string{storage.Incoming, storage.Results, storage.Uploads} {
		if n >= c.cfg.BatchSize {
			break
		}
		m, err := c.files.AbortIncomplete(ctx, area+"/", cutoff, c.cfg.BatchSize-n)
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
