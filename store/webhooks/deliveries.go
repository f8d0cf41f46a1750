package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/store/pg"
)

// This file holds the webhook deliveries. Events come from the transactional outbox
// (task_events): store's Outbox.FanOut turns each committed event into one delivery per
// matching subscription, exactly once, by marking the event it has fanned out.

// Delivery is one event for one subscription, tried until the receiver answers 2xx.
type Delivery struct {
	bun.BaseModel `bun:"table:webhook_deliveries"`

	ID             int64           `bun:"id,pk,autoincrement"`
	DeliveryNo     string          `bun:"delivery_no"`
	SubscriptionID int64           `bun:"subscription_id"`
	EventID        int64           `bun:"event_id"`
	Event          string          `bun:"event"`
	TaskNo         string          `bun:"task_no"`
	Payload        json.RawMessage `bun:"payload,type:jsonb"`
	State          DeliveryState   `bun:"state"`
	Attempts       int             `bun:"attempts"`
	DueAt          time.Time       `bun:"due_at"`
	WindowStart    time.Time       `bun:"window_start"`
	LastStatus     *int            `bun:"last_status"`
	LastError      string          `bun:"last_error,nullzero"`
	DeliveredAt    *time.Time      `bun:"delivered_at"`
	CreatedAt      time.Time       `bun:"created_at"`
	UpdatedAt      time.Time       `bun:"updated_at"`
}

// DeliveryAttempt is one try of a delivery.
type DeliveryAttempt struct {
	bun.BaseModel `bun:"table:webhook_attempts"`

	ID         int64     `bun:"id,pk,autoincrement"`
	DeliveryID int64     `bun:"delivery_id"`
	Attempt    int       `bun:"attempt"`
	StatusCode *int      `bun:"status_code"`
	LatencyMS  int       `bun:"latency_ms"`
	Error      string    `bun:"error,nullzero"`
	CreatedAt  time.Time `bun:"created_at"`
}

// DeliveryState is where a delivery stands.
type DeliveryState string

// Delivery states.
const (
	DeliveryPending   DeliveryState = "pending"   // waiting for its next attempt (due_at)
	DeliverySending   DeliveryState = "sending"   // an attempt is under way; due_at is its lease
	DeliveryDelivered DeliveryState = "delivered" // the receiver answered 2xx
	DeliveryDead      DeliveryState = "dead"      // retries ran out; an alert was raised
)

const (
	deliveryColumns = `id, delivery_no, subscription_id, event_id, event, task_no, payload, state, attempts, due_at,
		window_start, last_status, last_error, delivered_at, created_at, updated_at`
	attemptColumns = `id, delivery_id, attempt, status_code, latency_ms, error, created_at`
)

// NewDelivery is a delivery the fan-out creates: one outbox event for one subscription, with
// the body it sends.
type NewDelivery struct {
	SubscriptionID int64
	EventID        int64
	Event          string // the event's name: task.succeeded, ...
	TaskNo         string
	Payload        json.RawMessage
}

// InsertDeliveries creates deliveries, inside q (the fan-out's transaction), skipping any (subscription, event) that has one. A
// delivery behind a pending earlier one of its subscription and task cannot go before that
// one's next attempt, so it is due then rather than now: held-back deliveries stay out of the
// claim's scan of due ones while a receiver is down (ClaimDeliveries still checks the order).
func InsertDeliveries(ctx context.Context, q pg.Querier, rows []NewDelivery) (int64, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	nos := make([]string, len(rows))
	subs := make([]int64, len(rows))
	events := make([]int64, len(rows))
	names := make([]string, len(rows))
	tasks := make([]string, len(rows))
	payloads := make([]string, len(rows))
	for i, r := range rows {
		nos[i], subs[i], events[i], names[i], tasks[i], payloads[i] = pg.NewNo("dlv_"), r.SubscriptionID, r.EventID, r.Event, r.TaskNo, string(r.Payload)
	}
	return pg.Exec(ctx, q, `INSERT INTO webhook_deliveries (delivery_no, subscription_id, event_id, event, task_no, payload, due_at)
		SELECT no, sub, ev, name, task, payload::jsonb,
		       GREATEST(now(), (SELECT max(p.due_at) FROM webhook_deliveries p
		                        WHERE p.subscription_id = u.sub AND p.task_no = u.task AND p.event_id < u.ev AND p.state = 'pending'))
		FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[]) AS u(no, sub, ev, name, task, payload)
		ON CONFLICT (subscription_id, event_id) DO NOTHING`, nos, subs, events, names, tasks, payloads)
}

// Outgoing is a claimed delivery with what sending it needs.
type Outgoing struct {
	Delivery
	URL    string `bun:"url"`
	Secret string `bun:"secret"`
	Owner  string `bun:"owner"`
	SubNo  string `bun:"sub_no"`
}

