package config

import (
	"cmp"
	"time"
)

// Database configures Postgres.
type Database struct {
	// URL is a postgres:// connection string.
	// Default "postgres://taskcenter:taskcenter@127.0.0.1:5432/taskcenter?sslmode=disable".
	URL string `yaml:"url"`
	// MaxOpenConns caps the connection pool. Default 40.
	MaxOpenConns int `yaml:"max_open_conns"`
	// QueryTimeout bounds a single API query. Default 5s.
	QueryTimeout time.Duration `yaml:"query_timeout"`
	// Pooler names a connection pooler in transaction mode between taskcenter and Postgres:
	// "pgbouncer" runs every statement unprepared (named prepared statements do not survive
	// transaction pooling before PgBouncer 1.21). Empty: a direct connection. Default "".
	Pooler string `yaml:"pooler"`
	// MigrateURL is a direct connection (not through the pooler) for schema migrations, which
	// hold a session lock while they run. Default: URL.
	MigrateURL string `yaml:"migrate_url"`
	// IdleInTransactionTimeout is how long Postgres lets a session of this process sit idle
	// inside a transaction before it ends the session (idle_in_transaction_session_timeout):
	// a process frozen mid-batch (SIGSTOP, a VM pause, heavy swapping, a partition that keeps
	// its TCP connection open) releases the task row it locked, so another worker can take the
	// task over. Must leave a heartbeat interval before worker.takeover_after. Default a third
	// of worker.takeover_after (10s).
	IdleInTransactionTimeout time.Duration `yaml:"idle_in_transaction_timeout"`
	// LockTimeout bounds how long a statement waits for a row another session holds
	// (lock_timeout), so no wait outlasts a takeover. Must be below worker.takeover_after.
	// Default a third of worker.takeover_after (10s).
	LockTimeout time.Duration `yaml:"lock_timeout"`
}

// defaultDatabase is the development database; the session limits follow the worker (see
// fillDefaults).
func defaultDatabase() Database {
	return Database{
		URL:          "postgres://taskcenter:taskcenter@127.0.0.1:5432/taskcenter?sslmode=disable",
		MaxOpenConns: 40,
		QueryTimeout: 5 * time.Second,
	}
}

// validate checks the database section, and its session limits against the worker's timing
// rules.
func (d Database) validate(w Worker, bad func(string, ...any)) {
	if !isURL(d.URL, "postgres", "postgresql") {
		bad("database.url (TASKCENTER_DATABASE_URL) must be a postgres://user:password@host:port/dbname URL")
	}
	if d.Pooler != "" && d.Pooler != "pgbouncer" {
		bad("database.pooler must be empty (direct) or pgbouncer, got %q", d.Pooler)
	}
	if d.MigrateURL != "" {
		if !isURL(d.MigrateURL, "postgres", "postgresql") {
			bad("database.migrate_url (TASKCENTER_DATABASE_MIGRATE_URL) must be a postgres:// URL")
		}
	}
	if d.MaxOpenConns < 2 {
		bad("database.max_open_conns must be at least 2, got %d", d.MaxOpenConns)
	}
	if d.IdleInTransactionTimeout <= 0 || d.IdleInTransactionTimeout+w.HeartbeatInterval >= w.TakeoverAfter {
		bad("database.idle_in_transaction_timeout (%s) must be positive and end a frozen transaction at least one worker.heartbeat_interval (%s) before worker.takeover_after (%s), or a frozen worker blocks the takeover",
			d.IdleInTransactionTimeout, w.HeartbeatInterval, w.TakeoverAfter)
	}
	if d.LockTimeout <= 0 || d.LockTimeout >= w.TakeoverAfter {
		bad("database.lock_timeout (%s) must be positive and below worker.takeover_after (%s)", d.LockTimeout, w.TakeoverAfter)
	}
}

// fillDefaults derives the limits that follow from the worker's takeover window.
func (d *Database) fillDefaults(w Worker) {
	d.IdleInTransactionTimeout = cmp.Or(d.IdleInTransactionTimeout, w.TakeoverAfter/3)
	d.LockTimeout = cmp.Or(d.LockTimeout, w.TakeoverAfter/3)
}
