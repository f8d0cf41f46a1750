package client

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/taskcenter/taskcenter/internal/task"
)

// Webhook is a subscription: a URL told of task events, signed with its secret.
type Webhook struct {
	ID     string   `json:"id"`
	URL    string   `json:"url"`
	Events []string `json:"events"`
	Owner  string   `json:"owner"`
	// TaskID is set for a subscription a submit's notify_url made: it hears of that task only.
	TaskID    string    `json:"task_id,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// Secret is only returned when the subscription is created.
	Secret string `json:"secret,omitempty"`
}

// NewWebhook is a subscription to create.
type NewWebhook struct {
	URL string `json:"url"`
	// Events defaults to the five endings: task.succeeded, task.partially_succeeded,
	// task.failed, task.timed_out, task.cancelled (task.started and the others may be added).
	Events []string `json:"events,omitempty"`
	// Secret signs deliveries; the server makes one when empty.
	Secret string `json:"secret,omitempty"`
	// Owner subscribes to another user's tasks (admins only).
	Owner string `json:"owner,omitempty"`
}

// CreateWebhook subscribes a URL. The answer's Secret is the only time it is shown.
func (c *Client) CreateWebhook(ctx context.Context, w NewWebhook) (*Webhook, error) {
	return callFor[Webhook](ctx, c, http.MethodPost, "/api/v1/webhooks", nil, w)
}

// Webhooks lists the subscriptions the token may see (an admin: everyone's).
func (c *Client) Webhooks(ctx context.Context) ([]Webhook, error) {
	return items[Webhook](ctx, c, "/api/v1/webhooks")
}

// DeleteWebhook deletes a subscription; nothing more is sent to it.
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	_, err := c.call(ctx, http.MethodDelete, "/api/v1/webhooks/"+url.PathEscape(id), nil, nil, nil)
	return err
}

// Delivery is one event sent (or being sent) to a subscription.
type Delivery struct {
	ID          string            `json:"id"`
	EventID     string            `json:"event_id"`
	Event       string            `json:"event"`
	TaskID      string            `json:"task_id"`
	State       string            `json:"state"` // pending, sending, delivered, dead
	Attempts    []DeliveryAttempt `json:"attempts"`
	NextAt      *time.Time        `json:"next_attempt_at"`
	DeliveredAt *time.Time        `json:"delivered_at"`
	CreatedAt   time.Time         `json:"created_at"`
}

// DeliveryAttempt is one try of a delivery.
type DeliveryAttempt struct {
	Attempt    int       `json:"attempt"`
	At         time.Time `json:"at"`
	StatusCode int       `json:"status_code"` // 0: no HTTP answer
	LatencyMS  int       `json:"latency_ms"`
	Error      string    `json:"error"`
}

// Deliveries lists a subscription's latest deliveries, newest first.
func (c *Client) Deliveries(ctx context.Context, webhookID string) ([]Delivery, error) {
	return items[Delivery](ctx, c, "/api/v1/webhooks/"+url.PathEscape(webhookID)+"/deliveries")
}

// Redeliver sends a delivery again (same event id and body), at once.
func (c *Client) Redeliver(ctx context.Context, webhookID, deliveryID string) (*Delivery, error) {
	path := "/api/v1/webhooks/" + url.PathEscape(webhookID) + "/deliveries/" + url.PathEscape(deliveryID) + "/redeliver"
	return callFor[Delivery](ctx, c, http.MethodPost, path, nil, nil)
}

// WebhookEvent is the JSON body of a webhook delivery.
type WebhookEvent struct {
	// ID is the event's stable id, also in the Taskcenter-Event-Id header: de-duplicate on it.
	ID string `json:"id"`
	// Type is the event name, e.g. task.succeeded.
	Type string `json:"type"`
	// Sequence is the event's place among its task's events (1, 2, 3 … as they happened):
	// ignore one not above the last you applied for the task.
	Sequence  int64     `json:"sequence"`
	CreatedAt time.Time `json:"created_at"`
	// Status and Attempt are what the event committed: keep them, in Sequence order, as the
	// task's latest status.
	Status  Status `json:"status"`
	Attempt int    `json:"attempt"`
	// Task is the task when the delivery was made, as GET /api/v1/tasks/{id} shows it.
	Task WebhookTask `json:"task"`
}

// WebhookTask is the task a webhook event is about: the server's one task view.
type WebhookTask = task.View

// Signature verification errors.
var (
	ErrBadSignature   = errors.New("webhook signature does not match")
	ErrStaleSignature = errors.New("webhook signature is too old (or from the future): a replay?")
)

// VerifySignature checks a delivery: header is its Taskcenter-Signature
// ("t=<unix>,v1=<hex>"), body the raw request body, secret the subscription's. A signature
// whose time is more than tolerance away from now is refused (5 minutes is the usual
// tolerance; 0 skips the check). Verify before parsing the body.
func VerifySignature(secret, header string, body []byte, tolerance time.Duration) error {
	var ts string
	var sigs []string
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrBadSignature
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	ok := false
	for _, s := range sigs {
		got, err := hex.DecodeString(s)
		if err == nil && hmac.Equal(got, want) {
			ok = true
		}
	}
	if !ok {
		return ErrBadSignature
	}
	if tolerance > 0 {
		if age := time.Since(time.Unix(t, 0)); age > tolerance || age < -tolerance {
			return ErrStaleSignature
		}
	}
	return nil
}

// ParseWebhook verifies a delivery's signature and decodes its body.
func ParseWebhook(secret string, r *http.Request, body []byte, tolerance time.Duration) (*WebhookEvent, error) {
	if err := VerifySignature(secret, r.Header.Get("Taskcenter-Signature"), body, tolerance); err != nil {
		return nil, err
	}
	var ev WebhookEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, err
	}
	return &ev, nil
}
