package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/internal/auth"
	"github.com/taskcenter/taskcenter/internal/storage"
)

// countingDep is a dependency tracker that counts what it is fed and asked.
type countingDep struct {
	failed []error
	asked  int
}

func (d *countingDep) Down() bool     { return len(d.failed) > 0 }
func (d *countingDep) Fail(err error) { d.failed = append(d.failed, err) }
func (d *countingDep) Suppress() bool { d.asked++; return false }

// Each dependency's 503 is its own: told apart by the error's type (an identity provider's or
// an object store's network error is no Postgres outage, though Postgres's test takes any
// network error for its own), answered with a code and a detail naming the part, logged as
// that part's, and counted by that part's tracker only — Postgres's here, the identity
// provider's and the object store's by their clients, which is why they are only asked
// whether to hold the line back. Another part's 503 (a session store's problem) is logged as
// what it is and feeds no tracker.
func TestEachDependencysOutageIsItsOwn(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	for _, c := range []struct {
		name         string
		err          error
		code, detail string
		logged       string
		fed, asked   string // which tracker is fed, which is asked to hold the line back
	}{
		{"postgres", errors.Join(io.ErrUnexpectedEOF, &pgconn.ConnectError{}), "database_unavailable", "the task database",
			"request failed: postgres unavailable", "postgres", "postgres"},
		{"identity provider", fmt.Errorf("%w: discovery at http://127.0.0.1:18500: %w", auth.ErrProviderUnavailable, refused),
			"identity_provider_unavailable", "the identity provider cannot be reached", "request failed: identity_provider unavailable", "", "identity_provider"},
		{"object store", fmt.Errorf("storage: stat results/x.xlsx: %w at 127.0.0.1:7070: %w", storage.ErrUnavailable,
			&url.Error{Op: "Head", URL: "http://127.0.0.1:7070/taskcenter/results/x.xlsx", Err: refused}),
			"object_store_unavailable", "the file store (S3)", "request failed: object_store unavailable", "", "object_store"},
		{"a session store's problem", problem.New(http.StatusServiceUnavailable, "unavailable", "the session store is unavailable; try again shortly"),
			"unavailable", "the session store", `"msg":"request failed"`, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			deps := map[string]*countingDep{"postgres": {}, "identity_provider": {}, "object_store": {}}
			s := &Server{Deps: Deps{Postgres: deps["postgres"], IdentityProvider: deps["identity_provider"], ObjectStore: deps["object_store"],
				Logger: slog.New(slog.NewJSONHandler(&logs, nil))}}
			rec := httptest.NewRecorder()
			s.writeError(rec, httptest.NewRequest("GET", "/api/v1/tasks", nil), c.err)
			var p problem.Problem
			json.Unmarshal(rec.Body.Bytes(), &p) //nolint:errcheck
			if rec.Code != http.StatusServiceUnavailable || p.Code != c.code || !strings.Contains(p.Detail, c.detail) {
				t.Fatalf("answer %d %s %q, want 503 %s naming %q", rec.Code, p.Code, p.Detail, c.code, c.detail)
			}
			if c.code != "unavailable" && rec.Header().Get("Retry-After") == "" {
				t.Fatal("no Retry-After")
			}
			if !strings.Contains(logs.String(), c.logged) {
				t.Fatalf("log lacks %q: %s", c.logged, logs.String())
			}
			for name, d := range deps {
				if fed := len(d.failed) > 0; fed != (name == c.fed) {
					t.Errorf("tracker %s fed %d times", name, len(d.failed))
				}
				if asked := d.asked > 0; asked != (name == c.asked) {
					t.Errorf("tracker %s asked %d times", name, d.asked)
				}
			}
		})
	}
}

// An error with no dependency in it is the server's own: 500, whatever net error it holds
// once a dependency's sentinel says whose it is — and the request's own cancellation is
// neither.
func TestAStorageRefusalIsNoOutage(t *testing.T) {
	t.Parallel()
	if p := toProblem(fmt.Errorf("storage: stat x: %w", storage.ErrNotExist)); p.Status == http.StatusServiceUnavailable {
		t.Fatalf("a missing object answered %d %s", p.Status, p.Code)
	}
	if p := toProblem(context.Canceled); p.Status == http.StatusServiceUnavailable {
		t.Fatalf("a cancelled request answered %d %s", p.Status, p.Code)
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
	res := untilInTime(func() *httptest.ResponseRecorder {
		return e.callJSON("POST", "/api/v1/exports", aliceToken, map[string]any{"type": "customers"})
	})
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
	if res := untilInTime(func() *httptest.ResponseRecorder {
		return e.call("POST", "/api/v1/tasks/"+task.ID+"/cancel", aliceToken, nil)
	}); res.Code != http.StatusOK {
		t.Fatalf("cancel once the row is free: %d %s", res.Code, res.Body)
	}
}

// untilInTime makes a request again, as a client told to retry would, while it answers 503
// database_timeout: with a query timeout this short, a loaded machine can time out a request
// that holds no lock (for a minute at most).
func untilInTime(call func() *httptest.ResponseRecorder) *httptest.ResponseRecorder {
	deadline := time.Now().Add(time.Minute)
	for {
		res := call()
		var pr struct{ Code string }
		if res.Code != http.StatusServiceUnavailable || json.Unmarshal(res.Body.Bytes(), &pr) != nil || pr.Code != "database_timeout" ||
			time.Now().After(deadline) {
			return res
		}
		time.Sleep(100 * time.Millisecond)
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
