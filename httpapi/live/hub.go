// Package live is task events as they happen: the process's one follower of them (the Hub,
// hub.go: a Redis subscription to the workers' notices and a reader of the outbox,
// task_events), fanned out in order to the live event streams it serves as Server-Sent
// Events (Streams, stream.go).
//
// The streams are API endpoints: httpapi routes GET /api/v1/events and
// GET /api/v1/tasks/{id}/events to Streams, which identifies nobody itself (the caller is an
// httpapi/identity Principal) and refuses with httpapi/problem problems. live never imports
// httpapi.
package live

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/store"
)

// Limits tune the live event streams (GET /api/v1/events, GET /api/v1/tasks/{id}/events).
type Limits struct {
	// MaxPerUser is how many streams one user may hold open on one API process; more answer
	// 429. Default 20 (a browser keeps about one per open page).
	MaxPerUser int
	// KeepAlive is how often an idle stream sends a comment line, so proxies and browsers
	// keep it open. Default 15s.
	KeepAlive time.Duration
	// Poll is how often the process reads the outbox even without a pub/sub wake-up: a lost
	// message only delays an event by this much. Default 1.5s.
	Poll time.Duration
	// Retry is the reconnect delay the stream suggests to clients (the "retry:" field).
	// Default 3s.
	Retry time.Duration
	// Buffer is how many undelivered notices a stream may have queued; a stream further
	// behind is closed (the client reconnects and resumes from Last-Event-ID). Default 256.
	Buffer int
	// WriteTimeout bounds each write to a stream: a client that stops reading is dropped
	// after it. Default 10s.
	WriteTimeout time.Duration
}

// WithDefaults fills what l leaves at zero from the configuration's defaults, their one home.
func (l Limits) WithDefaults() Limits {
	d := config.Default().Events
	l.MaxPerUser = cmp.Or(max(l.MaxPerUser, 0), d.MaxStreamsPerUser)
	l.KeepAlive = cmp.Or(max(l.KeepAlive, 0), d.KeepAlive)
	l.Poll = cmp.Or(max(l.Poll, 0), d.PollInterval)
	l.Retry = cmp.Or(max(l.Retry, 0), d.Retry)
	l.Buffer = cmp.Or(max(l.Buffer, 0), d.Buffer)
	l.WriteTimeout = cmp.Or(max(l.WriteTimeout, 0), d.WriteTimeout)
	return l
}

// gapWait is how long the outbox reader waits for a hole in the event ids to fill: ids are
// taken when a transition's statement starts and become visible when it commits, so a
// lower id can appear after a higher one. A hole still open after gapWait is a rolled-back
// statement and is skipped.
const gapWait = 2 * time.Second

// Hub is the process's one Redis subscription to jobs.EventsChannel and its one reader of
// the outbox (task_events), fanning both out to the process's streams.
//
// Progress notices go straight to the streams that may see the task. A "changed" notice
// carries no state: it only makes the hub read the outbox now instead of at its next poll.
// The hub reads the outbox in id order and keeps a high-water mark, safe: every event with
// id ≤ safe has committed (or never will) and has been handed to every stream registered
// at the time. A stream registers and reads safe under the same lock, so it replays
// (Last-Event-ID, safe] from the outbox and gets everything after safe from the hub: no gap,
// no duplicate.
//
// The hub starts with the first stream and runs until Close.
type Hub struct {
	rdb    redis.UniversalClient
	store  *store.Store
	limits Limits
	logger *slog.Logger

	mu      sync.Mutex
	clients map[*Subscriber]struct{}
	perUser map[string]int
	safe    int64
	started bool
	closed  bool

	wake    chan struct{} // read the outbox again soon (waiting at a hole)
	done    chan struct{} // closed by close
	stopped chan struct{} // closed when run returns
	ready   chan struct{} // closed once subscribed and the outbox position is known
}

// Subscriber is one stream's registration.
type Subscriber struct {
	user  string
	match func(owner, taskNo string) bool
	ch    chan Message
	// gone is closed when the hub drops the stream (too far behind, or shutting down).
	gone chan struct{}
}

// Message is a committed event or a progress notice.
type Message struct {
	Event    *store.Event
	Progress *jobs.Notice
}

// Why Subscribe refuses a stream.
var (
	ErrTooManyStreams = errors.New("too many streams")
	ErrClosed         = errors.New("the server is shutting down")
)

// NewHub returns the hub of one process; it starts with the first stream.
func NewHub(rdb redis.UniversalClient, st *store.Store, limits Limits, logger *slog.Logger) *Hub {
	return &Hub{rdb: rdb, store: st, limits: limits.WithDefaults(), logger: logger,
		clients: map[*Subscriber]struct{}{}, perUser: map[string]int{},
		wake: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{}), ready: make(chan struct{})}
}

// Subscribe registers a stream of user's seeing the tasks match accepts. It returns the
// outbox position the stream is current from: the stream replays events up to it from the
// outbox itself and gets later ones from the hub.
func (h *Hub) Subscribe(ctx context.Context, user string, match func(owner, taskNo string) bool) (*Subscriber, int64, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, 0, ErrClosed
	}
	if h.perUser[user] >= h.limits.MaxPerUser {
		h.mu.Unlock()
		return nil, 0, ErrTooManyStreams
	}
	h.perUser[user]++ // held while waiting for the hub to start: the limit counts it
	if !h.started {
		h.started = true
		go h.run()
	}
	h.mu.Unlock()
	select {
	case <-h.ready:
	case <-ctx.Done():
		h.release(user)
		return nil, 0, ctx.Err()
	case <-h.done:
		h.release(user)
		return nil, 0, ErrClosed
	}
	sub := &Subscriber{user: user, match: match, ch: make(chan Message, h.limits.Buffer), gone: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		h.perUser[user]--
		return nil, 0, ErrClosed
	}
	h.clients[sub] = struct{}{}
	return sub, h.safe, nil
}

