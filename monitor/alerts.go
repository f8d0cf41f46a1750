package monitor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/cleanup"
	"github.com/taskcenter/taskcenter/jobs/webhook"
)

// AlertConfig configures alert delivery.
type AlertConfig struct {
	// WebhookURL, when set, receives each alert as a JSON POST.
	WebhookURL string
	// WebhookTimeout bounds one delivery attempt.
	WebhookTimeout time.Duration
	// WebhookRetries is how many more attempts a failed delivery gets.
	WebhookRetries int
}

// AlertEvent is the body of an alert, logged and posted to the webhook.
type AlertEvent struct {
	Kind     string    `json:"kind"` // task_failed | backlog_high
	At       time.Time `json:"at"`
	Summary  string    `json:"summary"`
	TaskNo   string    `json:"task_no,omitempty"`
	Type     string    `json:"type,omitempty"`
	Owner    string    `json:"owner,omitempty"`
	Attempts int       `json:"attempts,omitempty"`
	Queue    string    `json:"queue,omitempty"`
	Waiting  int       `json:"waiting,omitempty"`
	Since    time.Time `json:"since,omitzero"`
}

// Alerter raises alerts: a log line at ERROR with "alert":<kind>, a metric, and an optional
// webhook delivered in the background with a timeout and a bounded retry. Raising an alert
// never blocks the caller: when the delivery queue is full the webhook call is dropped (and
// the drop logged); the log line is always written.
type Alerter struct {
	cfg     AlertConfig
	metrics *Metrics
	logger  *slog.Logger
	client  *http.Client
	queue   chan AlertEvent
	wg      sync.WaitGroup

	mu     sync.Mutex
	closed bool
}

var (
	_ jobs.Alerter           = (*Alerter)(nil)
	_ cleanup.BacklogAlerter = (*Alerter)(nil)
	_ webhook.Alerter        = (*Alerter)(nil)
)

// NewAlerter starts the webhook sender when a URL is configured. metrics may be nil.
func NewAlerter(cfg AlertConfig, metrics *Metrics, logger *slog.Logger) *Alerter {
	a := &Alerter{cfg: cfg, metrics: metrics, logger: logger.With("component", "alerts")}
	if cfg.WebhookURL != "" {
		a.client = &http.Client{Timeout: cfg.WebhookTimeout}
		a.queue = make(chan AlertEvent, 256)
		a.wg.Go(a.deliverLoop)
	}
	return a
}

// TaskFailed implements jobs.Alerter.
func (a *Alerter) TaskFailed(ctx context.Context, al jobs.Alert) {
	a.raise(ctx, AlertEvent{Kind: "task_failed", At: time.Now().UTC(), TaskNo: al.TaskNo, Type: al.Type, Owner: al.Owner,
		Attempts: al.Attempts, Summary: fmt.Sprintf("task %s (%s) failed after %d attempts: %s", al.TaskNo, al.Type, al.Attempts, al.Message)})
}

// BacklogHigh implements cleanup.BacklogAlerter.
func (a *Alerter) BacklogHigh(ctx context.Context, queue string, waiting, threshold int, since time.Time) {
	a.raise(ctx, AlertEvent{Kind: "backlog_high", At: time.Now().UTC(), Queue: queue, Waiting: waiting, Since: since.UTC(),
		Summary: fmt.Sprintf("queue %s has had more than %d tasks waiting since %s (now %d)", queue, threshold, since.UTC().Format(time.RFC3339), waiting)})
}

// WebhookDead implements webhook.Alerter: a delivery ran out of retries.
func (a *Alerter) WebhookDead(ctx context.Context, d webhook.Dead) {
	a.raise(ctx, AlertEvent{Kind: "webhook_dead", At: time.Now().UTC(), TaskNo: d.TaskNo, Owner: d.Owner, Attempts: d.Attempts,
		Summary: fmt.Sprintf("webhook delivery %s of %s (%s, task %s) to subscription %s gave up after %d attempts: %s",
			d.DeliveryNo, d.EventID, d.Event, d.TaskNo, d.SubscriptionNo, d.Attempts, d.LastError)})
}

func (a *Alerter) raise(ctx context.Context, ev AlertEvent) {
	a.logger.ErrorContext(ctx, "ALERT "+ev.Summary, "alert", ev.Kind, "task_no", ev.TaskNo, "type", ev.Type, "queue", ev.Queue)
	if a.metrics != nil {
		a.metrics.AlertRaised(ev.Kind)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.queue == nil || a.closed {
		return
	}
	select {
	case a.queue <- ev:
	default:
		a.logger.Warn("alert webhook queue is full; this alert was only logged", "alert", ev.Kind)
	}
}

func (a *Alerter) deliverLoop() {
	for ev := range a.queue {
		body, _ := json.Marshal(ev)
		var err error
		for try := 0; try <= a.cfg.WebhookRetries; try++ {
			if try > 0 {
				time.Sleep(time.Duration(try) * time.Second)
			}
			if err = a.post(body); err == nil {
				break
			}
		}
		if err != nil {
			a.logger.Warn("alert webhook failed; the alert stays in the log", "alert", ev.Kind, "err", err, "attempts", a.cfg.WebhookRetries+1)
		}
	}
}

func (a *Alerter) post(body []byte) error {
	req, err := http.NewRequest(http.MethodPost, a.cfg.WebhookURL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := a.client.Do(req)
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode >= 300 {
		return fmt.Errorf("webhook answered %s", res.Status)
	}
	return nil
}

// Close stops the webhook sender after it has tried what is queued, waiting at most wait.
func (a *Alerter) Close(wait time.Duration) {
	a.mu.Lock()
	if a.queue == nil || a.closed {
		a.mu.Unlock()
		return
	}
	a.closed = true
	close(a.queue)
	a.mu.Unlock()
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(wait):
		a.logger.Warn("alert webhook still busy at shutdown; remaining alerts were only logged")
	}
}
