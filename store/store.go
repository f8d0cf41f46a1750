// Package store is taskcenter's source of truth in Postgres: the task rows, their runs, logs
// and failed items, and the customers the import writes. Every task state transition is one
// conditional UPDATE in a tasks_*.go file; nothing else in the code base changes status. Each
// names the statuses it may leave, and running attempts are fenced by their lease
// (`AND attempt = $n`), so a transition either happens exactly once or changes nothing. The
// attempt's task_runs row and a task_logs line are written in the same statement.
//
// Where each kind of record lives:
//   - tasks_create.go: submit; tasks_query.go: reads of tasks, their runs and logs;
//     tasks_user.go: a user's actions on a task (cancel, retry, run now); tasks_items.go: an
//     import's rejected rows.
//   - tasks_claim.go: a worker's claim and takeover; tasks_run.go: a running attempt's
//     heartbeats, progress, batches and log lines; tasks_end.go: the endings of an attempt.
//   - alerts.go: failure alerts and alert conditions; maintenance.go: the cleanup's reads and
//     bookkeeping.
//   - events.go: the task_events outbox; webhooks.go: subscriptions; deliveries.go: the
//     fan-out and the deliveries.
//   - schedules.go, tokens.go, audit.go, uploads.go; archive.go: the archive and the stats.
//   - customers.go and reports.go: what the import writes and the exports and reports read.
//
// task.go holds the task models, db.go opens and migrates the database, sql.go runs statements.
package store

import "github.com/uptrace/bun"

// Store reads and writes tasks.
type Store struct {
	db *bun.DB
}

// New returns a Store over db.
func New(db *bun.DB) *Store { return &Store{db: db} }
