package main

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hibiken/asynq"
	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/batch"
	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/store"
)

// The lease floor (kind lean) is the least Postgres work any design that fences its workers behind asynq
// must do per task: a claim (PENDING → RUNNING, attempt + 1) and an ending fenced by that
// attempt (RUNNING → SUCCESS), each grouped with the concurrent ones into one statement and one
// commit (internal/batch with taskcenter's default batch_max and batch_wait), on a row
// of six columns with a primary key and the one partial index a recovery scan of RUNNING rows
// needs. No run rows, events, logs, counters or payload. The bare asynq drain with this in its
// handler measures how far the pipeline's ratio can go when every task's lease is recorded in
// Postgres at all: the headroom left to taskcenter's own records is the gap between this
// figure and taskcenter's workers-alone figure.

const leaseFloorSchema = `
	CREATE TABLE IF NOT EXISTS lease_floor (
		id bigint PRIMARY KEY, status text NOT NULL, attempt int NOT NULL DEFAULT 0,
		worker text, heartbeat_at timestamptz, finished_at timestamptz);
	CREATE INDEX IF NOT EXISTS lease_floor_running ON lease_floor (id) WHERE status = 'RUNNING';
	TRUNCATE lease_floor;
	CREATE TABLE IF NOT EXISTS lease_floor_runs (
		task_id bigint NOT NULL, attempt int NOT NULL, status text NOT NULL,
		started_at timestamptz NOT NULL, finished_at timestamptz, PRIMARY KEY (task_id, attempt));
	TRUNCATE lease_floor_runs`

// Floor kinds: lean is the six-column row above; runs adds the record taskcenter keeps of
// every attempt (a run row inserted by the claim and closed by the ending, in the same
// statements); model runs the same two grouped statements on taskcenter's own tables (the wide
// tasks row with its indexes, task_runs, and an outbox event per transition in task_events),
// the least any implementation of taskcenter's current data model can write per task.
const (
	floorLean  = "lean"
	floorRuns  = "runs"
	floorModel = "model"
)

const (
	floorClaim = `
			UPDATE lease_floor f SET status = 'RUNNING', attempt = f.attempt + 1, worker = 'floor', heartbeat_at = now()
			FROM unnest($1::bigint[], $2::int[]) AS v(id, attempt)
			WHERE f.id = v.id AND f.status = 'PENDING'
			RETURNING f.id, f.attempt`
	floorEnd = `
			UPDATE lease_floor f SET status = 'SUCCESS', finished_at = now()
			FROM unnest($1::bigint[], $2::int[]) AS v(id, attempt)
			WHERE f.id = v.id AND f.attempt = v.attempt AND f.status = 'RUNNING'
			RETURNING f.id, f.attempt`
	floorClaimWithRun = `
		WITH c AS (` + floorClaim + `
		), r AS (INSERT INTO lease_floor_runs (task_id, attempt, status, started_at) SELECT id, attempt, 'RUNNING', now() FROM c)
		SELECT id, attempt FROM c`
	floorEndWithRun = `
		WITH e AS (` + floorEnd + `
		), r AS (UPDATE lease_floor_runs r SET status = 'SUCCESS', finished_at = now() FROM e WHERE r.task_id = e.id AND r.attempt = e.attempt)
		SELECT id, attempt FROM e`
	modelClaim = `
		WITH c AS (
			UPDATE tasks t SET status = 'RUNNING', attempt = t.attempt + 1, heartbeat_at = now(), worker = 'floor',
			       started_at = COALESCE(t.started_at, now()), updated_at = now()
			FROM unnest($1::bigint[], $2::int[]) AS v(id, attempt)
			WHERE t.id = v.id AND t.status = 'PENDING'
			RETURNING t.id, t.task_no, t.owner, t.type, t.attempt
		), r AS (INSERT INTO task_runs (task_id, attempt, trigger, worker, status) SELECT id, attempt, 'first', 'floor', 'RUNNING' FROM c
		), e AS (INSERT INTO task_events (task_id, task_no, owner, task_type, event, status, attempt, actor, webhooks_at)
			SELECT id, task_no, owner, type, 'task.started', 'RUNNING', attempt, 'floor', now() FROM c)
		SELECT id, attempt FROM c`
	modelEnd = `
		WITH c AS (
			UPDATE tasks t SET status = 'SUCCESS', finished_at = now(), updated_at = now()
			FROM unnest($1::bigint[], $2::int[]) AS v(id, attempt)
			WHERE t.id = v.id AND t.attempt = v.attempt AND t.status = 'RUNNING'
			RETURNING t.id, t.task_no, t.owner, t.type, t.attempt
		), r AS (UPDATE task_runs r SET status = 'SUCCESS', finished_at = now() FROM c WHERE r.task_id = c.id AND r.attempt = c.attempt
		), e AS (INSERT INTO task_events (task_id, task_no, owner, task_type, event, status, attempt, actor, webhooks_at)
			SELECT id, task_no, owner, type, 'task.succeeded', 'SUCCESS', attempt, 'floor', now() FROM c)
		SELECT id, attempt FROM c`
)

// leaseFloor holds the grouped claim and end writers of one drain.
type leaseFloor struct {
	claims, ends *groupWriter
	ids          []int64 // model: job i's task is ids[i-1]; else row i
}

