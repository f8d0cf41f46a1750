// Package webhook delivers task events to the URLs users subscribe. The events
// come from the transactional outbox (task_events), which every state transition writes in
// the statement that commits it, so no event exists for a change that did not commit and no
// committed change lacks one. The Dispatcher runs in the worker role: it fans each event out
// into one delivery per matching subscription, then sends the deliveries with a timeout,
// retrying with exponential back-off and jitter until the receiver answers 2xx or the
// delivery's window (24 h by default) runs out, when the delivery is dead and one alert is
// raised. Delivery is at least once; the event id header is stable, so receivers
// de-duplicate. Per subscription and task, events are sent in the order they happened: a
// task's next delivery waits until the one before is delivered or dead (ClaimDeliveries in
// store/webhooks), and each body carries the event's sequence among its task's events.
package webhook

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/internal/outage"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/webhooks"
)

// Config tunes the dispatcher. Zero fields take their defaults.
type Config struct {
	// PollInterval is how often new events and due deliveries are looked for. Default 1s.
	PollInterval time.Duration
	// FanOutBatch is how many events one fan-out transaction takes. Default 500.
	FanOutBatch int
	// Concurrency caps the attempts in flight in one process. Default 16.
	Concurrency int
	// PerSubscription caps one subscription's attempts in flight across all processes, so a
	// slow receiver holds back only its own deliveries. Default 4.
	PerSubscription int
	// Timeout bounds one attempt, from dialling to the end of the answer's headers. Default 10s.
	Timeout time.Duration
	// RetryBase is the first retry delay; each later one doubles, with ±20% jitter, up to
	// RetryMax. Defaults 10s and 1h.
	RetryBase time.Duration
	RetryMax  time.Duration
	// MaxAge is how long a delivery is retried before it is dead. Default 24h.
	MaxAge time.Duration
	// Retention is how long finished deliveries (delivered or dead) and their attempts are
	// kept for the deliveries API; older ones are deleted about once an hour. Default 168h.
	Retention time.Duration
}

// withDefaults fills what c leaves at zero from the configuration's defaults, their one home.
func (c Config) withDefaults() Config {
	d := config.Default().Webhooks
	c.PollInterval = cmp.Or(c.PollInterval, d.PollInterval)
	c.FanOutBatch = cmp.Or(c.FanOutBatch, 500)
	c.Concurrency = cmp.Or(c.Concurrency, d.Concurrency)
	c.PerSubscription = cmp.Or(c.PerSubscription, d.PerSubscription)
	c.Timeout = cmp.Or(c.Timeout, d.Timeout)
	c.RetryBase = cmp.Or(c.RetryBase, d.RetryBase)
	c.RetryMax = cmp.Or(c.RetryMax, d.RetryMax)
	c.MaxAge = cmp.Or(c.MaxAge, d.MaxAge)
	c.Retention = cmp.Or(c.Retention, d.Retention)
	return c
}

// Dead is a delivery that ran out of retries.
type Dead struct {
	DeliveryNo     string
	SubscriptionNo string
	Owner          string
	URL            string
	EventID        string
	Event          string
	TaskNo         string
	Attempts       int
	LastError      string
}

// Alerter is told once of each delivery that goes dead.
type Alerter interface {
	WebhookDead(ctx context.Context, d Dead)
}

// Deps are the dispatcher's collaborators.
type Deps struct {
	Store  *store.Store
	Policy *Policy
	// Alerter may be nil: a dead delivery is then only logged (at ERROR, "alert":"webhook_dead").
	Alerter Alerter
	Logger  *slog.Logger
	// Observer counts the attempts no receiver answered under
	// taskcenter_dependency_errors_total{dependency="webhook_target"}. May be nil.
	Observer outage.Observer
}

// Dispatcher fans events out and sends deliveries.
type Dispatcher struct {
	cfg    Config
	deps   Deps
	client *http.Client
	log    *slog.Logger

	cancel   context.CancelFunc
	done     chan struct{}
	inflight sync.WaitGroup
	slots    chan struct{}
	wake     chan struct{} // a delivery ended: its task's next one may be due now
	targets  *targets
}

// New returns a Dispatcher; Start runs it.
func New(cfg Config, deps Deps) *Dispatcher {
	cfg = cfg.withDefaults()
	if deps.Policy == nil {
		deps.Policy, _ = NewPolicy(nil)
	}
	log := deps.Logger.With("component", "webhooks")
	return &Dispatcher{cfg: cfg, deps: deps, client: NewHTTPClient(deps.Policy, cfg.Timeout),
		log: log, slots: make(chan struct{}, cfg.Concurrency), wake: make(chan struct{}, 1),
		targets: &targets{byHost: map[string]*outage.Tracker{}, log: log, observer: deps.Observer}}
}

