package store

import (
	"context"
	"embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/migrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// OpenOptions tunes the connection pool.
type OpenOptions struct {
	// MaxOpenConns caps the pool. Default 40.
	MaxOpenConns int
}

// Open connects to Postgres through pgx and wraps the pool in bun with the Postgres dialect.
// It does not fail when the server is down: the pool reconnects, and readiness reports it.
func Open(url string, opts OpenOptions) (*bun.DB, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	// The store's statements are fixed texts with bound parameters and ask for pgx's
	// statement cache explicitly (see cached in sql.go): each is prepared once per connection.
	// Anything else (migrations, tests' ad hoc SQL) runs unprepared, so the cache only ever
	// holds the store's statements.
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	cfg.StatementCacheCapacity = 256
	cfg.DescriptionCacheCapacity = 0
	sqldb := stdlib.OpenDB(*cfg)
	maxConns := opts.MaxOpenConns
	if maxConns <= 0 {
		maxConns = 40
	}
	sqldb.SetMaxOpenConns(maxConns)
	sqldb.SetMaxIdleConns(maxConns)
	sqldb.SetConnMaxIdleTime(5 * time.Minute)
	return bun.NewDB(sqldb, pgdialect.New(), bun.WithDiscardUnknownColumns()), nil
}

// migrationLockID is the advisory lock that serialises migrations across processes.
const migrationLockID = 0x7461736b63656e74 // "taskcent"

// Migrate applies every pending migration. Concurrent callers (several replicas starting at
// once) queue on a Postgres advisory lock instead of failing. It returns the names applied.
func Migrate(ctx context.Context, db *bun.DB) ([]string, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: connect: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock(?)", migrationLockID); err != nil {
		return nil, fmt.Errorf("migrate: lock: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(?)", migrationLockID) //nolint:errcheck // released with the session anyway

	migrations := migrate.NewMigrations()
	if err := migrations.Discover(migrationFiles); err != nil {
		return nil, fmt.Errorf("migrate: discover: %w", err)
	}
	m := migrate.NewMigrator(db, migrations, migrate.WithMarkAppliedOnSuccess(true))
	if err := m.Init(ctx); err != nil {
		return nil, fmt.Errorf("migrate: init: %w", err)
	}
	group, err := m.Migrate(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	var names []string
	for _, mg := range group.Migrations {
		names = append(names, mg.Name)
	}
	return names, nil
}

// Ping reports whether Postgres answers within the context's deadline.
func Ping(ctx context.Context, db *bun.DB) error {
	return db.DB.QueryRowContext(ctx, "SELECT 1").Scan(new(int))
}
