package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
)

// This file holds the cleanup's reads and bookkeeping. None of it changes a task's status:
// the one status change cleanup makes (TIMEOUT) is TimeoutStale in transitions.go.

// ClaimCleanupSlot records that worker runs the cleanup round of slot. It returns false when
// another replica already has: the guard that makes each slot run once.
func (s *Store) ClaimCleanupSlot(ctx context.Context, slot time.Time, worker string) (bool, error) {
	res, err := s.db.NewRaw(`INSERT INTO cleanup_rounds (slot, worker) VALUES (?, ?) ON CONFLICT (slot) DO NOTHING`,
		slot.UTC(), worker).Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("claim cleanup slot %s: %w", slot, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// FinishCleanupRound stores a round's report, and forgets rounds older than a week.
func (s *Store) FinishCleanupRound(ctx context.Context, slot time.Time, report any) error {
	b, err := json.Marshal(report)
	if err != nil {
		return err
	}
	if _, err := s.db.NewRaw(`UPDATE cleanup_rounds SET finished_at = now(), report = ?::jsonb WHERE slot = ?`, string(b), slot.UTC()).Exec(ctx); err != nil {
		return fmt.Errorf("finish cleanup round: %w", err)
	}
	_, err = s.db.NewRaw(`DELETE FROM cleanup_rounds WHERE slot < now() - interval '7 days'`).Exec(ctx)
	return err
}

// CleanupRound is one recorded round.
type CleanupRound struct {
	bun.BaseModel `bun:"table:cleanup_rounds"`

	Slot       time.Time       `bun:"slot,pk"`
	Worker     string          `bun:"worker"`
	StartedAt  time.Time       `bun:"started_at"`
	FinishedAt *time.Time      `bun:"finished_at"`
	Report     json.RawMessage `bun:"report,type:jsonb"`
}

// CleanupRounds lists recorded rounds, oldest first.
func (s *Store) CleanupRounds(ctx context.Context) ([]CleanupRound, error) {
	var rounds []CleanupRound
	err := s.db.NewSelect().Model(&rounds).Order("slot").Scan(ctx)
	return rounds, err
}

// TakeOrphans returns up to limit tasks that should be (re)handed to asynq, and stamps their
// enqueued_at so the next round skips them for grace:
//   - PENDING or RETRY_WAIT not handed to asynq within grace (a failed enqueue, a process that
//     died between commit and enqueue, or a Redis that lost its data);
//   - RUNNING whose heartbeat is older than takeoverAfter (the worker died; if Redis also lost
//     the job, nothing else would deliver it).
//
// Enqueueing is idempotent, so a task asynq still holds is not delivered twice.
func (s *Store) TakeOrphans(ctx context.Context, grace, takeoverAfter time.Duration, limit int) ([]Task, error) {
	var tasks []Task
	err := s.db.NewRaw(sqlTakeOrphans,
		grace.Seconds(), takeoverAfter.Seconds(), limit).Scan(ctx, &tasks)
	if err != nil && !isNoRows(err) {
		return nil, fmt.Errorf("find orphans: %w", err)
	}
	return tasks, nil
}

// sqlTakeOrphans picks and stamps orphans: args grace seconds, takeover seconds, limit.
const sqlTakeOrphans = `
		WITH waiting AS (
			SELECT id FROM tasks
			WHERE status IN ('PENDING', 'RETRY_WAIT') AND (enqueued_at IS NULL OR enqueued_at < now() - make_interval(secs => ?0))
			ORDER BY enqueued_at NULLS FIRST LIMIT ?2 FOR UPDATE SKIP LOCKED
		), silent AS (
			SELECT id FROM tasks
			WHERE status = 'RUNNING' AND heartbeat_at < now() - make_interval(secs => ?1)
			  AND (enqueued_at IS NULL OR enqueued_at < now() - make_interval(secs => ?0))
			ORDER BY heartbeat_at LIMIT ?2 FOR UPDATE SKIP LOCKED
		)
		UPDATE tasks t SET enqueued_at = now()
		WHERE t.id IN (SELECT id FROM waiting UNION ALL SELECT id FROM silent) RETURNING t.*`

// ExpiredResults returns up to limit tasks whose result files are past their expiry and
// still on record.
func (s *Store) ExpiredResults(ctx context.Context, limit int) ([]Task, error) {
	var tasks []Task
	if err := s.db.NewRaw(sqlExpiredResults, limit).Scan(ctx, &tasks); err != nil && !isNoRows(err) {
		return nil, fmt.Errorf("find expired results: %w", err)
	}
	return tasks, nil
}

// ForgetResultFiles removes the file references of expired results, keeping the rest of
// the result (rows, summary) and the task.
func (s *Store) ForgetResultFiles(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := s.db.NewRaw(`UPDATE tasks SET result = (result - 'file' - 'error_report') || '{"expired": true}'::jsonb, updated_at = now()
		WHERE id IN (?)`, bun.In(ids)).Exec(ctx)
	return err
}

// PastRetention returns up to limit terminal tasks that finished before the cut-off.
func (s *Store) PastRetention(ctx context.Context, retention time.Duration, limit int) ([]Task, error) {
	var tasks []Task
	if err := s.db.NewRaw(sqlPastRetention, retention.Seconds(), limit).Scan(ctx, &tasks); err != nil && !isNoRows(err) {
		return nil, fmt.Errorf("find tasks past retention: %w", err)
	}
	return tasks, nil
}

// DeleteTasks deletes terminal tasks with their runs, logs and failed rows.
func (s *Store) DeleteTasks(ctx context.Context, ids []int64) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	res, err := s.db.NewRaw(`DELETE FROM tasks WHERE id IN (?) AND status IN ('SUCCESS', 'PARTIAL_SUCCESS', 'FAILED', 'TIMEOUT', 'CANCELLED')`,
		bun.In(ids)).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("delete tasks: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// LiveUploads returns which of the given upload paths a PENDING, RETRY_WAIT or RUNNING task
// still needs.
func (s *Store) LiveUploads(ctx context.Context, paths []string) (map[string]bool, error) {
	var live []string
	if err := s.db.NewRaw(sqlLiveUploads, pgdialect.Array(paths), pgdialect.Array(paths)).Scan(ctx, &live); err != nil && !isNoRows(err) {
		return nil, fmt.Errorf("find live uploads: %w", err)
	}
	out := make(map[string]bool, len(live))
	for _, p := range live {
		out[p] = true
	}
	return out, nil
}

// RunningTasks returns which of the given task numbers are RUNNING.
func (s *Store) RunningTasks(ctx context.Context, taskNos []string) (map[string]bool, error) {
	var running []string
	err := s.db.NewRaw(`SELECT task_no FROM tasks WHERE task_no = ANY(?::text[]) AND status = 'RUNNING'`, pgdialect.Array(taskNos)).Scan(ctx, &running)
	if err != nil && !isNoRows(err) {
		return nil, fmt.Errorf("find running tasks: %w", err)
	}
	out := make(map[string]bool, len(running))
	for _, t := range running {
		out[t] = true
	}
	return out, nil
}

// ConditionHolds records that an alert condition holds. It returns the time it started and
// fire=true exactly once per episode: the first call after it has held for at least hold.
func (s *Store) ConditionHolds(ctx context.Context, key string, hold time.Duration) (since time.Time, fire bool, err error) {
	if _, err := s.db.NewRaw(`INSERT INTO alert_conditions (key) VALUES (?) ON CONFLICT (key) DO NOTHING`, key).Exec(ctx); err != nil {
		return time.Time{}, false, fmt.Errorf("record alert condition: %w", err)
	}
	var fired []time.Time
	err = s.db.NewRaw(`UPDATE alert_conditions SET fired_at = now()
		WHERE key = ? AND fired_at IS NULL AND active_since <= now() - make_interval(secs => ?) RETURNING active_since`,
		key, hold.Seconds()).Scan(ctx, &fired)
	if err != nil && !isNoRows(err) {
		return time.Time{}, false, fmt.Errorf("fire alert condition: %w", err)
	}
	if len(fired) == 1 {
		return fired[0], true, nil
	}
	return time.Time{}, false, nil
}

// ConditionCleared forgets an alert condition, so its next episode alerts again.
func (s *Store) ConditionCleared(ctx context.Context, key string) error {
	_, err := s.db.NewRaw(`DELETE FROM alert_conditions WHERE key = ?`, key).Exec(ctx)
	return err
}

// The cleanup's reads, as constants so CleanupPlans explains exactly what runs.
const (
	sqlExpiredResults = `SELECT * FROM tasks
		WHERE result_expires_at IS NOT NULL AND (result ->> 'file') IS NOT NULL AND result_expires_at < now()
		ORDER BY result_expires_at LIMIT ?`
	sqlPastRetention = `SELECT * FROM tasks
		WHERE status IN ('SUCCESS', 'PARTIAL_SUCCESS', 'FAILED', 'TIMEOUT', 'CANCELLED') AND finished_at < now() - make_interval(secs => ?)
		ORDER BY finished_at LIMIT ?`
	sqlLiveUploads = `
		SELECT params ->> 'upload' FROM tasks WHERE status IN ('PENDING', 'RETRY_WAIT') AND params ->> 'upload' = ANY(?::text[])
		UNION
		SELECT params ->> 'upload' FROM tasks WHERE status = 'RUNNING' AND params ->> 'upload' = ANY(?::text[])`
	sqlWaitingByQueue = `SELECT queue, count(*) AS n FROM tasks WHERE status IN ('PENDING', 'RETRY_WAIT') GROUP BY queue`
)

// CleanupPlans returns Postgres' plan for each query a cleanup round runs over tasks, so a
// benchmark can check every step is served by an index. Nothing is executed.
func (s *Store) CleanupPlans(ctx context.Context, grace, takeoverAfter, retention time.Duration, limit int) (map[string]string, error) {
	steps := []struct {
		name string
		sql  string
		args []any
	}{
		{"stale_runs", sqlTimeoutStale, []any{limit}},
		{"orphans", sqlTakeOrphans, []any{grace.Seconds(), takeoverAfter.Seconds(), limit}},
		{"expired_results", sqlExpiredResults, []any{limit}},
		{"uploads", sqlLiveUploads, []any{pgdialect.Array([]string{"uploads/a.xlsx"}), pgdialect.Array([]string{"uploads/a.xlsx"})}},
		{"retention", sqlPastRetention, []any{retention.Seconds(), limit}},
		{"backlog", sqlWaitingByQueue, nil},
	}
	out := map[string]string{}
	for _, st := range steps {
		var lines []string
		if err := s.db.NewRaw("EXPLAIN "+st.sql, st.args...).Scan(ctx, &lines); err != nil {
			return nil, fmt.Errorf("explain %s: %w", st.name, err)
		}
		out[st.name] = strings.Join(lines, "\n")
	}
	return out, nil
}