// ClaimDeliveries takes up to limit deliveries that are due (pending past their due time, or
// sending past their lease: a dispatcher died mid-attempt) and leases them for lease: their
// state becomes sending and their attempt count goes up by one, which fences the result
// write. A subscription gets at most perSubscription attempts in flight at once, and one at
// its cap is passed over, so a slow receiver holds only its own deliveries back.
//
// Per subscription and task, deliveries go in the order of their events: one is eligible only
// when no earlier-event delivery of its subscription and task is unfinished (pending or
// sending, in flight or waiting for a retry: the next one waits until it is delivered or dead)
// and no earlier event of its task still waits for the fan-out (store's Outbox.FanOut). So a
// task has at most one attempt in flight per subscription, while other tasks' deliveries to
// the same subscription go on in parallel. Both checks read the statement's snapshot, which is safe
// because what lets a delivery go (an earlier one delivered or dead, an earlier event fanned
// out together with its deliveries) never changes back except by Redeliver: a concurrent
// claim or result write that has not committed, and so still holds its row locked, leaves the
// earlier delivery unfinished in this snapshot. Two claims that pick the same delivery meet
// on its row lock and the second, re-checking state and due_at, skips it. The claim waits
// for a row lock rather than using SKIP LOCKED on purpose: a claim skipping rows another
// holds would take the subscription's next ones and could pass its cap. It locks its rows in
// the order of their ids before it updates them, so two claims that picked some of the same
// rows wait for each other in one order and never deadlock (an UPDATE joined to the picked
// rows locks them in whatever order its join reads them).
func (s *Webhooks) ClaimDeliveries(ctx context.Context, limit, perSubscription int, lease time.Duration) ([]Outgoing, error) {
	return pg.List[Outgoing](ctx, s.db, "claim webhook deliveries", `
		WITH busy AS (
			SELECT subscription_id, count(*) AS n FROM webhook_deliveries
			WHERE state = 'sending' AND due_at > now() GROUP BY subscription_id
		), due AS (
			SELECT d.id, d.subscription_id, d.due_at FROM webhook_deliveries d
			WHERE d.state IN ('pending', 'sending') AND d.due_at <= now()
			  AND d.subscription_id NOT IN (SELECT subscription_id FROM busy WHERE n >= $2)
			  AND NOT EXISTS (SELECT 1 FROM webhook_deliveries p
			                  WHERE p.subscription_id = d.subscription_id AND p.task_no = d.task_no
			                    AND p.event_id < d.event_id AND p.state IN ('pending', 'sending'))
			  AND NOT EXISTS (SELECT 1 FROM task_events e
			                  WHERE e.task_no = d.task_no AND e.id < d.event_id AND e.webhooks_at IS NULL)
			ORDER BY d.due_at LIMIT $1 * 4
		), ranked AS (
			SELECT due.id, due.due_at, row_number() OVER (PARTITION BY due.subscription_id ORDER BY due.due_at, due.id) + COALESCE(busy.n, 0) AS slot
			FROM due LEFT JOIN busy USING (subscription_id)
		), picked AS (
			SELECT id FROM ranked WHERE slot <= $2 ORDER BY due_at, id LIMIT $1
		), locked AS MATERIALIZED (
			SELECT d.id FROM webhook_deliveries d
			WHERE d.id IN (SELECT id FROM picked) AND d.state IN ('pending', 'sending') AND d.due_at <= now()
			ORDER BY d.id FOR UPDATE OF d
		), claimed AS (
			UPDATE webhook_deliveries d SET state = 'sending', attempts = d.attempts + 1,
				due_at = now() + make_interval(secs => $3), updated_at = now()
			FROM locked WHERE d.id = locked.id
			RETURNING `+pg.Prefixed("d.", deliveryColumns)+`
		)
		SELECT c.id, c.delivery_no, c.subscription_id, c.event_id, c.event, c.task_no, c.payload, c.state, c.attempts, c.due_at,
			c.window_start, c.last_status, c.last_error, c.delivered_at, c.created_at, c.updated_at, w.url, w.secret, w.owner, w.sub_no
		FROM claimed c JOIN webhook_subscriptions w ON w.id = c.subscription_id ORDER BY c.due_at`,
		limit, perSubscription, lease.Seconds())
}

// AttemptResult is how one attempt went.
type AttemptResult struct {
	StatusCode int // 0: no HTTP answer
	Latency    time.Duration
	Error      string // empty on success
	Delivered  bool
	// NextAt is when to try again after a failure; zero gives up (the delivery is dead).
	NextAt time.Time
}

