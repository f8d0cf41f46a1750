package storetest

import (
	"context"
	"crypto/rand"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/store"
)

// Postgres is one test's private schema.
type Postgres struct {
	// URL connects with search_path set to the schema.
	URL    string
	Schema string
	DB     *bun.DB
}

// NewPostgres creates a fresh schema with every migration applied, and drops it when the test
// ends.
func NewPostgres(t testing.TB) *Postgres {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := store.Open(testenv.DatabaseURL(), store.OpenOptions{MaxOpenConns: 2})
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	defer admin.Close()
	if err := store.Ping(ctx, admin); err != nil {
		t.Fatalf("storetest: Postgres at %s is not reachable (run `make services`): %v", redactURL(testenv.DatabaseURL()), err)
	}
	schema := "t_" + strings.ToLower(rand.Text()[:12])
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("storetest: create schema: %v", err)
	}
	u := withSearchPath(testenv.DatabaseURL(), schema)
	db, err := store.Open(u, store.OpenOptions{MaxOpenConns: 8})
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(func() {
		db.Close()
		a, err := store.Open(testenv.DatabaseURL(), store.OpenOptions{MaxOpenConns: 1})
		if err != nil {
			return
		}
		defer a.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := a.ExecContext(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Logf("storetest: drop schema %s: %v", schema, err)
		}
	})
	if _, err := store.Migrate(ctx, db); err != nil {
		t.Fatalf("storetest: migrate: %v", err)
	}
	return &Postgres{URL: u, Schema: schema, DB: db}
}

// withSearchPath returns dsn with its search_path and application_name set to schema.
func withSearchPath(dsn, schema string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	q := u.Query()
	q.Set("search_path", schema)
	q.Set("application_name", schema) // lets a test find (and kill) its own connections
	u.RawQuery = q.Encode()
	return u.String()
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable url)"
	}
	return u.Redacted()
}