// targets follows each receiver's availability by host (internal/outage's target trackers): a
// receiver that stops answering is one WARN line naming its host when it goes and one summary
// when it is back, while each attempt is only a DEBUG line and a row in the deliveries API.
type targets struct {
	mu       sync.Mutex
	byHost   map[string]*outage.Tracker
	log      *slog.Logger
	observer outage.Observer
}

// maxTargets bounds the trackers kept; past it, those of receivers that answer are dropped.
const maxTargets = 1000

// of is host's tracker.
func (t *targets) of(host string) *outage.Tracker {
	t.mu.Lock()
	defer t.mu.Unlock()
	tr, ok := t.byHost[host]
	if !ok {
		if len(t.byHost) >= maxTargets {
			maps.DeleteFunc(t.byHost, func(_ string, tr *outage.Tracker) bool { return !tr.Down() })
		}
		tr = outage.NewTarget("webhook_target", host, t.log, t.observer)
		t.byHost[host] = tr
	}
	return tr
}

// NewHTTPClient is the client deliveries are sent with: every connection's address is checked
// by the policy when it is dialled, no proxy from the environment, no redirects followed
// (a 3xx is a failed attempt), and timeout bounds each request.
func NewHTTPClient(p *Policy, timeout time.Duration) *http.Client {
	dialer := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, Control: p.control}
	return &http.Client{
		Transport: &http.Transport{
			Proxy: nil, DialContext: dialer.DialContext, TLSHandshakeTimeout: timeout, ResponseHeaderTimeout: timeout,
			MaxIdleConns: 64, MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second, ForceAttemptHTTP2: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       timeout,
	}
}

// Start runs the dispatcher until Stop.
func (d *Dispatcher) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel, d.done = cancel, make(chan struct{})
	go func() {
		defer close(d.done)
		d.loop(ctx)
	}()
}

// Stop stops taking work and waits for the attempts in flight (each bounded by the timeout).
// An attempt that does not finish is retried by any dispatcher once its lease lapses.
func (d *Dispatcher) Stop() {
	if d.cancel == nil {
		return
	}
	d.cancel()
	<-d.done
	d.inflight.Wait()
}

func (d *Dispatcher) loop(ctx context.Context) {
	t := time.NewTicker(d.cfg.PollInterval)
	defer t.Stop()
	var pruned time.Time
	for {
		d.Tick(ctx)
		if time.Since(pruned) > pruneEvery {
			d.prune(ctx)
			pruned = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-d.wake:
		}
	}
}

// Tick fans out what is new and starts the attempts that are due, as far as free slots go.
func (d *Dispatcher) Tick(ctx context.Context) {
	for ctx.Err() == nil {
		n, _, err := d.deps.Store.FanOut(ctx, d.cfg.FanOutBatch, BuildPayload)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("webhook fan-out failed; retrying next round", "err", err)
			}
			break
		}
		if n < d.cfg.FanOutBatch {
			break
		}
	}
	free := cap(d.slots) - len(d.slots)
	if free <= 0 || ctx.Err() != nil {
		return
	}
	out, err := d.deps.Store.ClaimDeliveries(ctx, free, d.cfg.PerSubscription, d.cfg.Timeout+30*time.Second)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("webhook claim failed; retrying next round", "err", err)
		}
		return
	}
	for _, o := range out {
		d.slots <- struct{}{}
		d.inflight.Go(func() {
			ended := false
			defer func() {
				<-d.slots
				// The task's next delivery to this subscription waited for this one: claim it
				// now rather than a poll interval later, or a task's events would trickle out
				// one per poll.
				if ended {
					select {
					case d.wake <- struct{}{}:
					default:
					}
				}
			}()
			ended = d.attempt(context.WithoutCancel(ctx), o)
		})
	}
}

// pruneEvery is how often finished deliveries past their retention are deleted.
const pruneEvery = time.Hour

// prune deletes finished deliveries past their retention, a bounded batch at a time.
func (d *Dispatcher) prune(ctx context.Context) {
	total := 0
	for ctx.Err() == nil {
		n, err := d.deps.Store.PruneDeliveries(ctx, d.cfg.Retention, 1000)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("could not prune old webhook deliveries; trying again in an hour", "err", err)
			}
			return
		}
		total += n
		if n < 1000 {
			break
		}
	}
	if total > 0 {
		d.log.Info("pruned old webhook deliveries", "deleted", total, "retention", d.cfg.Retention)
	}
}

