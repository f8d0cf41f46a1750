package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/store/pg"
	"github.com/taskcenter/taskcenter/store/webhooks"
)

// This file is the webhook fan-out: it turns the outbox's events (events.go) into deliveries
// of the subscriptions that want them (store/webhooks), building each body from the event and
// its task. It lives with the outbox because it reads the outbox and the task rows; the
// subscriptions and the deliveries' lifecycle are store/webhooks'.

// PayloadFunc builds the body of an event's deliveries from the event, its sequence (its
// place among its task's events, 1 for the first) and its task as it is when the event is
// fanned out.
type PayloadFunc func(ev Event, sequence int64, task *Task) (json.RawMessage, error)

// sequencedEvent is an outbox event with its sequence.
type sequencedEvent struct {
	Event
	Sequence int64 `bun:"sequence"`
}

// eventSequence is the sequence of the outbox event e: how many of its task's events have an
// id up to its own. Every event of a task is written by the statement that updates (and so
// locks) the task row, so a task's ids grow in the order its events committed, and when an
// event is visible every earlier one of its task is too: the count is the same whenever and
// by whomever it is taken. It holds as long as a task's events are deleted only with the task
// (the archive); deleting a live task's early events would restart its count lower.
const eventSequence = `(SELECT count(*) FROM task_events s WHERE s.task_id = e.task_id AND s.id <= e.id)`

// CreateTaskSubscription binds a subscription to one task (notify_url at submit). The task
// already exists and may already have moved on, so the events of the task committed so far
// that the subscription wants get their deliveries here, and later ones through FanOut:
// the task row is marked webhook_bound first (an UPDATE, so it waits for a transition of the
// task in progress, and the next one waits for this transaction): no transition commits
// between the read of its events and the commit of the subscription, and every later one
// re-reads the row, sees the mark and leaves its event for a dispatcher that sees the
// subscription (see insertEvents). A delivery exists at most once per (subscription, event),
// whoever creates it. When the task already has a subscription for the
// URL, that one is returned with created=false (an idempotent resubmit).
func (s *Outbox) CreateTaskSubscription(ctx context.Context, taskID int64, ns webhooks.NewSubscription, payload PayloadFunc) (sub *webhooks.Subscription, created bool, err error) {
	err = s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var locked int64
		if err := pg.One(ctx, s.db, tx.Tx, &locked, `UPDATE tasks SET webhook_bound = true WHERE id = $1 RETURNING id`, taskID); err != nil {
			if pg.IsNoRows(err) {
				return ErrNotFound
			}
			return err
		}
		var err error
		if sub, created, err = webhooks.InsertTaskSubscription(ctx, s.db, tx.Tx, taskID, ns); err != nil || !created {
			return err
		}
		var events []sequencedEvent
		if err := pg.All(ctx, s.db, tx.Tx, &events, `SELECT `+pg.Prefixed("e.", eventColumns)+`, `+eventSequence+` AS sequence
			FROM task_events e WHERE e.task_id = $1 AND e.event = ANY($2::text[]) ORDER BY e.id`,
			taskID, ns.Events); err != nil {
			return err
		}
		if len(events) == 0 {
			return nil
		}
		task, err := s.getByID(ctx, tx.Tx, taskID)
		if err != nil {
			return err
		}
		var rows []webhooks.NewDelivery
		for _, ev := range events {
			body, err := payload(ev.Event, ev.Sequence, task)
			if err != nil {
				return err
			}
			rows = append(rows, webhooks.NewDelivery{SubscriptionID: sub.ID, EventID: ev.ID, Event: ev.Event.Event, TaskNo: ev.TaskNo, Payload: body})
		}
		_, err = webhooks.InsertDeliveries(ctx, tx.Tx, rows)
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("create task webhook subscription: %w", err)
	}
	return sub, created, nil
}

func (s *Outbox) getByID(ctx context.Context, q pg.Querier, id int64) (*Task, error) {
	t := new(Task)
	if err := pg.One(ctx, s.db, q, t, `SELECT `+taskColumns+` FROM tasks WHERE id = $1`, id); err != nil {
		if pg.IsNoRows(err) {
			return nil, ErrNotFound
		}
		return nil, err
	}
	return t, nil
}

// fanMatch is an event a subscription wants.
type fanMatch struct {
	EventID int64 `bun:"event_id"`
	SubID   int64 `bun:"sub_id"`
}

// FanOut takes up to limit committed events no dispatcher has fanned out yet, creates one
// delivery per subscription that wants each, and marks the events, in one transaction.
// Concurrent dispatchers take disjoint events (FOR UPDATE SKIP LOCKED), so one task's
// events may be fanned out by two of them and a later event's delivery may commit first:
// ClaimDeliveries holds it back until the earlier event is fanned out. An event whose
// transaction has not committed is not visible, and one that rolled back never will be.
// It returns how many events it took and how many deliveries it created.
func (s *Outbox) FanOut(ctx context.Context, limit int, payload PayloadFunc) (events, deliveries int, err error) {
	err = s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var evs []sequencedEvent
		if err := pg.All(ctx, s.db, tx.Tx, &evs, `SELECT `+pg.Prefixed("e.", eventColumns)+`, `+eventSequence+` AS sequence
			FROM task_events e WHERE e.webhooks_at IS NULL
			ORDER BY e.id LIMIT $1 FOR UPDATE OF e SKIP LOCKED`, limit); err != nil {
			return err
		}
		events = len(evs)
		if len(evs) == 0 {
			return nil
		}
		ids := make([]int64, len(evs))
		byID := map[int64]sequencedEvent{}
		for i, ev := range evs {
			ids[i] = ev.ID
			byID[ev.ID] = ev
		}
		var matches []fanMatch
		if err := pg.All(ctx, s.db, tx.Tx, &matches, `SELECT e.id AS event_id, w.id AS sub_id
			FROM task_events e JOIN webhook_subscriptions w ON e.event = ANY(w.events)
			 AND ((w.task_id IS NULL AND w.owner = e.owner) OR w.task_id = e.task_id)
			WHERE e.id = ANY($1::bigint[]) ORDER BY e.id, w.id`, ids); err != nil {
			return err
		}
		tasks := map[int64]*Task{}
		var rows []webhooks.NewDelivery
		for _, m := range matches {
			ev := byID[m.EventID]
			task, ok := tasks[ev.TaskID]
			if !ok {
				var err error
				if task, err = s.getByID(ctx, tx.Tx, ev.TaskID); err != nil {
					return err
				}
				tasks[ev.TaskID] = task
			}
			body, err := payload(ev.Event, ev.Sequence, task)
			if err != nil {
				return err
			}
			rows = append(rows, webhooks.NewDelivery{SubscriptionID: m.SubID, EventID: ev.ID, Event: ev.Event.Event, TaskNo: ev.TaskNo, Payload: body})
		}
		n, err := webhooks.InsertDeliveries(ctx, tx.Tx, rows)
		if err != nil {
			return err
		}
		deliveries = int(n)
		_, err = pg.Exec(ctx, tx.Tx, `UPDATE task_events SET webhooks_at = now() WHERE id = ANY($1::bigint[])`, ids)
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("fan out task events: %w", err)
	}
	return events, deliveries, nil
}
