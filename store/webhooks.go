package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/store/pg"
)

// This file holds the webhook subscriptions: who hears of which task events. Their deliveries
// are in deliveries.go.

// Subscription is a URL that hears of a user's task events, or of one task's (TaskID set:
// created through notify_url at submit).
type Subscription struct {
	bun.BaseModel `bun:"table:webhook_subscriptions"`

	ID        int64     `bun:"id,pk,autoincrement"`
	SubNo     string    `bun:"sub_no"`
	Owner     string    `bun:"owner"`
	URL       string    `bun:"url"`
	Events    []string  `bun:"events,array"`
	Secret    string    `bun:"secret"`
	TaskID    *int64    `bun:"task_id"`
	CreatedBy string    `bun:"created_by"`
	CreatedAt time.Time `bun:"created_at"`
}

const subscriptionColumns = `id, sub_no, owner, url, events, secret, task_id, created_by, created_at`

// Webhook errors callers branch on.
var (
	// ErrSubscriptionNotFound: no such subscription, or not visible to the caller.
	ErrSubscriptionNotFound = errors.New("webhook subscription not found")
	// ErrDeliveryNotFound: no such delivery of the subscription.
	ErrDeliveryNotFound = errors.New("webhook delivery not found")
)

// NewSubscription is what creating a subscription needs.
type NewSubscription struct {
	Owner     string
	URL       string
	Events    []string
	Secret    string
	CreatedBy string
}

// CreateSubscription stores a user's subscription. It hears of events committed from now on.
func (s *Webhooks) CreateSubscription(ctx context.Context, ns NewSubscription) (*Subscription, error) {
	sub := new(Subscription)
	err := pg.One(ctx, s.db, s.db.DB, sub, `INSERT INTO webhook_subscriptions (sub_no, owner, url, events, secret, created_by)
		VALUES ($1, $2, $3, $4::text[], $5, $6) RETURNING `+subscriptionColumns,
		pg.NewNo("whk_"), ns.Owner, ns.URL, ns.Events, ns.Secret, ns.CreatedBy)
	if err != nil {
		return nil, fmt.Errorf("create webhook subscription: %w", err)
	}
	return sub, nil
}

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
func (s *Webhooks) CreateTaskSubscription(ctx context.Context, taskID int64, ns NewSubscription, payload PayloadFunc) (sub *Subscription, created bool, err error) {
	err = s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var locked int64
		if err := pg.One(ctx, s.db, tx.Tx, &locked, `UPDATE tasks SET webhook_bound = true WHERE id = $1 RETURNING id`, taskID); err != nil {
			if pg.IsNoRows(err) {
				return ErrNotFound
			}
			return err
		}
		sub = new(Subscription)
		err := pg.One(ctx, s.db, tx.Tx, sub, `INSERT INTO webhook_subscriptions (sub_no, owner, url, events, secret, task_id, created_by)
			VALUES ($1, $2, $3, $4::text[], $5, $6, $7)
			ON CONFLICT (task_id, url) WHERE task_id IS NOT NULL DO NOTHING RETURNING `+subscriptionColumns,
			pg.NewNo("whk_"), ns.Owner, ns.URL, ns.Events, ns.Secret, taskID, ns.CreatedBy)
		if pg.IsNoRows(err) {
			err = pg.One(ctx, s.db, tx.Tx, sub, `SELECT `+subscriptionColumns+` FROM webhook_subscriptions WHERE task_id = $1 AND url = $2`, taskID, ns.URL)
			return err
		}
		if err != nil {
			return err
		}
		created = true
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
		var rows []newDelivery
		for _, ev := range events {
			body, err := payload(ev.Event, ev.Sequence, task)
			if err != nil {
				return err
			}
			rows = append(rows, newDelivery{sub: sub.ID, event: ev.Event, payload: body})
		}
		_, err = insertDeliveries(ctx, tx.Tx, rows)
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("create task webhook subscription: %w", err)
	}
	return sub, created, nil
}

func (s *Webhooks) getByID(ctx context.Context, q pg.Querier, id int64) (*Task, error) {
	t := new(Task)
	if err := pg.One(ctx, s.db, q, t, `SELECT `+taskColumns+` FROM tasks WHERE id = $1`, id); err != nil {
		if pg.IsNoRows(err) {
			return nil, ErrNotFound
		}
		return nil, err
	}
	return t, nil
}

// GetSubscription returns a subscription by its public id, if scope may see it.
func (s *Webhooks) GetSubscription(ctx context.Context, subNo string, scope Scope) (*Subscription, error) {
	sub := new(Subscription)
	err := pg.One(ctx, s.db, s.db.DB, sub, `SELECT `+subscriptionColumns+` FROM webhook_subscriptions WHERE sub_no = $1 AND ($2 OR owner = $3)`,
		subNo, scope.Admin, scope.Owner)
	if pg.IsNoRows(err) {
		return nil, ErrSubscriptionNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get webhook subscription: %w", err)
	}
	return sub, nil
}

// ListSubscriptions returns the user subscriptions (not the task-bound ones) scope may see,
// newest first: an admin sees all, or one owner's when owner is given.
func (s *Webhooks) ListSubscriptions(ctx context.Context, scope Scope, owner string, limit int) ([]Subscription, error) {
	if !scope.Admin {
		owner = scope.Owner
	}
	var out []Subscription
	err := pg.All(ctx, s.db, s.db.DB, &out, `SELECT `+subscriptionColumns+` FROM webhook_subscriptions
		WHERE task_id IS NULL AND ($1 = '' OR owner = $1) ORDER BY id DESC LIMIT $2`, owner, limit)
	if err != nil {
		return nil, fmt.Errorf("list webhook subscriptions: %w", err)
	}
	return out, nil
}

// DeleteSubscription deletes a subscription and its deliveries: nothing more is sent to it.
func (s *Webhooks) DeleteSubscription(ctx context.Context, subNo string, scope Scope) error {
	n, err := pg.Exec(ctx, s.db.DB, `DELETE FROM webhook_subscriptions WHERE sub_no = $1 AND ($2 OR owner = $3)`, subNo, scope.Admin, scope.Owner)
	if err != nil {
		return fmt.Errorf("delete webhook subscription: %w", err)
	}
	if n == 0 {
		return ErrSubscriptionNotFound
	}
	return nil
}

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
