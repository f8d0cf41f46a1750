package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/migrate"

	"github.com/taskcenter/taskcenter/internal/config"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations is the set of SQL files Migrate applies, under migrations/: test support keys a
// migrated template database by their contents.
func Migrations() fs.FS { return migrationFiles }

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
	// IdleInTransactionTimeout makes Postgres end a session that sits idle inside a
	// transaction this long (idle_in_transaction_session_timeout): a process frozen mid-batch
	// (SIGSTOP, a VM pause, a partition that keeps the TCP connection open) then releases the
	// row locks it holds, and a takeover is not held hostage by it. 0 leaves the server's
	// setting. Read-only snapshots opt out (see BeginSnapshot): they lock no row.
	IdleInTransactionTimeout time.Duration
	// LockTimeout bounds how long any statement waits for a lock (lock_timeout). 0 leaves the
	// server's setting.
	LockTimeout time.Duration
}

// sessionLimits are the Postgres settings that bound how long a session may hold or wait
// for locks, as name → value in milliseconds.
func (o OpenOptions) sessionLimits() map[string]string {
	limits := map[string]string{}
	if o.IdleInTransactionTimeout > 0 {
		limits["idle_in_transaction_session_timeout"] = fmt.Sprint(o.IdleInTransactionTimeout.Milliseconds())
	}
	if o.LockTimeout > 0 {
		limits["lock_timeout"] = fmt.Sprint(o.LockTimeout.Milliseconds())
	}
	return limits
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
	// statement cache explicitly (see pg.Cached): each is prepared once per connection.
	// Anything else (migrations, tests' ad hoc SQL) runs unprepared, so the cache only ever
	// holds the store's statements.
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	cfg.StatementCacheCapacity = 256
	cfg.DescriptionCacheCapacity = 0
	limits := opts.sessionLimits()
	var sqldb *sql.DB
	if opts.Pooler {
		// A transaction-mode pooler hands each transaction whichever server session is free,
		// and drops the startup parameters it does not know: the limits are set afresh, for
		// the transaction only, at the start of each one.
		cfg.StatementCacheCapacity = 0
		sqldb = sql.OpenDB(unpreparedConnector{Connector: stdlib.GetConnector(*cfg), limits: limits})
	} else {
		for name, v := range limits {
			if cfg.RuntimeParams == nil {
				cfg.RuntimeParams = map[string]string{}
			}
			cfg.RuntimeParams[name] = v
		}
		sqldb = stdlib.OpenDB(*cfg)
	}
	maxConns := opts.MaxOpenConns
	if maxConns <= 0 {
		maxConns = config.Default().Database.MaxOpenConns
	}
	sqldb.SetMaxOpenConns(maxConns)
	sqldb.SetMaxIdleConns(maxConns)
	sqldb.SetConnMaxIdleTime(5 * time.Minute)
	return bun.NewDB(sqldb, pgdialect.New(), bun.WithDiscardUnknownColumns()), nil
}

// unpreparedConnector hands out connections that run every statement unnamed: the store asks
// for pgx's statement cache (see pg.Cached), which a transaction-mode pooler cannot keep.
type unpreparedConnector struct {
	driver.Connector
	limits map[string]string // session limits set at the start of each transaction
}

func (c unpreparedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &unpreparedConn{Conn: conn.(*stdlib.Conn), limits: c.limits}, nil
}

// unpreparedConn is a pgx connection whose statements never use the statement cache.
type unpreparedConn struct {
	*stdlib.Conn
	limits map[string]string
}

// BeginTx starts a transaction and sets the session limits for it alone (set_config with
// is_local): behind a pooler there is no session to set them on once, so each transaction
// pays one more round trip.
func (c *unpreparedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.Conn.BeginTx(ctx, opts)
	if err != nil || len(c.limits) == 0 {
		return tx, err
	}
	var args []driver.NamedValue
	var sets []string
	for name, v := range c.limits {
		args = append(args, driver.NamedValue{Ordinal: len(args) + 1, Value: name}, driver.NamedValue{Ordinal: len(args) + 2, Value: v})
		sets = append(sets, fmt.Sprintf("set_config($%d, $%d, true)", len(args)-1, len(args)))
	}
	if _, err := c.Conn.ExecContext(ctx, "SELECT "+strings.Join(sets, ", "), unprepared(args)); err != nil {
		_ = tx.Rollback()
		return nil, fmt.Errorf("set session limits: %w", err)
	}
	return tx, nil
}

// CheckSessionLimits reads the session limits back inside a transaction, as every statement
// of the pool sees them, and reports a limit the server did not take (a pooler or a proxy
// that drops startup parameters would otherwise leave a frozen process able to hold task
// rows without limit, silently).
func CheckSessionLimits(ctx context.Context, db *bun.DB, opts OpenOptions) error {
	want := opts.sessionLimits()
	if len(want) == 0 {
		return nil
	}
	return db.RunInTx(ctx, &sql.TxOptions{ReadOnly: true}, func(ctx context.Context, tx bun.Tx) error {
		for name, v := range want {
			var got string
			// The setting in milliseconds, whatever unit the server shows it in.
			if err := tx.Tx.QueryRowContext(ctx, "SELECT setting FROM pg_settings WHERE name = $1", name).Scan(&got); err != nil {
				return fmt.Errorf("read %s: %w", name, err)
			}
			if got != v {
				return fmt.Errorf("the database sessions run with %s = %sms, want %sms: a connection pooler or proxy dropped the setting", name, got, v)
			}
		}
		return nil
	})
}

// BeginSnapshot begins a read-only, repeatable-read transaction: every read in it (an
// export's count and each of its pages, a report's sheets) sees the same rows. The
// idle-in-transaction limit is lifted for it: a snapshot locks no row, so a pause between
// reads holds nobody up and must not cost the snapshot. The caller rolls it back.
func BeginSnapshot(ctx context.Context, db *bun.DB) (bun.Tx, error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return bun.Tx{}, err
	}
	if _, err := tx.ExecContext(ctx, "SET LOCAL idle_in_transaction_session_timeout = 0"); err != nil {
		tx.Rollback() //nolint:errcheck // read-only
		return bun.Tx{}, err
	}
	return tx, nil
}

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
