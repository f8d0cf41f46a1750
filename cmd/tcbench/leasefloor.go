package main

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/taskcenter/taskcenter/store"
)

// The lease floor is the least Postgres work any design that fences its workers behind asynq
// must do per task: a claim (PENDING → RUNNING, attempt + 1) and an ending fenced by that
// attempt (RUNNING → SUCCESS), each grouped with the concurrent ones into one statement and one
// commit (at most 128 rows, waiting at most 2 ms for company: taskcenter's defaults), on a row
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

// groupWriter runs one statement for all the (id, attempt) writes that arrive together, as
// taskcenter's batchers do, and answers each with its row's returned attempt (ok=false when the
// statement did not return its row).
type groupWriter struct {
	db   *sql.DB
	stmt string
	in   chan groupWrite
	done chan struct{}
}

type groupWrite struct {
	id, attempt int64
	answer      chan groupAnswer
	at          time.Time
}

type groupAnswer struct {
	attempt int64
	ok      bool
	err     error
}

const (
	groupMax  = 128
	groupWait = 2 * time.Millisecond
)

func newGroupWriter(db *sql.DB, stmt string) *groupWriter {
	g := &groupWriter{db: db, stmt: stmt, in: make(chan groupWrite, 4*groupMax), done: make(chan struct{})}
	go g.loop()
	return g
}

func (g *groupWriter) write(id, attempt int64) (int64, bool, error) {
	w := groupWrite{id: id, attempt: attempt, answer: make(chan groupAnswer, 1), at: time.Now()}
	g.in <- w
	a := <-w.answer
	return a.attempt, a.ok, a.err
}

func (g *groupWriter) close() { close(g.in); <-g.done }

func (g *groupWriter) loop() {
	defer close(g.done)
	for first := range g.in {
		batch := []groupWrite{first}
		deadline := time.NewTimer(time.Until(first.at.Add(groupWait)))
	collect:
		for len(batch) < groupMax {
			select {
			case w, ok := <-g.in:
				if !ok {
					break collect
				}
				batch = append(batch, w)
			case <-deadline.C:
				break collect
			}
		}
		deadline.Stop()
		g.flush(batch)
	}
}

func (g *groupWriter) flush(batch []groupWrite) {
	ids, attempts := make([]int64, len(batch)), make([]int32, len(batch))
	for i, w := range batch {
		ids[i], attempts[i] = w.id, int32(w.attempt)
	}
	got := make(map[int64]int64, len(batch))
	rows, err := g.db.QueryContext(context.Background(), g.stmt, ids, attempts)
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
	for _, w := range batch {
		attempt, ok := got[w.id]
		w.answer <- groupAnswer{attempt: attempt, ok: ok, err: err}
	}
}