func (h *Hub) release(user string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.perUser[user]--
	if h.perUser[user] <= 0 {
		delete(h.perUser, user)
	}
}

// Unsubscribe ends a stream's registration (a no-op when the hub dropped it already).
func (h *Hub) Unsubscribe(sub *Subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.clients[sub]; ok {
		h.dropLocked(sub)
	}
}

func (h *Hub) dropLocked(sub *Subscriber) {
	delete(h.clients, sub)
	close(sub.gone)
	h.perUser[sub.user]--
	if h.perUser[sub.user] <= 0 {
		delete(h.perUser, sub.user)
	}
}

// Streams is how many streams are registered (tests and metrics).
func (h *Hub) Streams() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients)
}

// dispatchLocked hands m to every stream that may see it. A stream whose buffer is full
// is dropped rather than waited for: one client that does not read never holds up others.
func (h *Hub) dispatchLocked(owner, taskNo string, m Message) {
	for sub := range h.clients {
		if !sub.match(owner, taskNo) {
			continue
		}
		select {
		case sub.ch <- m:
		default:
			h.logger.Info("event stream dropped: the client is not keeping up", "user", sub.user)
			h.dropLocked(sub)
		}
	}
}

// Close stops the hub and ends every stream; it waits for the hub's goroutine.
func (h *Hub) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	started := h.started
	close(h.done)
	for sub := range h.clients {
		h.dropLocked(sub)
	}
	h.mu.Unlock()
	if started {
		<-h.stopped
	}
}

// run subscribes to the events channel, then follows it and the outbox until close.
func (h *Hub) run() {
	defer close(h.stopped)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-h.done:
			cancel()
		case <-h.stopped:
		}
	}()
	ps := h.rdb.Subscribe(ctx, jobs.EventsChannel)
	defer ps.Close()
	// Wait for the subscription to be confirmed, so that a stream that starts now sees
	// every later progress write (a Redis outage does not hold streams up: the outbox
	// poll still delivers status changes).
	rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
	if _, err := ps.Receive(rctx); err != nil && ctx.Err() == nil {
		h.logger.Warn("event streams: cannot subscribe to Redis yet; status changes still arrive by polling", "err", err)
	}
	rcancel()
	for {
		last, err := h.store.LastEventID(ctx)
		if err == nil {
			h.mu.Lock()
			h.safe = last
			h.mu.Unlock()
			break
		}
		if ctx.Err() != nil {
			return
		}
		h.logger.Warn("event streams: cannot read the outbox position yet", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	close(h.ready)

	msgs := ps.Channel(redis.WithChannelSize(1024))
	poll := time.NewTicker(h.limits.Poll)
	defer poll.Stop()
	var hole holeTracker
	for {
		select {
		case <-ctx.Done():
			return
		case msg, ok := <-msgs:
			if !ok {
				return
			}
			var n jobs.Notice
			if json.Unmarshal([]byte(msg.Payload), &n) != nil {
				continue
			}
			switch n.Kind {
			case jobs.NoticeProgress:
				if n.Progress != nil {
					h.mu.Lock()
					h.dispatchLocked(n.Owner, n.TaskNo, Message{Progress: &n})
					h.mu.Unlock()
				}
			case jobs.NoticeChanged:
				// Read now, in line: a progress write published after the change is then
				// handed out after it, as it happened.
				h.readOutbox(ctx, &hole)
			}
		case <-h.wake:
			h.readOutbox(ctx, &hole)
		case <-poll.C:
			h.readOutbox(ctx, &hole)
		}
	}
}

// holeTracker remembers since when the outbox reader has waited at a hole in the ids.
type holeTracker struct {
	id    int64
	since time.Time
}

// readOutbox hands newly committed events to the streams, in id order, advancing safe.
func (h *Hub) readOutbox(ctx context.Context, hole *holeTracker) {
	for {
		h.mu.Lock()
		from := h.safe
		h.mu.Unlock()
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		events, err := h.store.EventsAfter(qctx, from, 500)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				h.logger.Debug("event streams: outbox read failed; retrying at the next poll", "err", err)
			}
			return
		}
		h.mu.Lock()
		stuck := false
		for i := range events {
			e := &events[i]
			if e.ID != h.safe+1 {
				// A hole: an id taken by a transition that has not committed yet (or rolled
				// back). Wait for it a little, then skip it.
				if hole.id != h.safe+1 {
					hole.id, hole.since = h.safe+1, time.Now()
				}
				if time.Since(hole.since) < gapWait {
					stuck = true
					break
				}
			}
			h.safe = e.ID
			h.dispatchLocked(e.Owner, e.TaskNo, Message{Event: e})
		}
		h.mu.Unlock()
		if stuck {
			// Look again shortly rather than at the next poll.
			time.AfterFunc(100*time.Millisecond, func() {
				select {
				case h.wake <- struct{}{}:
				default:
				}
			})
			return
		}
		if len(events) < 500 {
			return
		}
	}
}

// Limits returns the limits the hub applies (defaults filled in).
func (h *Hub) Limits() Limits { return h.limits }

// Messages delivers the stream's events and progress notices.
func (s *Subscriber) Messages() <-chan Message { return s.ch }

// Gone is closed when the hub drops the stream (too far behind, or shutting down).
func (s *Subscriber) Gone() <-chan struct{} { return s.gone }
