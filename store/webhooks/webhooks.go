// Package webhooks holds the webhook subscriptions (who hears of which task events, in
// webhooks.go) and their deliveries (deliveries.go): each one's claim, its attempts, its
// retries and its pruning. The deliveries are created from the transactional outbox by
// package store, which owns the outbox and the task rows: its Outbox.FanOut and
// CreateTaskSubscription (store/fanout.go) build each body from the task and hand the rows to
// InsertDeliveries. Package store embeds *Webhooks in its Store, so callers write
// st.CreateSubscription(...).
package webhooks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/store/pg"
)

// Webhooks keeps the webhook subscriptions (this file) and tracks each delivery
// (deliveries.go).
type Webhooks struct{ db *bun.DB }

// New returns the webhook subscriptions and deliveries over db.
func New(db *bun.DB) *Webhooks { return &Webhooks{db: db} }

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

// Notify is a submit's notify_url and notify_secret: a webhook told of the task's endings.
// jobs/webhook's Policy checks it and makes the NewSubscription the task is submitted with.
type Notify struct{ URL, Secret string }

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

// InsertTaskSubscription stores a subscription bound to one task, inside q: the transaction
// of store's CreateTaskSubscription, which holds the task row and backfills the deliveries.
// When the task already has a subscription for the URL, that one is returned with
// created=false (an idempotent resubmit).
func InsertTaskSubscription(ctx context.Context, db *bun.DB, q pg.Querier, taskID int64, ns NewSubscription) (sub *Subscription, created bool, err error) {
	sub = new(Subscription)
	err = pg.One(ctx, db, q, sub, `INSERT INTO webhook_subscriptions (sub_no, owner, url, events, secret, task_id, created_by)
		VALUES ($1, $2, $3, $4::text[], $5, $6, $7)
		ON CONFLICT (task_id, url) WHERE task_id IS NOT NULL DO NOTHING RETURNING `+subscriptionColumns,
		pg.NewNo("whk_"), ns.Owner, ns.URL, ns.Events, ns.Secret, taskID, ns.CreatedBy)
	if pg.IsNoRows(err) {
		err = pg.One(ctx, db, q, sub, `SELECT `+subscriptionColumns+` FROM webhook_subscriptions WHERE task_id = $1 AND url = $2`, taskID, ns.URL)
		return sub, false, err
	}
	if err != nil {
		return nil, false, err
	}
	return sub, true, nil
}

// GetSubscription returns a subscription by its public id, if scope may see it.
func (s *Webhooks) GetSubscription(ctx context.Context, subNo string, scope pg.Scope) (*Subscription, error) {
	return pg.Get[Subscription](ctx, s.db, ErrSubscriptionNotFound, "get webhook subscription",
		`SELECT `+subscriptionColumns+` FROM webhook_subscriptions WHERE sub_no = $1 AND ($2 OR owner = $3)`,
		subNo, scope.Admin, scope.Owner)
}

// ListSubscriptions returns the user subscriptions (not the task-bound ones) scope may see,
// newest first: an admin sees all, or one owner's when owner is given.
func (s *Webhooks) ListSubscriptions(ctx context.Context, scope pg.Scope, owner string, limit int) ([]Subscription, error) {
	owner = scope.ListedOwner(owner)
	return pg.List[Subscription](ctx, s.db, "list webhook subscriptions",
		`SELECT `+subscriptionColumns+` FROM webhook_subscriptions
		WHERE task_id IS NULL AND ($1 = '' OR owner = $1) ORDER BY id DESC LIMIT $2`, owner, limit)
}

// DeleteSubscription deletes a subscription and its deliveries: nothing more is sent to it.
func (s *Webhooks) DeleteSubscription(ctx context.Context, subNo string, scope pg.Scope) error {
	return pg.ChangeOne(ctx, s.db.DB, ErrSubscriptionNotFound, "delete webhook subscription",
		`DELETE FROM webhook_subscriptions WHERE sub_no = $1 AND ($2 OR owner = $3)`, subNo, scope.Admin, scope.Owner)
}
