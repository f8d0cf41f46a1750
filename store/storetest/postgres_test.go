package storetest

import (
	"context"
	"crypto/rand"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/store"
)

func TestNewPostgresGivesEachTestItsOwnMigratedTables(t *testing.T) {
	t.Parallel()
	files, err := fs.Glob(store.Migrations(), "migrations/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("migration files: %v %v", files, err)
	}
	a, b := NewPostgres(t), NewPostgres(t)
	for _, pg := range []*Postgres{a, b} {
		if got := Count(t, pg.DB, "SELECT count(*) FROM bun_migrations"); got != len(files) {
			t.Errorf("%s: %d migrations applied, want %d", pg.Schema, got, len(files))
		}
		var schema, app string
		if err := pg.DB.QueryRowContext(context.Background(), "SELECT current_schema(), current_setting('application_name')").Scan(&schema, &app); err != nil {
			t.Fatal(err)
		}
		if schema != pg.Schema || app != pg.Schema {
			t.Errorf("connected with schema %q and application_name %q, want both %q", schema, app, pg.Schema)
		}
	}
	Exec(t, a.DB, "INSERT INTO customers (code, name, phone, city) VALUES ('C1', 'One', '13800000001', '')")
	if n := Count(t, b.DB, "SELECT count(*) FROM customers"); n != 0 {
		t.Errorf("another test's database holds %d customers, want 0", n)
	}
	if n := Count(t, a.DB, "SELECT count(*) FROM customers"); n != 1 {
		t.Errorf("the test's own database holds %d customers, want 1", n)
	}
}

// Test databases left behind are dropped, oldest first, once too many have piled up; one
// made in the last ten minutes stays, as does any database not named as a test's.
func TestLeftDatabasesArePrunedOldestFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin, err := store.Open(testenv.DatabaseURL(), store.OpenOptions{MaxOpenConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	suffix := strings.ToLower(rand.Text()[:8])
	old, recent := databasePrefix+"10_"+suffix, fmt.Sprintf("%s%x_%s", databasePrefix, time.Now().Unix(), suffix)
	other := "tcother_" + suffix
	for _, name := range []string{old, recent, other} {
		if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name) }) //nolint:errcheck
	}
	exists := func(name string) bool {
		ok, err := databaseExists(ctx, admin, name)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	pruneDatabases(ctx, admin, 1<<20) // not too many yet
	if !exists(old) {
		t.Fatal("a test database was dropped before too many piled up")
	}
	pruneDatabases(ctx, admin, 0)
	if exists(old) || !exists(recent) || !exists(other) {
		t.Fatalf("after pruning: old %v (want dropped), recent %v, other %v (want kept)", exists(old), exists(recent), exists(other))
	}
}

// BenchmarkNewPostgres measures a test's database set-up.
func BenchmarkNewPostgres(b *testing.B) {
	for b.Loop() {
		NewPostgres(b)
	}
}
