package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
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
	// Pooler is true when the URL points at a connection pooler in transaction mode
	// (PgBouncer before 1.21): a server connection is a client's only for one transaction, so
	// named prepared statements cannot be kept. Every statement then goes as an unnamed one
	// (the extended protocol's parse-bind-execute in one round trip), still with bound
	// parameters. Default false: each statement is prepared once per connection.
	Pooler bool
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
	var sqldb *sql.DB
	if opts.Pooler {
		cfg.StatementCacheCapacity = 0
		sqldb = sql.OpenDB(unpreparedConnector{stdlib.GetConnector(*cfg)})
	} else {
		sqldb = stdlib.OpenDB(*cfg)
	}
	maxConns := opts.MaxOpenConns
	if maxConns <= 0 {
		maxConns = 40
	}
	sqldb.SetMaxOpenConns(maxConns)
	sqldb.SetMaxIdleConns(maxConns)
	sqldb.SetConnMaxIdleTime(5 * time.Minute)
	return bun.NewDB(sqldb, pgdialect.New(), bun.WithDiscardUnknownColumns()), nil
}

// unpreparedConnector hands out connections that run every statement unnamed: the store asks
// for pgx's statement cache (see cached), which a transaction-mode pooler cannot keep.
type unpreparedConnector struct{ driver.Connector }

func (c unpreparedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &unpreparedConn{conn.(*stdlib.Conn)}, nil
}

// unpreparedConn is a pgx connection whose statements never use the statement cache.
type unpreparedConn struct{ *stdlib.Conn }

func unprepared(args []driver.NamedValue) []driver.NamedValue {
	for i, a := range args {
		if m, ok := a.Value.(pgx.QueryExecMode); ok && m == pgx.QueryExecModeCacheStatement {
			args[i].Value = pgx.QueryExecModeExec
		}
	}
	return args
}

func (c *unpreparedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.QueryContext(ctx, query, unprepared(args))
}

func (c *unpreparedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return c.Conn.ExecContext(ctx, query, unprepared(args))
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
