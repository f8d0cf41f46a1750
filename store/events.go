package store

import (
	"context"
	"fmt"
	"time"

	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/store/pg"
)

// This file is the transactional outbox (task_events): the INSERT every transition (the
// tasks_*.go files) makes in the same statement as the change it records, and the readers.

// eventName names a transition's event from the status it left the task in: the names come
// from internal/task, the one table every surface uses.
var eventName = task.EventNameSQL("status", "cancel_requested")

// insertEvents is the statement (a CTE's body) that records one event per task row of from, a
// CTE or subquery whose rows are tasks.* just written by a transition: named by the SQL
// expression event, caused by actor. Its webhooks_at says whether the webhook fan-out has
// anything to do: NULL when a subscription may want it (one bound to the task, see
// CreateTaskSubscription, or one of the owner's that lists the event), now() when none does,
// so an event nobody subscribed to is never touched again.
func insertEvents(event, actor, from string) string {
	return `INSERT INTO task_events (task_id, task_no, owner, task_type, event, status, attempt, actor, webhooks_at)
			SELECT e.id, e.task_no, e.owner, e.type, e.event, e.status, e.attempt, e.actor,
			       CASE WHEN e.webhook_bound OR EXISTS (SELECT 1 FROM webhook_subscriptions w
			                WHERE w.task_id IS NULL AND w.owner = e.owner AND e.event = ANY (w.events)) THEN NULL ELSE now() END
			FROM (SELECT id, task_no, owner, type, ` + event + ` AS event, status, attempt, ` + actor + ` AS actor, webhook_bound
			      FROM ` + from + `) e`
}

// EventsAfter returns up to limit events with id > after, oldest first: the feed webhook
// dispatchers and live streams follow.
func (s *Outbox) EventsAfter(ctx context.Context, after int64, limit int) ([]Event, error) {
	return pg.List[Event](ctx, s.db, "read events",
		`SELECT `+eventColumns+` FROM task_events WHERE id > $1 ORDER BY id LIMIT $2`, after, limit)
}

// TaskEvents returns a task's events with id > after, oldest first, if scope may see the task.
func (s *Outbox) TaskEvents(ctx context.Context, taskID int64, after int64, limit int) ([]Event, error) {
	return pg.List[Event](ctx, s.db, fmt.Sprintf("read events of task %d", taskID),
		`SELECT `+eventColumns+` FROM task_events WHERE task_id = $1 AND id > $2 ORDER BY id LIMIT $3`,
		taskID, after, limit)
}

// ScopeEvents returns the events of tasks scope may see (owner, when given, narrows an
// admin's view) with id > after, oldest first.
func (s *Outbox) ScopeEvents(ctx context.Context, scope Scope, owner string, after int64, limit int) ([]Event, error) {
	owner = scope.ListedOwner(owner)
	return pg.List[Event](ctx, s.db, "read events", `SELECT `+eventColumns+` FROM task_events
		WHERE id > $1 AND ($2 = '' OR owner = $2) ORDER BY id LIMIT $3`, after, owner, limit)
}

// LastEventID is the newest event's id (0 when there is none): where a new follower starts.
func (s *Outbox) LastEventID(ctx context.Context) (int64, error) {
	var id int64
	err := pg.One(ctx, s.db, s.db.DB, &id, `SELECT COALESCE(max(id), 0) FROM task_events`)
	return id, err
}

// PruneEvents deletes events older than age, at most limit of them, and returns how many.
func (s *Outbox) PruneEvents(ctx context.Context, age time.Duration, limit int) (int, error) {
	return pg.Prune(ctx, s.db.DB, "events", `DELETE FROM task_events WHERE id IN (
		SELECT id FROM task_events WHERE created_at < now() - make_interval(secs => $1) ORDER BY id LIMIT $2)`, age, limit)
}
