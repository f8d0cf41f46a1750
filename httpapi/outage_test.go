package httpapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/taskcenter/taskcenter/httpapi/problem"
)

// countingDep is a dependency tracker that counts what it is fed.
type countingDep struct{ failed []error }

func (d *countingDep) Down() bool     { return len(d.failed) > 0 }
func (d *countingDep) Fail(err error) { d.failed = append(d.failed, err) }
func (d *countingDep) Suppress() bool { return false }

// Only Postgres's own errors, read by type, feed the Postgres outage tracker; another part's
// 503 (a session store, an identity provider) is logged as what it is.
func TestOnlyPostgresErrorsFeedThePostgresOutage(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	dep := &countingDep{}
	s := &Server{Deps: Deps{Postgres: dep, Logger: slog.New(slog.NewTextHandler(&logs, nil))}}
	answer := func(err error) int {
		rec := httptest.NewRecorder()
		s.writeError(rec, httptest.NewRequest("GET", "/api/v1/tasks", nil), err)
		return rec.Code
	}
	other := problem.New(http.StatusServiceUnavailable, "unavailable", "the session store is unavailable; try again shortly")
	if code := answer(other); code != http.StatusServiceUnavailable || len(dep.failed) != 0 {
		t.Fatalf("another part's 503: %d, tracker fed %d times", code, len(dep.failed))
	}
	if !strings.Contains(logs.String(), "request failed") {
		t.Fatalf("another part's 503 was not logged: %s", logs.String())
	}
	down := &pgconn.ConnectError{}
	if code := answer(errors.Join(io.ErrUnexpectedEOF, down)); code != http.StatusServiceUnavailable || len(dep.failed) != 1 {
		t.Fatalf("postgres unreachable: %d, tracker fed %d times", code, len(dep.failed))
	}
}

// A statement that runs out of time against a Postgres that is up (here: the task's row is
// held by another transaction past the query timeout) answers 503 database_timeout saying it
// timed out, with Retry-After, and is logged as a failed request with its request id: it is
// not an outage, so it neither feeds the outage tracker nor loses its log line to it.
func TestAQueryTimeoutIsNotADatabaseOutage(t *testing.T) {
	t.Parallel()
	dep := &syncDep{}
	e := newAPI(t, func(d *Deps) { d.QueryTimeout = 300 * time.Millisecond; d.Postgres = dep })
	ctx := context.Background()
	res := e.callJSON("POST", "/api/v1/exports", aliceToken, map[string]any{"type": "customers"})
	if res.Code != http.StatusAccepted {
		t.Fatalf("submit: %d %s", res.Code, res.Body)
	}
	task := decodeAs[SubmitView](t, res.Body.Bytes()).Task

	tx, err := e.pg.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck
	if _, err := tx.ExecContext(ctx, `SELECT id FROM tasks WHERE task_no = ? FOR UPDATE`, task.ID); err != nil {
		t.Fatal(err)
	}
	res = e.call("POST", "/api/v1/tasks/"+task.ID+"/cancel", aliceToken, nil)
	pr := problemOf(t, res)
	if res.Code != http.StatusServiceUnavailable || pr.Code != "database_timeout" || !strings.Contains(pr.Detail, "did not answer in time") ||
		res.Header().Get("Retry-After") == "" {
		t.Fatalf("cancel of a held row: %d %v %+v", res.Code, res.Header(), pr)
	}
	if n := dep.fed(); n != 0 {
		t.Fatalf("the timeout fed the outage tracker %d times", n)
	}
	var logged bool
	for _, line := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(line, `"msg":"request failed"`) && strings.Contains(line, `"request_id":"`+pr.RequestID+`"`) &&
			strings.Contains(line, `"level":"ERROR"`) {
			logged = true
		}
	}
	if pr.RequestID == "" || !logged {
		t.Fatalf("no error line for request %q:\n%s", pr.RequestID, e.logs.String())
	}
	// Once the row is free the same cancel goes through: nothing was marked down.
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if res := e.call("POST", "/api/v1/tasks/"+task.ID+"/cancel", aliceToken, nil); res.Code != http.StatusOK {
		t.Fatalf("cancel once the row is free: %d %s", res.Code, res.Body)
	}
}

// syncDep is countingDep for a server that runs requests on its own goroutines.
type syncDep struct {
	mu     sync.Mutex
	failed []error
}

func (d *syncDep) Down() bool     { return d.fed() > 0 }
func (d *syncDep) Suppress() bool { return false }
func (d *syncDep) Fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failed = append(d.failed, err)
}

func (d *syncDep) fed() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.failed)
}
