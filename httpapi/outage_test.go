package httpapi

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
