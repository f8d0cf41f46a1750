package main

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/hibiken/asynq"

	"github.com/taskcenter/taskcenter/internal/batch"
	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/store"
)

// The lease floor is the least Postgres work any design that fences its workers behind asynq
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
	TRUNCATE lease_floor`

// leaseFloor holds the grouped claim and end writers of one drain.
type leaseFloor struct {
	claims, ends *groupWriter
}

// openLeaseFloor creates the table with n PENDING rows (ids 1..n) in the database at url.
func openLeaseFloor(ctx context.Context, url string, n int) (*leaseFloor, func(), error) {
	db, err := store.Open(url, store.OpenOptions{MaxOpenConns: 4})
	if err != nil {
		return nil, nil, err
	}
	for _, stmt := range strings.Split(leaseFloorSchema, ";") {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			db.Close()
			return nil, nil, fmt.Errorf("lease floor table: %w", err)
		}
	}
	if _, err := db.DB.ExecContext(ctx, `INSERT INTO lease_floor (id, status) SELECT i, 'PENDING' FROM generate_series(1, $1::bigint) i`, n); err != nil {
		db.Close()
		return nil, nil, err
	}
	f := &leaseFloor{
		claims: newGroupWriter(db.DB, `
			UPDATE lease_floor f SET status = 'RUNNING', attempt = f.attempt + 1, worker = 'floor', heartbeat_at = now()
			FROM unnest($1::bigint[], $2::int[]) AS v(id, attempt)
			WHERE f.id = v.id AND f.status = 'PENDING'
			RETURNING f.id, f.attempt`),
		ends: newGroupWriter(db.DB, `
			UPDATE lease_floor f SET status = 'SUCCESS', finished_at = now()
			FROM unnest($1::bigint[], $2::int[]) AS v(id, attempt)
			WHERE f.id = v.id AND f.attempt = v.attempt AND f.status = 'RUNNING'
			RETURNING f.id, f.attempt`),
	}
	return f, func() { f.claims.close(); f.ends.close(); db.Close() }, nil
}

// run is the handler's part: claim the job's row, (do nothing), end the attempt it claimed.
func (f *leaseFloor) run(ctx context.Context) error {
	jobID, _ := asynq.GetTaskID(ctx)
	id, err := strconv.ParseInt(strings.TrimPrefix(jobID, "noop-"), 10, 64)
	if err != nil {
		return fmt.Errorf("job %q: %w", jobID, err)
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