// RecordAttempt writes an attempt's outcome, fenced by the attempt number the claim gave:
// a dispatcher whose lease lapsed and whose delivery was claimed again writes nothing and
// gets false. It returns the delivery as it is now.
//
// The later deliveries of the same subscription and task wait for this one (ClaimDeliveries),
// so after a failure none of them is due before its next attempt: their due_at moves there,
// which keeps them out of the claims' scan of due deliveries while the receiver is down. When
// this one is delivered or dead, the next one, if it never ran, is due at once (it may have
// been moved past now when this one was redelivered early).
func (s *Webhooks) RecordAttempt(ctx context.Context, d *Delivery, r AttemptResult) (*Delivery, bool, error) {
	state := DeliveryPending
	switch {
	case r.Delivered:
		state = DeliveryDelivered
	case r.NextAt.IsZero():
		state = DeliveryDead
	}
	var status *int
	if r.StatusCode != 0 {
		status = &r.StatusCode
	}
	var next *time.Time
	if !r.NextAt.IsZero() {
		next = &r.NextAt
	}
	out := new(Delivery)
	err := pg.One(ctx, s.db, s.db.DB, out, `
		WITH d AS (
			UPDATE webhook_deliveries SET state = $3, last_status = $4, last_error = NULLIF($5, ''),
				due_at = COALESCE($6, due_at), delivered_at = CASE WHEN $3 = 'delivered' THEN now() ELSE delivered_at END,
				updated_at = now()
			WHERE id = $1 AND attempts = $2 AND state = 'sending'
			RETURNING `+deliveryColumns+`
		), a AS (
			INSERT INTO webhook_attempts (delivery_id, attempt, status_code, latency_ms, error)
			SELECT id, attempts, $4, $7, NULLIF($5, '') FROM d
		), later AS (
			UPDATE webhook_deliveries l SET due_at = d.due_at
			FROM d WHERE d.state = 'pending' AND l.subscription_id = d.subscription_id AND l.task_no = d.task_no
			  AND l.event_id > d.event_id AND l.state = 'pending' AND l.due_at < d.due_at
		), next AS (
			UPDATE webhook_deliveries l SET due_at = now()
			FROM d WHERE d.state IN ('delivered', 'dead') AND l.id = (
				SELECT n.id FROM webhook_deliveries n
				WHERE n.subscription_id = d.subscription_id AND n.task_no = d.task_no AND n.event_id > d.event_id
				  AND n.state IN ('pending', 'sending')
				ORDER BY n.event_id LIMIT 1)
			  AND l.state = 'pending' AND l.attempts = 0 AND l.due_at > now()
		)
		SELECT `+deliveryColumns+` FROM d`,
		d.ID, d.Attempts, string(state), status, r.Error, next, int(r.Latency.Milliseconds()))
	if pg.IsNoRows(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("record webhook attempt: %w", err)
	}
	return out, true, nil
}

// DeliveryFilter narrows a subscription's deliveries.
type DeliveryFilter struct {
	State  DeliveryState // empty: any
	Before int64         // cursor: deliveries with a smaller id
	Limit  int
}

// Deliveries returns a subscription's deliveries, newest first.
func (s *Webhooks) Deliveries(ctx context.Context, subID int64, f DeliveryFilter) ([]Delivery, error) {
	return pg.List[Delivery](ctx, s.db, "list webhook deliveries",
		`SELECT `+deliveryColumns+` FROM webhook_deliveries
		WHERE subscription_id = $1 AND ($2 = '' OR state = $2) AND ($3 = 0 OR id < $3) ORDER BY id DESC LIMIT $4`,
		subID, string(f.State), f.Before, f.Limit)
}

// DeliveryAttempts returns the attempts of the given deliveries, oldest first per delivery.
func (s *Webhooks) DeliveryAttempts(ctx context.Context, deliveryIDs []int64) (map[int64][]DeliveryAttempt, error) {
	var rows []DeliveryAttempt
	err := pg.All(ctx, s.db, s.db.DB, &rows, `SELECT `+attemptColumns+` FROM webhook_attempts WHERE delivery_id = ANY($1::bigint[]) ORDER BY delivery_id, id`,
		deliveryIDs)
	if err != nil {
		return nil, fmt.Errorf("list webhook attempts: %w", err)
	}
	out := map[int64][]DeliveryAttempt{}
	for _, a := range rows {
		out[a.DeliveryID] = append(out[a.DeliveryID], a)
	}
	return out, nil
}

// Redeliver queues a delivery of the subscription again, at once and with a fresh retry
// window, whatever its state (a receiver that lost a delivered event asks again). It keeps its
// event id and body. An attempt in flight finishes as it would have.
func (s *Webhooks) Redeliver(ctx context.Context, subID int64, deliveryNo string) (*Delivery, error) {
	return pg.Get[Delivery](ctx, s.db, ErrDeliveryNotFound, "redeliver webhook", `UPDATE webhook_deliveries SET state = CASE WHEN state = 'sending' AND due_at > now() THEN state ELSE 'pending' END,
			due_at = CASE WHEN state = 'sending' AND due_at > now() THEN due_at ELSE now() END, window_start = now(), updated_at = now()
		WHERE subscription_id = $1 AND delivery_no = $2 RETURNING `+deliveryColumns, subID, deliveryNo)
}

// PruneDeliveries deletes up to limit finished deliveries (delivered or dead) last touched
// more than age ago, with their attempts, and returns how many it deleted.
func (s *Webhooks) PruneDeliveries(ctx context.Context, age time.Duration, limit int) (int, error) {
	return pg.Prune(ctx, s.db.DB, "webhook deliveries", `DELETE FROM webhook_deliveries WHERE id IN (
		SELECT id FROM webhook_deliveries WHERE state IN ('delivered', 'dead') AND updated_at < now() - make_interval(secs => $1)
		ORDER BY updated_at LIMIT $2)`, age, limit)
}