// openLeaseFloor creates the table with n PENDING rows (ids 1..n) in the database at url.
// kind is floorLean, floorRuns or floorModel; model needs the database migrated and adds n
// PENDING tasks to it.
func openLeaseFloor(ctx context.Context, url string, n int, kind string) (*leaseFloor, func(), error) {
	db, err := store.Open(url, store.OpenOptions{MaxOpenConns: 4})
	if err != nil {
		return nil, nil, err
	}
	f := &leaseFloor{}
	claim, end, err := f.prepare(ctx, db, n, kind)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	f.claims, f.ends = newGroupWriter(db.DB, claim), newGroupWriter(db.DB, end)
	return f, func() { f.claims.close(); f.ends.close(); db.Close() }, nil
}

// prepare writes the n PENDING rows of kind and returns its claim and end statements.
func (f *leaseFloor) prepare(ctx context.Context, db *bun.DB, n int, kind string) (claim, end string, err error) {
	switch kind {
	case floorLean, floorRuns:
		for _, stmt := range strings.Split(leaseFloorSchema, ";") {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				return "", "", fmt.Errorf("lease floor table: %w", err)
			}
		}
		if _, err := db.DB.ExecContext(ctx, `INSERT INTO lease_floor (id, status) SELECT i, 'PENDING' FROM generate_series(1, $1::bigint) i`, n); err != nil {
			return "", "", err
		}
		if kind == floorRuns {
			return floorClaimWithRun, floorEndWithRun, nil
		}
		return floorClaim, floorEnd, nil
	case floorModel:
		if _, err := db.ExecContext(ctx, "TRUNCATE tasks, task_runs, task_events CASCADE"); err != nil {
			return "", "", fmt.Errorf("lease floor tasks (is the schema migrated?): %w", err)
		}
		err := db.NewRaw(`INSERT INTO tasks (task_no, type, owner, queue, priority, status, max_retry, timeout_seconds, enqueued_at)
			SELECT 'floor_' || md5(random()::text), 'bench:noop', 'bench', 'bench', 5, 'PENDING', 3, 60, now()
			FROM generate_series(1, ?::bigint) RETURNING id`, n).Scan(ctx, &f.ids)
		if err != nil {
			return "", "", fmt.Errorf("lease floor tasks: %w", err)
		}
		slices.Sort(f.ids)
		if _, err := db.ExecContext(ctx, "ANALYZE tasks"); err != nil {
			return "", "", err
		}
		return modelClaim, modelEnd, nil
	}
	return "", "", fmt.Errorf("lease floor: unknown kind %q (lean, runs, model)", kind)
}

// run is the handler's part: claim the job's row, (do nothing), end the attempt it claimed.
func (f *leaseFloor) run(ctx context.Context) error {
	jobID, _ := asynq.GetTaskID(ctx)
	id, err := strconv.ParseInt(strings.TrimPrefix(jobID, "noop-"), 10, 64)
	if err != nil {
		return fmt.Errorf("job %q: %w", jobID, err)
	}
	if f.ids != nil {
		if id < 1 || id > int64(len(f.ids)) {
			return fmt.Errorf("job %q: no task", jobID)
		}
		id = f.ids[id-1]
	}
	attempt, ok, err := f.claims.write(id, 0)
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("row %d not claimable", id)
	}
	if _, ok, err := f.ends.write(id, attempt); err != nil || !ok {
		return fmt.Errorf("row %d attempt %d not ended (fenced: %v): %v", id, attempt, !ok, err)
	}
	return nil
}

// groupWriter runs one statement for all the (id, attempt) writes that arrive together,
// grouped by internal/batch with taskcenter's default worker.batch_max and batch_wait, and
// answers each with its row's returned attempt (ok=false when the statement did not return
// its row).
type groupWriter struct {
	db   *sql.DB
	stmt string
	b    *batch.Batcher[groupWrite]
}

type groupWrite struct {
	id, attempt int64
	ok          bool
	err         error
	done        chan struct{}
}

func newGroupWriter(db *sql.DB, stmt string) *groupWriter {
	w := config.Default().Worker
	g := &groupWriter{db: db, stmt: stmt}
	g.b = batch.New(batch.Config{MaxBatch: w.BatchMax, MaxWait: w.BatchWait}, g.flush)
	return g
}

func (g *groupWriter) write(id, attempt int64) (int64, bool, error) {
	w := &groupWrite{id: id, attempt: attempt, done: make(chan struct{})}
	if err := g.b.Submit(context.Background(), w, w.done); err != nil {
		return 0, false, err
	}
	return w.attempt, w.ok, w.err
}

func (g *groupWriter) close() { g.b.Close() }

func (g *groupWriter) flush(ctx context.Context, ws []*groupWrite) {
	ids, attempts := make([]int64, len(ws)), make([]int32, len(ws))
	for i, w := range ws {
		ids[i], attempts[i] = w.id, int32(w.attempt)
	}
	got := make(map[int64]int64, len(ws))
	rows, err := g.db.QueryContext(ctx, g.stmt, ids, attempts)
	if err == nil {
		for rows.Next() {
			var id, attempt int64
			if err = rows.Scan(&id, &attempt); err != nil {
				break
			}
			got[id] = attempt
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	for _, w := range ws {
		w.attempt, w.ok = got[w.id]
		w.err = err
		close(w.done)
	}
}
