// Package store is taskcenter's source of truth in Postgres: the task rows, their runs, logs
// and failed items, their events, and every other kind of record, each in the file or the
// subpackage named below. Every task state transition is one conditional UPDATE in a
// tasks_*.go file; nothing else in the code base changes status. Each names the statuses it
// may leave, and running attempts are fenced by their lease (`AND attempt = $n`), so a
// transition either happens exactly once or changes nothing. The attempt's task_runs row and
// a task_logs line are written in the same statement.
//
// Store embeds one type per kind of record, all over the same pool; a caller writes
// st.CreateSubscription(...) wherever the type lives. Here:
//   - Tasks: submit (tasks_create.go), reads of tasks, their runs and logs (tasks_query.go),
//     a user's actions on a task: cancel, retry, run now (tasks_user.go), and an import's
//     rejected rows (tasks_items.go).
//   - Attempts: a worker's claim and takeover (tasks_claim.go), a running attempt's
//     heartbeats, progress, batches and log lines (tasks_run.go), and the endings of an
//     attempt (tasks_end.go).
//   - Alerts: failure alerts and alert conditions (alerts.go).
//   - Maintenance: the cleanup's reads and bookkeeping (maintenance.go).
//   - Outbox: the task_events outbox (events.go), and its fan-out into webhook deliveries
//     (fanout.go), which reads the task rows to build each body.
//   - Archive: the archive, and the daily aggregates it folds finished tasks into (archive.go).
//
// In subpackages, each with its statements, its model and its tests:
//   - store/webhooks: the webhook subscriptions and their deliveries (*webhooks.Webhooks).
//   - store/schedules: users' recurring tasks and their fires (*schedules.Schedules).
//   - store/tokens: the API tokens (*tokens.Tokens).
//   - store/uploads: accepted uploads and their sweep, and the column mappings owners saved
//     for their files' header sets (*uploads.Uploads).
//   - store/stats: the statistics of finished tasks, live and archived (read by Archive.Stats).
//   - store/audit: the audit trail (*audit.Trail), and the audit.Origin a request's context
//     carries, with which the transitions write their audit row in the same statement.
//   - store/customers: the customers table, which is not embedded: the import writes it and
//     the export and the report read it inside their own transactions, through functions.
//
// task.go holds the task models, db.go opens and migrates the database (the migrations of
// every table are in migrations/), columns.go lists the models' columns. Every statement runs
// through store/pg, the package below all of these: the statement runner, the WHERE builder,
// error classification (pg.IsUnavailable, pg.IsTimeout) and Scope.
package store

import (
	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/store/audit"
	"github.com/taskcenter/taskcenter/store/schedules"
	"github.com/taskcenter/taskcenter/store/tokens"
	"github.com/taskcenter/taskcenter/store/uploads"
	"github.com/taskcenter/taskcenter/store/webhooks"
)

// Store is the database as the rest of taskcenter sees it: one value that embeds a type per
// kind of record, each over the same pool, so a caller writes st.CreateSubscription(...) and
// the statement lives with its entity.
type Store struct {
	*Tasks
	*Attempts
	*Alerts
	*Maintenance
	*Outbox
	*webhooks.Webhooks
	*schedules.Schedules
	*tokens.Tokens
	*audit.Trail
	*uploads.Uploads
	*Archive
}

// New returns a Store over db.
func New(db *bun.DB) *Store {
	return &Store{
		Tasks: &Tasks{db: db}, Attempts: &Attempts{db: db}, Alerts: &Alerts{db: db}, Maintenance: &Maintenance{db: db},
		Outbox: &Outbox{db: db}, Webhooks: webhooks.New(db), Schedules: schedules.New(db), Tokens: tokens.New(db),
		Trail: audit.New(db), Uploads: uploads.New(db), Archive: &Archive{db: db},
	}
}

// Tasks submits tasks (tasks_create.go), reads them with their runs, logs and rejected rows
// (tasks_query.go, tasks_items.go), and carries out a user's actions on them: cancel, retry,
// run now (tasks_user.go).
type Tasks struct{ db *bun.DB }

// Attempts is a worker's side of a task, one attempt at a time: the claim and the takeover
// (tasks_claim.go), the running attempt's heartbeats, progress, batches and log lines
// (tasks_run.go), and the attempt's ending (tasks_end.go).
type Attempts struct{ db *bun.DB }

// Alerts records failure alerts and alert conditions so each goes out once (alerts.go).
type Alerts struct{ db *bun.DB }

// Maintenance is the cleanup's reads and bookkeeping (maintenance.go).
type Maintenance struct{ db *bun.DB }

// Outbox reads the task_events outbox the transitions write (events.go) and fans its events
// out into the deliveries of the webhook subscriptions that want them (fanout.go).
type Outbox struct{ db *bun.DB }

// Archive moves finished tasks out of the live tables, into the archive tables and the daily
// aggregates that store/stats reads, and reads them back (archive.go).
type Archive struct{ db *bun.DB }
