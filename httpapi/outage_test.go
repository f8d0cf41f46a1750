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
	"testing"

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
