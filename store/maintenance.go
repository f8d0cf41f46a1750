package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/store/pg"
)

// This file holds the cleanup's reads and bookkeeping, and the record of a failed hand-off to
// asynq that the orphan rescue reads. None of it changes a task's status: the one status
// change cleanup makes (TIMEOUT) is TimeoutStale in tasks_end.go.

// ClaimCleanupSlot records that worker runs the cleanup round of slot. It returns false when
// another replica already has: the guard that makes each slot run once.
func (s *Maintenance) ClaimCleanupSlot(ctx context.Context, slot time.Time, worker string) (bool, error) {
	n, err := pg.Exec(ctx, s.db.DB, `INSERT INTO cleanup_rounds (slot, worker) VALUES ($1, $2) ON CONFLICT (slot) DO NOTHING`,
		slot.UTC(), worker)
	if err != nil {
		return false, fmt.Errorf("claim cleanup slot %s: %w", slot, err)
	}
	return n == 1, nil
}

// FinishCleanupRound stores a round's report, and forgets rounds older than a week.
func (s *Maintenance) FinishCleanupRound(ctx context.Context, slot time.Time, report any) error {
	b, err := json.Marshal(report)
	if err != nil {
		return err
	}
	if _, err := pg.Exec(ctx, s.db.DB, `UPDATE cleanup_rounds SET finished_at = now(), report = $1::jsonb WHERE slot = $2`, string(b), slot.UTC()); err != nil {
		return fmt.Errorf("finish cleanup round: %w", err)
	}
	_, err = pg.Exec(ctx, s.db.DB, `DELETE FROM cleanup_rounds WHERE slot < now() - interval '7 days'`)
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
func (s *Maintenance) CleanupRounds(ctx context.Context) ([]CleanupRound, error) {
	var rounds []CleanupRound
	err := pg.All(ctx, s.db, s.db.DB, &rounds, `SELECT `+roundColumns+` FROM cleanup_rounds ORDER BY slot`)
	return rounds, err
}

// TakeSilent returns up to limit RUNNING tasks whose heartbeat is older than takeoverAfter and
// that were not handed to asynq since they went silent (or not within grace), and stamps their
// enqueued_at. Their worker died; asynq would only notice at its next lease check, up to a
// minute later, and if Redis also lost the job nothing else would deliver it. Recovery is
// judged by the heartbeat, not by when the task was submitted: a worker killed mid-task is
// re-delivered about takeoverAfter plus one cleanup interval after its last heartbeat. The
// cleanup round takes these first, before any other work.
func (s *Maintenance) TakeSilent(ctx context.Context, grace, takeoverAfter time.Duration, limit int) ([]Task, error) {
	return pg.List[Task](ctx, s.db, "find silent running tasks", sqlTakeSilent, grace.Seconds(), takeoverAfter.Seconds(), limit)
}

// TakeOrphans returns up to limit PENDING or RETRY_WAIT tasks not handed to asynq within grace
// (a failed enqueue, a process that died between commit and enqueue, or a Redis that lost its
// data), and stamps their enqueued_at so the next rounds skip them for grace. Enqueueing is
// idempotent, so a task asynq still holds is not delivered twice.
func (s *Maintenance) TakeOrphans(ctx context.Context, grace time.Duration, limit int) ([]Task, error) {
	return pg.List[Task](ctx, s.db, "find orphans", sqlTakeOrphans, grace.Seconds(), limit)
}

// sqlTakeSilent picks and stamps silent RUNNING tasks: args grace seconds, takeover seconds, limit.
const sqlTakeSilent = `
		WITH silent AS (
			SELECT id FROM tasks
			WHERE status = 'RUNNING' AND heartbeat_at < now() - make_interval(secs => $2)
			  AND (enqueued_at IS NULL OR enqueued_at < heartbeat_at OR enqueued_at < now() - make_interval(secs => $1))
			ORDER BY heartbeat_at LIMIT $3 FOR UPDATE SKIP LOCKED
		), t AS (
			UPDATE tasks t SET enqueued_at = now() FROM silent WHERE t.id = silent.id RETURNING t.*
		)
		SELECT ` + taskColumns + ` FROM t`

// sqlTakeOrphans picks and stamps waiting orphans: args grace seconds, limit.
const sqlTakeOrphans = `
		WITH waiting AS (
			SELECT id FROM tasks
			WHERE status IN ('PENDING', 'RETRY_WAIT') AND (enqueued_at IS NULL OR enqueued_at < now() - make_interval(secs => $1))
			ORDER BY enqueued_at NULLS FIRST LIMIT $2 FOR UPDATE SKIP LOCKED
		), t AS (
			UPDATE tasks t SET enqueued_at = now() FROM waiting WHERE t.id = waiting.id RETURNING t.*
		)
		SELECT ` + taskColumns + ` FROM t`

// MarkEnqueueFailed records that handing a waiting task to asynq failed, so the rescuer
// picks it up at its next round instead of after the grace period.
func (s *Maintenance) MarkEnqueueFailed(ctx context.Context, taskID int64, attempt int) error {
	_, err := pg.Exec(ctx, s.db.DB,
		`UPDATE tasks SET enqueued_at = NULL WHERE id = $1 AND attempt = $2 AND status IN ('PENDING', 'RETRY_WAIT', 'RUNNING')`,
		taskID, attempt)
	return err
}

// MarkEnqueued records that a task flagged by MarkEnqueueFailed was handed to asynq after
// all, so the cleanup round does not take it for an orphan. It changes nothing when the task
// has moved on (another attempt, no longer waiting) or was already handed over again.
func (s *Maintenance) MarkEnqueued(ctx context.Context, taskID int64, attempt int) error {
	_, err := pg.Exec(ctx, s.db.DB,
		`UPDATE tasks SET enqueued_at = now() WHERE id = $1 AND attempt = $2 AND status IN ('PENDING', 'RETRY_WAIT') AND enqueued_at IS NULL`,
		taskID, attempt)
	return err
}

// ExpiredResults returns up to limit tasks whose result files (an export's result, an
// import's error report) are past their expiry and still on record.
func (s *Maintenance) ExpiredResults(ctx context.Context, limit int) ([]Task, error) {
	return pg.List[Task](ctx, s.db, "find expired results", sqlExpiredResults, limit)
}

// ForgetResultFiles removes the file references of expired results, keeping the rest of
// the result (rows, summary) and the task, marked expired so downloads answer 410.
func (s *Maintenance) ForgetResultFiles(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := pg.Exec(ctx, s.db.DB, `UPDATE tasks SET result = (result - 'file' - 'error_report') || '{"expired": true}'::jsonb, updated_at = now()
		WHERE id = ANY($1::bigint[])`, ids)
	return err
}

// PastRetention returns up to limit terminal tasks that finished before the cut-off.
func (s *Maintenance) PastRetention(ctx context.Context, retention time.Duration, limit int) ([]Task, error) {
	return pg.List[Task](ctx, s.db, "find tasks past retention", sqlPastRetention, retention.Seconds(), limit)
}

// LiveUploads returns which of the given upload paths a PENDING, RETRY_WAIT or RUNNING task
// still needs.
func (s *Maintenance) LiveUploads(ctx context.Context, paths []string) (map[string]bool, error) {
	var live []string
	if err := pg.All(ctx, s.db, s.db.DB, &live, sqlLiveUploads, paths); err != nil {
		return nil, fmt.Errorf("find live uploads: %w", err)
	}
	out := make(map[string]bool, len(live))
	for _, p := range live {
		out[p] = true
	}
	return out, nil
}

// RunningAttempts returns, for those of the given task numbers that are RUNNING, the attempt
// that runs them: the only attempt whose temp files are still being written.
func (s *Maintenance) RunningAttempts(ctx context.Context, taskNos []string) (map[string]int, error) {
	var running []struct {
		TaskNo  string `bun:"task_no"`
		Attempt int    `bun:"attempt"`
	}
	err := pg.All(ctx, s.db, s.db.DB, &running, `SELECT task_no, attempt FROM tasks WHERE task_no = ANY($1::text[]) AND status = 'RUNNING'`, taskNos)
	if err != nil {
		return nil, fmt.Errorf("find running tasks: %w", err)
	}
	out := make(map[string]int, len(running))
	for _, t := range running {
		out[t.TaskNo] = t.Attempt
	}
	return out, nil
}

// ResultRef is what a task row says about its result files, for the sweep of result files
// no row points at.
type ResultRef struct {
	TaskNo      string `bun:"task_no"`
	Status      Status `bun:"status"`
	Attempt     int    `bun:"attempt"`
	File        string `bun:"file"`
	ErrorReport string `bun:"error_report"`
}

// ResultRefs returns the result references of the given tasks that exist.
func (s *Maintenance) ResultRefs(ctx context.Context, taskNos []string) (map[string]ResultRef, error) {
	var refs []ResultRef
	err := pg.All(ctx, s.db, s.db.DB, &refs, `SELECT task_no, status, attempt, COALESCE(result ->> 'file', '') AS file,
		COALESCE(result ->> 'error_report', '') AS error_report FROM tasks WHERE task_no = ANY($1::text[])`, taskNos)
	if err != nil {
		return nil, fmt.Errorf("find result references: %w", err)
	}
	out := make(map[string]ResultRef, len(refs))
	for _, r := range refs {
		out[r.TaskNo] = r
	}
	return out, nil
}

// The cleanup's reads, as constants so CleanupPlans explains exactly what runs.
const (
	sqlExpiredResults = `SELECT ` + taskColumns + ` FROM tasks
		WHERE result_expires_at IS NOT NULL AND ((result ->> 'file') IS NOT NULL OR (result ->> 'error_report') IS NOT NULL)
		  AND result_expires_at < now()
		ORDER BY result_expires_at LIMIT $1`
	sqlPastRetention = `SELECT ` + taskColumns + ` FROM tasks
		WHERE status IN ` + task.TerminalSQL + ` AND finished_at < now() - make_interval(secs => $1)
		ORDER BY finished_at LIMIT $2`
	sqlLiveUploads = `
		SELECT params ->> 'upload' FROM tasks WHERE status IN ('PENDING', 'RETRY_WAIT') AND params ->> 'upload' = ANY($1::text[])
		UNION
		SELECT params ->> 'upload' FROM tasks WHERE status = 'RUNNING' AND params ->> 'upload' = ANY($1::text[])`
	sqlWaitingByQueue = `SELECT queue, count(*) AS n FROM tasks WHERE status IN ('PENDING', 'RETRY_WAIT') GROUP BY queue`
	sqlDueAlerts      = `SELECT id FROM tasks WHERE alert_due_at IS NOT NULL AND alerted_at IS NULL
		AND alert_due_at < now() - make_interval(secs => $1) LIMIT $2`
)

// CleanupPlans returns Postgres' plan for each query a cleanup round runs over tasks, so a
// benchmark can check every step is served by an index. Nothing is executed.
func (s *Maintenance) CleanupPlans(ctx context.Context, grace, takeoverAfter, retention time.Duration, limit int) (map[string]string, error) {
	steps := []struct {
		name string
		sql  string
		args []any
	}{
		{"stale_runs", sqlTimeoutStale, []any{limit}},
		{"takeovers", sqlTakeSilent, []any{grace.Seconds(), takeoverAfter.Seconds(), limit}},
		{"orphans", sqlTakeOrphans, []any{grace.Seconds(), limit}},
		{"expired_results", sqlExpiredResults, []any{limit}},
		{"uploads", sqlLiveUploads, []any{[]string{"uploads/a.xlsx"}}},
		{"retention", sqlPastRetention, []any{retention.Seconds(), limit}},
		{"backlog", sqlWaitingByQueue, nil},
		{"alerts", sqlDueAlerts, []any{60.0, limit}},
	}
	out := map[string]string{}
	for _, st := range steps {
		plan, err := pg.Explain(ctx, s.db, st.sql, st.args...)
		if err != nil {
			return nil, fmt.Errorf("explain %s: %w", st.name, err)
		}
		out[st.name] = plan
	}
	return out, nil
}

// PruneImportImages deletes up to limit of the imports' leftovers: the before-images of
// imports that ended longer ago than keep (they can no longer be undone) or are gone, and
// the recorded codes (import_codes) of imports that are gone or ended with an outcome no
// retry can resume (an import's last step deletes its own; a failed or cancelled one keeps
// them while it may be retried, until retention archives it). It returns the rows deleted.
func (s *Maintenance) PruneImportImages(ctx context.Context, keep time.Duration, limit int) (int, error) {
	images, err := pg.Prune(ctx, s.db.DB, "import before-images", `DELETE FROM import_before_images WHERE ctid IN (
		SELECT b.ctid FROM import_before_images b LEFT JOIN tasks t ON t.id = b.task_id
		WHERE t.id IS NULL OR t.finished_at < now() - make_interval(secs => $1) LIMIT $2)`, keep, limit)
	if err != nil {
		return 0, err
	}
	codes, err := pg.Prune(ctx, s.db.DB, "import codes", `DELETE FROM import_codes WHERE ctid IN (
		SELECT k.ctid FROM import_codes k LEFT JOIN tasks t ON t.id = k.task_id
		WHERE (t.id IS NULL OR t.status IN ('SUCCESS', 'PARTIAL_SUCCESS')) AND $1::float8 IS NOT NULL LIMIT $2)`, keep, limit)
	return images + codes, err
}
