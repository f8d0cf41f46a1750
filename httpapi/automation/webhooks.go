package automation

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/taskcenter/taskcenter/httpapi/identity"
	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/httpapi/request"
	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/textcheck"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/taskview"
	"github.com/taskcenter/taskcenter/jobs/webhook"
	"github.com/taskcenter/taskcenter/store/webhooks"
)

// This file serves webhook subscriptions:
//
//	POST   /api/v1/webhooks                                      subscribe a URL (secret shown once)
//	GET    /api/v1/webhooks                                      the caller's subscriptions (admin: all, ?owner=)
//	GET    /api/v1/webhooks/{id}                                 one subscription
//	DELETE /api/v1/webhooks/{id}                                 unsubscribe
//	GET    /api/v1/webhooks/{id}/deliveries                      deliveries with their attempts, newest first
//	POST   /api/v1/webhooks/{id}/deliveries/{delivery}/redeliver send one again
//
// and the notify_url a submit may carry: a subscription bound to the new task.

// WebhookView is a subscription as the API shows it.
type WebhookView struct {
	ID     string   `json:"id"`
	URL    string   `json:"url"`
	Events []string `json:"events"`
	Owner  string   `json:"owner"`
	// TaskID is set for a subscription a submit's notify_url made.
	TaskID    string    `json:"task_id,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// Secret is only in the answer that created the subscription.
	Secret string `json:"secret,omitempty"`
}

// DeliveryView is one event for one subscription, with its attempts.
type DeliveryView struct {
	ID          string                 `json:"id"`
	EventID     string                 `json:"event_id"`
	Event       string                 `json:"event"`
	TaskID      string                 `json:"task_id"`
	State       webhooks.DeliveryState `json:"state"`
	Attempts    []DeliveryAttemptView  `json:"attempts"`
	NextAt      *time.Time             `json:"next_attempt_at"`
	DeliveredAt *time.Time             `json:"delivered_at"`
	CreatedAt   time.Time              `json:"created_at"`
}

// DeliveryAttemptView is one try: what the receiver answered and how long it took.
type DeliveryAttemptView struct {
	Attempt    int       `json:"attempt"`
	At         time.Time `json:"at"`
	StatusCode int       `json:"status_code,omitempty"` // absent: no HTTP answer
	LatencyMS  int       `json:"latency_ms"`
	Error      string    `json:"error,omitempty"`
}

const (
	maxWebhookEvents = 20
)

// webhookRequest is the body of POST /api/v1/webhooks.
type webhookRequest struct {
	URL    string   `json:"url"`
	Events []string `json:"events"`
	Secret string   `json:"secret"`
	Owner  string   `json:"owner"`
}

// CreateWebhook answers POST /api/v1/webhooks {url, events?, secret?, owner?}: 201 and the
// subscription, with its secret shown this once.
func (s *Service) CreateWebhook(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	var req webhookRequest
	if err := request.DecodeJSON(r, &req); err != nil {
		return err
	}
	owner := p.User
	if req.Owner != "" && req.Owner != p.User {
		if !p.Scope().Admin {
			return problem.New(http.StatusForbidden, "forbidden", "only an admin can subscribe to another user's tasks")
		}
		if m, bad := textcheck.Problem(req.Owner, config.MaxOwner); bad {
			return problem.Invalid("invalid_body", "owner "+m.English(), problem.Field("owner", m))
		}
		owner = req.Owner
	}
	events, err := webhookEvents(req.Events)
	if err != nil {
		return err
	}
	secret, err := s.Webhooks.CheckTarget(r.Context(), "url", req.URL, "secret", req.Secret)
	if err != nil {
		return err
	}
	sub, err := s.Store.CreateSubscription(r.Context(), webhooks.NewSubscription{Owner: owner, URL: req.URL, Events: events, Secret: secret, CreatedBy: p.User})
	if err != nil {
		return err
	}
	v := webhookView(sub, "")
	v.Secret = secret
	w.Header().Set("Location", "/api/v1/webhooks/"+sub.SubNo)
	request.WriteJSON(w, http.StatusCreated, v)
	return nil
}

// webhookEvents validates the events a subscription asks for; none means the endings.
func webhookEvents(events []string) ([]string, error) {
	if len(events) == 0 {
		return slices.Clone(webhook.TerminalEvents), nil
	}
	if len(events) > maxWebhookEvents {
		return nil, problem.New(http.StatusUnprocessableEntity, "bad_events", fmt.Sprintf("name at most %d events", maxWebhookEvents))
	}
	var out []string
	for _, e := range events {
		if !slices.Contains(webhook.Events, e) {
			return nil, problem.New(http.StatusUnprocessableEntity, "bad_events",
				fmt.Sprintf("%s is not an event; use %s", textcheck.Echo(e), strings.Join(webhook.Events, ", "))).
				WithErrors(problem.Field("events", msg.New("field_error.unknown_event", "value", textcheck.Echo(e))))
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out, nil
}

func webhookView(sub *webhooks.Subscription, taskNo string) WebhookView {
	return WebhookView{ID: sub.SubNo, URL: sub.URL, Events: sub.Events, Owner: sub.Owner, TaskID: taskNo, CreatedAt: sub.CreatedAt.UTC()}
}

// subscription resolves the {id} path parameter to a subscription the caller may see.
func (s *Service) subscription(r *http.Request, p identity.Principal) (*webhooks.Subscription, error) {
	id := r.PathValue("id")
	if m, bad := textcheck.Problem(id, request.MaxID); bad {
		return nil, problem.Invalid("invalid_id", "the webhook id in the path is not valid: it "+m.English(), problem.Field("id", m))
	}
	sub, err := s.Store.GetSubscription(r.Context(), id, p.Scope())
	if errors.Is(err, webhooks.ErrSubscriptionNotFound) {
		return nil, problem.Say(http.StatusNotFound, "webhook_not_found", nil)
	}
	return sub, err
}

func (s *Service) taskNoOf(ctx context.Context, sub *webhooks.Subscription) string {
	if sub.TaskID == nil {
		return ""
	}
	if t, err := s.Store.GetByID(ctx, *sub.TaskID); err == nil {
		return t.TaskNo
	}
	return ""
}

// ListWebhooks answers GET /api/v1/webhooks[?owner=] (an admin sees everyone's).
func (s *Service) ListWebhooks(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	owner, err := identity.OwnerQuery(r.URL.Query(), p, msg.New("field_error.others_webhooks"))
	if err != nil {
		return err
	}
	subs, err := s.Store.ListSubscriptions(r.Context(), p.Scope(), owner, 500)
	if err != nil {
		return err
	}
	request.WriteItems(w, subs, func(sub *webhooks.Subscription) WebhookView { return webhookView(sub, "") })
	return nil
}

// GetWebhook answers GET /api/v1/webhooks/{id}: one subscription, without its secret.
func (s *Service) GetWebhook(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	sub, err := s.subscription(r, p)
	if err != nil {
		return err
	}
	request.WriteJSON(w, http.StatusOK, webhookView(sub, s.taskNoOf(r.Context(), sub)))
	return nil
}

// DeleteWebhook answers DELETE /api/v1/webhooks/{id}: nothing more is sent to the URL.
func (s *Service) DeleteWebhook(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	sub, err := s.subscription(r, p)
	if err != nil {
		return err
	}
	if err := s.Store.DeleteSubscription(r.Context(), sub.SubNo, p.Scope()); err != nil && !errors.Is(err, webhooks.ErrSubscriptionNotFound) {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// ListDeliveries answers GET /api/v1/webhooks/{id}/deliveries[?state=&limit=&cursor=]: the
// deliveries with their attempts, newest first.
func (s *Service) ListDeliveries(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	sub, err := s.subscription(r, p)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f := webhooks.DeliveryFilter{Limit: 50, State: webhooks.DeliveryState(q.Get("state"))}
	var errs []problem.FieldError
	switch f.State {
	case "", webhooks.DeliveryPending, webhooks.DeliverySending, webhooks.DeliveryDelivered, webhooks.DeliveryDead:
	default:
		errs = append(errs, problem.Field("state", textcheck.OneOf(string(webhooks.DeliveryPending), string(webhooks.DeliverySending),
			string(webhooks.DeliveryDelivered), string(webhooks.DeliveryDead))))
	}
	errs = append(errs, request.QueryPage(q, &f.Limit, &f.Before)...)
	if len(errs) > 0 {
		return problem.Invalid("invalid_query", "the query has invalid parameters", errs...)
	}
	ds, err := s.Store.Deliveries(r.Context(), sub.ID, f)
	if err != nil {
		return err
	}
	ids := make([]int64, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
	}
	attempts, err := s.Store.DeliveryAttempts(r.Context(), ids)
	if err != nil {
		return err
	}
	out := struct {
		Items      []DeliveryView `json:"items"`
		NextCursor string         `json:"next_cursor,omitempty"`
	}{Items: make([]DeliveryView, len(ds))}
	for i := range ds {
		out.Items[i] = deliveryView(&ds[i], attempts[ds[i].ID])
	}
	if len(ds) == f.Limit {
		out.NextCursor = strconv.FormatInt(ds[len(ds)-1].ID, 10)
	}
	request.WriteJSON(w, http.StatusOK, out)
	return nil
}

func deliveryView(d *webhooks.Delivery, attempts []webhooks.DeliveryAttempt) DeliveryView {
	v := DeliveryView{ID: d.DeliveryNo, EventID: webhook.EventID(d.EventID), Event: d.Event, TaskID: d.TaskNo, State: d.State,
		Attempts: make([]DeliveryAttemptView, len(attempts)), DeliveredAt: taskview.UTC(d.DeliveredAt), CreatedAt: d.CreatedAt.UTC()}
	if d.State == webhooks.DeliveryPending {
		v.NextAt = taskview.UTC(&d.DueAt)
	}
	for i, a := range attempts {
		av := DeliveryAttemptView{Attempt: a.Attempt, At: a.CreatedAt.UTC(), LatencyMS: a.LatencyMS, Error: a.Error}
		if a.StatusCode != nil {
			av.StatusCode = *a.StatusCode
		}
		v.Attempts[i] = av
	}
	return v
}

// Redeliver answers POST /api/v1/webhooks/{id}/deliveries/{delivery}/redeliver: 202 and the
// delivery, queued again at once.
func (s *Service) Redeliver(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	sub, err := s.subscription(r, p)
	if err != nil {
		return err
	}
	no := r.PathValue("delivery")
	if m, bad := textcheck.Problem(no, request.MaxID); bad {
		return problem.Invalid("invalid_id", "the delivery id in the path is not valid: it "+m.English(), problem.Field("delivery", m))
	}
	d, err := s.Store.Redeliver(r.Context(), sub.ID, no)
	if errors.Is(err, webhooks.ErrDeliveryNotFound) {
		return problem.Say(http.StatusNotFound, "delivery_not_found", nil)
	}
	if err != nil {
		return err
	}
	attempts, err := s.Store.DeliveryAttempts(r.Context(), []int64{d.ID})
	if err != nil {
		return err
	}
	request.WriteJSON(w, http.StatusAccepted, deliveryView(d, attempts[d.ID]))
	return nil
}

// SubmittedView is the webhook a submit's notify_url made or bound (res.Subscription), with
// its secret when this submit created it; nil when the submit asked for none.
func SubmittedView(res jobs.SubmitResult) *WebhookView {
	if res.Subscription == nil {
		return nil
	}
	v := webhookView(res.Subscription, res.Task.TaskNo)
	if res.SubscriptionCreated {
		v.Secret = res.Subscription.Secret
	}
	return &v
}