// attempt sends one delivery and records how it went. It reports whether the delivery ended
// (delivered or dead).
func (d *Dispatcher) attempt(ctx context.Context, o webhooks.Outgoing) bool {
	res := d.send(ctx, o)
	now := time.Now()
	if !res.Delivered {
		end := o.WindowStart.Add(d.cfg.MaxAge)
		if now.Before(end) {
			res.NextAt = now.Add(d.backoff(o.Attempts))
			if res.NextAt.After(end) {
				res.NextAt = end // one last try at the end of the window
			}
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rec, ok, err := d.deps.Store.RecordAttempt(rctx, &o.Delivery, res)
	ended := err == nil && ok && (rec.State == webhooks.DeliveryDelivered || rec.State == webhooks.DeliveryDead)
	switch {
	case err != nil:
		d.log.Warn("could not record a webhook attempt; it will be retried when its lease lapses", "delivery", o.DeliveryNo, "err", err)
	case !ok:
		d.log.Info("webhook attempt outlived its lease; another dispatcher took the delivery over", "delivery", o.DeliveryNo)
	case rec.State == webhooks.DeliveryDead:
		dead := Dead{DeliveryNo: o.DeliveryNo, SubscriptionNo: o.SubNo, Owner: o.Owner, URL: o.URL, EventID: EventID(o.EventID),
			Event: o.Event, TaskNo: o.TaskNo, Attempts: rec.Attempts, LastError: res.Error}
		if d.deps.Alerter != nil {
			d.deps.Alerter.WebhookDead(ctx, dead)
		} else {
			d.log.Error("ALERT webhook delivery dead: "+res.Error, "alert", "webhook_dead", "delivery", o.DeliveryNo,
				"subscription", o.SubNo, "task_no", o.TaskNo, "event", o.Event, "attempts", rec.Attempts)
		}
	default:
		d.log.Debug("webhook attempt", "delivery", o.DeliveryNo, "event_id", EventID(o.EventID), "status", res.StatusCode,
			"delivered", res.Delivered, "err", res.Error, "took", res.Latency)
	}
	return ended
}

// backoff is the delay after the n-th failed attempt: base·2^(n−1), capped, ±20% jitter.
func (d *Dispatcher) backoff(n int) time.Duration {
	delay := d.cfg.RetryMax
	if n-1 < 40 {
		delay = min(d.cfg.RetryBase<<max(n-1, 0), d.cfg.RetryMax)
	}
	jitter := 0.8 + 0.4*rand.Float64()
	return time.Duration(float64(delay) * jitter)
}

// maxAnswer is how much of an answer's body is read (and dropped) so the connection can be
// reused.
const maxAnswer = 64 << 10

// send makes one attempt.
func (d *Dispatcher) send(ctx context.Context, o webhooks.Outgoing) webhooks.AttemptResult {
	start := time.Now()
	fail := func(format string, args ...any) webhooks.AttemptResult {
		return webhooks.AttemptResult{Latency: time.Since(start), Error: fmt.Sprintf(format, args...)}
	}
	u, err := d.deps.Policy.checkHost(o.URL)
	if err != nil {
		return fail("refused: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(o.Payload))
	if err != nil {
		return fail("cannot build the request: %v", err)
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "taskcenter-webhooks/1")
	h.Set(HeaderEventID, EventID(o.EventID))
	h.Set(HeaderEvent, o.Event)
	h.Set(HeaderDelivery, o.DeliveryNo)
	h.Set(HeaderSignature, Sign(o.Secret, time.Now(), o.Payload))
	res, err := d.client.Do(req)
	var refused *NotAllowedError
	switch {
	case errors.As(err, &refused), errors.Is(err, context.Canceled):
		// Our policy's refusal, or our own shutdown: the receiver was never asked.
	case err != nil:
		d.targets.of(u.Host).Fail(err)
	case res.StatusCode >= http.StatusInternalServerError:
		d.targets.of(u.Host).Fail(errors.New("HTTP " + strconv.Itoa(res.StatusCode)))
	default:
		d.targets.of(u.Host).OK()
	}
	if err != nil {
		return fail("%s", describe(err, d.cfg.Timeout))
	}
	io.Copy(io.Discard, io.LimitReader(res.Body, maxAnswer)) //nolint:errcheck // only drained for reuse
	res.Body.Close()
	r := webhooks.AttemptResult{StatusCode: res.StatusCode, Latency: time.Since(start)}
	switch {
	case res.StatusCode >= 200 && res.StatusCode < 300:
		r.Delivered = true
	case res.StatusCode >= 300 && res.StatusCode < 400:
		r.Error = "HTTP " + strconv.Itoa(res.StatusCode) + ": redirects are not followed; subscribe the final URL"
	default:
		r.Error = "HTTP " + strconv.Itoa(res.StatusCode)
	}
	return r
}

// describe turns a transport error into words for the deliveries API.
func describe(err error, timeout time.Duration) string {
	var na *NotAllowedError
	var ne net.Error
	switch {
	case errors.As(err, &na):
		return "refused: " + na.Reason.English()
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return "no answer within " + timeout.String()
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Op + ": " + op.Err.Error()
	}
	return err.Error()
}
