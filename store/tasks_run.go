package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/store/pg"
)

// This file holds a running attempt's writes: heartbeats, progress, committed batches and log
// lines, each fenced by the attempt's lease.

// Heartbeat proves the attempt is alive. It returns whether a cancel was requested, or
// ErrFenced when the attempt no longer owns the task.
func (s *Attempts) Heartbeat(ctx context.Context, l Lease) (cancelRequested bool, err error) {
	err = pg.One(ctx, s.db, s.db.DB, &cancelRequested,
		`UPDATE tasks SET heartbeat_at = now() WHERE id = $1 AND attempt = $2 AND status = 'RUNNING' RETURNING cancel_requested`,
		l.TaskID, l.Attempt)
	return cancelRequested, fenced(err, "heartbeat", l)
}

// HeartbeatMany proves many attempts alive in one statement (a process's running attempts,
// once per interval). It returns, for each attempt that still owns its task, whether a cancel
// was requested; an attempt missing from the result is fenced.
func (s *Attempts) HeartbeatMany(ctx context.Context, leases []Lease) (map[int64]bool, error) {
	ids := make([]int64, len(leases))
	attempts := make([]int32, len(leases))
	for i, l := range leases {
		ids[i], attempts[i] = l.TaskID, int32(l.Attempt)
	}
	var rows []struct {
		ID              int64 `bun:"id"`
		CancelRequested bool  `bun:"cancel_requested"`
	}
	err := pg.All(ctx, s.db, s.db.DB, &rows, `
		UPDATE tasks SET heartbeat_at = now()
		FROM unnest($1::bigint[], $2::int[]) AS v(id, attempt)
		WHERE tasks.id = v.id AND tasks.attempt = v.attempt AND tasks.status = 'RUNNING'
		RETURNING tasks.id, tasks.cancel_requested`, ids, attempts)
	if err != nil {
		return nil, fmt.Errorf("heartbeat %d attempts: %w", len(leases), err)
	}
	out := make(map[int64]bool, len(rows))
	for _, r := range rows {
		out[r.ID] = r.CancelRequested
	}
	return out, nil
}

// Progress records progress and a heartbeat for the attempt. Progress never goes down: a
// retried attempt that starts over keeps the high-water mark until it passes it.
func (s *Attempts) Progress(ctx context.Context, l Lease, current, total int64) (cancelRequested bool, err error) {
	err = pg.One(ctx, s.db, s.db.DB, &cancelRequested, `
		UPDATE tasks SET progress_current = GREATEST(progress_current, $1::bigint), progress_total = $2, heartbeat_at = now(), updated_at = now()
		WHERE id = $3 AND attempt = $4 AND status = 'RUNNING' RETURNING cancel_requested`,
		current, total, l.TaskID, l.Attempt)
	return cancelRequested, fenced(err, "record progress", l)
}

// Batch is what one committed batch of work advances.
type Batch struct {
	Checkpoint      json.RawMessage // where a resumed attempt starts
	TotalDelta      int64           // rows seen in this batch
	SuccessDelta    int64           // rows written
	FailedDelta     int64           // rows rejected
	ProgressCurrent int64
	ProgressTotal   int64
}

// CommitBatch runs write in one transaction with the batch's checkpoint, counts, progress and
// heartbeat, all fenced by the lease. It first locks the task row if, and only if, the lease
// still owns it: a superseded attempt writes nothing, and a takeover waits for the batch.
// write returns the Batch it committed, so the counts are what the write actually did.
func (s *Attempts) CommitBatch(ctx context.Context, l Lease, write func(ctx context.Context, tx bun.Tx) (Batch, error)) (cancelRequested bool, err error) {
	err = s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		err := pg.One(ctx, s.db, tx.Tx, &cancelRequested,
			`SELECT cancel_requested FROM tasks WHERE id = $1 AND attempt = $2 AND status = 'RUNNING' FOR UPDATE`,
			l.TaskID, l.Attempt)
		if err := fenced(err, "commit batch", l); err != nil {
			return err
		}
		b, err := write(ctx, tx)
		if err != nil {
			return err
		}
		_, err = pg.Exec(ctx, tx.Tx, `
			UPDATE tasks SET checkpoint = $1::jsonb, total_count = total_count + $2, success_count = success_count + $3,
			       failed_count = failed_count + $4, progress_current = GREATEST(progress_current, $5::bigint), progress_total = $6,
			       heartbeat_at = now(), updated_at = now()
			WHERE id = $7`,
			nullJSON(b.Checkpoint), b.TotalDelta, b.SuccessDelta, b.FailedDelta, b.ProgressCurrent, b.ProgressTotal, l.TaskID)
		return err
	})
	return cancelRequested, err
}

// AppendLog adds a line to a task's narrative on behalf of a running attempt. It is fenced
// like every other write of the attempt: a superseded attempt's line is not written, and
// ErrFenced says so.
// The line is stored as its catalogue message and its English text.
func (s *Attempts) AppendLog(ctx context.Context, l Lease, level string, m msg.Message) error {
	n, err := pg.Exec(ctx, s.db.DB, `
		INSERT INTO task_logs (task_id, attempt, level, message, code, params)
		SELECT id, attempt, $3, $4, $5, NULLIF($6, '')::jsonb FROM tasks WHERE id = $1 AND attempt = $2 AND status = 'RUNNING'`,
		l.TaskID, l.Attempt, level, m.English(), m.Code, paramsJSON(m.Params))
	if err != nil {
		return fmt.Errorf("append log to %s: %w", l, err)
	}
	if n == 0 {
		return fmt.Errorf("append log to %s: %w", l, ErrFenced)
	}
	return nil
}

// fenced maps "no row" of a lease-fenced write to ErrFenced.
func fenced(err error, op string, l Lease) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%s %s: %w", op, l, ErrFenced)
	default:
		return fmt.Errorf("%s %s: %w", op, l, err)
	}
}

func nullJSON(b json.RawMessage) *string {
	if len(b) == 0 {
		return nil
	}
	s := string(b)
	return &s
}
