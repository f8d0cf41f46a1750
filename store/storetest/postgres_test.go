package storetest

import (
	"context"
	"io/fs"
	"testing"

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

// BenchmarkNewPostgres measures a test's database set-up (its drop runs at the end).
func BenchmarkNewPostgres(b *testing.B) {
	for b.Loop() {
		NewPostgres(b)
	}
}
