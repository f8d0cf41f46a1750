package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"strconv"
	"strings"
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
	// bun formats every argument into the SQL text itself, so no two of its statements are
	// alike: caching them would keep hundreds of unique (some 100 KB) statements per
	// connection, and as many prepared statements in Postgres. So by default nothing is
	// prepared. The handful of fixed hot-path statements ask for the cache explicitly (see
	// prepared); the cache only ever holds those.
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	cfg.StatementCacheCapacity = 64
	cfg.DescriptionCacheCapacity = 0
	sqldb := stdlib.OpenDB(*cfg)
	maxConns := opts.MaxOpenConns
	if maxConns <= 0 {
		maxConns = 40
	}
	sqldb.SetMaxOpenConns(maxConns)
	sqldb.SetMaxIdleConns(maxConns)
	sqldb.SetConnMaxIdleTime(5 * time.Minute)
	return bun.NewDB(sqldb, pgdialect.New()), nil
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
	var one int
	return db.NewRaw("SELECT 1").Scan(ctx, &one)
}

// prepared runs query — written with bun's ? and ?N placeholders, like the rest of the
// store — as a statement Postgres prepares once per connection and then reuses, through
// pgx's statement cache and $n parameters. The per-task hot path (submit, claim, heartbeat,
// terminal writes) goes through it: planning those multi-step CTEs on every call cost more
// Postgres CPU than running them. Everything else is formatted by bun and not cached (see
// Open). dest is a model or scalar pointer for the first row, or nil; a missing row is
// sql.ErrNoRows.
func (s *Store) prepared(ctx context.Context, dest any, query string, args ...any) error {
	rows, err := s.db.DB.QueryContext(ctx, s.dollars(query), append([]any{pgx.QueryExecModeCacheStatement}, args...)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if dest == nil {
		for rows.Next() {
		}
		return rows.Err()
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if err := s.db.ScanRow(ctx, rows, dest); err != nil {
		return err
	}
	for rows.Next() {
	}
	return rows.Err()
}

// dollars rewrites ? and ?N placeholders as $n, once per query text.
func (s *Store) dollars(query string) string {
	if q, ok := s.rewritten.Load(query); ok {
		return q.(string)
	}
	var b strings.Builder
	next := 1
	for i := 0; i < len(query); i++ {
		if query[i] != '?' {
			b.WriteByte(query[i])
			continue
		}
		j := i + 1
		for j < len(query) && query[j] >= '0' && query[j] <= '9' {
			j++
		}
		if j > i+1 {
			n, _ := strconv.Atoi(query[i+1 : j])
			fmt.Fprintf(&b, "$%d", n+1)
			i = j - 1
			continue
		}
		fmt.Fprintf(&b, "$%d", next)
		next++
	}
	s.rewritten.Store(query, b.String())
	return b.String()
}
