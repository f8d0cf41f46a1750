// Package uploads keeps what the import's submit side records about files: the accepted
// uploads (the uploads table: each accepted file is kept for the upload TTL from its last
// use, and the cleanup sweeps the ones no waiting or running task needs), and the column
// mappings owners saved for them (the column_mappings table: one per owner and header set,
// so the next file with the same headers is read the same way; mappings.go). Package store
// embeds *Uploads in its Store, so callers write st.RecordUpload(...), st.FindMapping(...).
package uploads

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/store/pg"
)

// Uploads records accepted uploads and sweeps the unused ones, and keeps the column mappings
// saved for their header sets.
type Uploads struct{ db *bun.DB }

// New returns the upload records over db.
func New(db *bun.DB) *Uploads { return &Uploads{db: db} }

// RecordUpload records that an upload was accepted (or accepted again: the same content
// re-uploaded), which keeps its file for the upload TTL from now.
func (s *Uploads) RecordUpload(ctx context.Context, path, sha256 string, size int64) error {
	_, err := pg.Exec(ctx, s.db.DB, `INSERT INTO uploads (path, sha256, size) VALUES ($1, $2, $3)
		ON CONFLICT (path) DO UPDATE SET last_at = now()`, path, sha256, size)
	if err != nil {
		return fmt.Errorf("record upload: %w", err)
	}
	return nil
}

// SweepUploads deletes up to limit recorded uploads untouched for ttl that no PENDING,
// RETRY_WAIT or RUNNING task needs: remove deletes each file while its record is locked, so an
// upload of the same content accepted meanwhile (RecordUpload waits for the lock) keeps the
// file it commits after. It returns how many it deleted.
func (s *Uploads) SweepUploads(ctx context.Context, ttl time.Duration, limit int, remove func(path string) error) (int, error) {
	n := 0
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var paths []string
		err := pg.All(ctx, s.db, tx.Tx, &paths, `
			SELECT u.path FROM uploads u
			WHERE u.last_at < now() - make_interval(secs => $1)
			  AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.status IN ('PENDING', 'RETRY_WAIT', 'RUNNING') AND t.params ->> 'upload' = u.path)
			ORDER BY u.last_at LIMIT $2 FOR UPDATE OF u SKIP LOCKED`, ttl.Seconds(), limit)
		if err != nil {
			return err
		}
		var gone []string
		for _, p := range paths {
			if err := remove(p); err != nil {
				return err
			}
			gone = append(gone, p)
		}
		if len(gone) == 0 {
			return nil
		}
		if _, err := pg.Exec(ctx, tx.Tx, `DELETE FROM uploads WHERE path = ANY($1::text[])`, gone); err != nil {
			return err
		}
		n = len(gone)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sweep uploads: %w", err)
	}
	return n, nil
}

// RecordedUploads returns which of the given paths have a record.
func (s *Uploads) RecordedUploads(ctx context.Context, paths []string) (map[string]bool, error) {
	var rec []string
	if err := pg.All(ctx, s.db, s.db.DB, &rec, `SELECT path FROM uploads WHERE path = ANY($1::text[])`, paths); err != nil {
		return nil, fmt.Errorf("find upload records: %w", err)
	}
	out := make(map[string]bool, len(rec))
	for _, p := range rec {
		out[p] = true
	}
	return out, nil
}

// TouchUpload keeps a recorded upload for the upload TTL from now, for a new task that reuses
// it (a re-submit); false when it has no record, so its file was swept. It waits for a sweep
// that holds the record: after it, the file is either kept or known to be gone.
func (s *Uploads) TouchUpload(ctx context.Context, path string) (bool, error) {
	n, err := pg.Exec(ctx, s.db.DB, `UPDATE uploads SET last_at = now() WHERE path = $1`, path)
	if err != nil {
		return false, fmt.Errorf("touch upload: %w", err)
	}
	return n == 1, nil
}
