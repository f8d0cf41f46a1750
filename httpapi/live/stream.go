package live

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/taskcenter/taskcenter/httpapi/identity"
	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/httpapi/request"
	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/internal/textcheck"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/store"
)

// This file serves live task events as Server-Sent Events (httpapi routes them here):
//
//	GET /api/v1/tasks/{id}/events   one task; ends after its terminal event
//	GET /api/v1/events[?owner=]      every task the caller may see
//
// Two event types, both carrying the task view's JSON (the same as GET /api/v1/tasks/{id}
// without attempts and logs):
//
//	event: status     a committed status change; id is its task_events id, and the view has
//	                  an "event" member naming the change (task.started, task.succeeded, …)
//	event: progress   a progress write; id repeats the last status id, so resuming from it
//	                  loses nothing
//
// Last-Event-ID (header, or ?last_event_id= for clients that cannot set headers) replays
// every status change after it from the outbox, then goes on live.

// EventView is the change a status event announces.
type EventView struct {
	ID      int64        `json:"id"`
	Name    string       `json:"name"`
	Status  store.Status `json:"status"`
	Attempt int          `json:"attempt"`
	Actor   string       `json:"actor"`
	At      time.Time    `json:"at"`
}

// StreamView is the data of a stream event: the task view, and for status events the change.
type StreamView struct {
	task.View
	Event *EventView `json:"event,omitempty"`
}

// replayLimit bounds one outbox read of a replay; a longer replay reads again.
const replayLimit = 500

// sseWriter writes one stream's events.
type sseWriter struct {
	w       http.ResponseWriter
	ctl     *http.ResponseController
	timeout time.Duration
	buf     bytes.Buffer
}

func (s *sseWriter) flush() error {
	s.ctl.SetWriteDeadline(time.Now().Add(s.timeout)) //nolint:errcheck // not supported by test recorders
	_, err := s.w.Write(s.buf.Bytes())
	s.buf.Reset()
	if err == nil {
		err = s.ctl.Flush()
	}
	return err
}

// event writes one event; id < 0 sends none.
func (s *sseWriter) event(kind string, id int64, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	if id >= 0 {
		fmt.Fprintf(&s.buf, "id: %d\n", id)
	}
	fmt.Fprintf(&s.buf, "event: %s\ndata: %s\n\n", kind, b)
	return s.flush()
}

func (s *sseWriter) comment(text string) error {
	fmt.Fprintf(&s.buf, ": %s\n\n", text)
	return s.flush()
}

// lastEventID reads where a client resumes from; -1 when it starts afresh.
func lastEventID(r *http.Request) (int64, error) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("last_event_id")
	}
	if v == "" {
		return -1, nil
	}
	id, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || id < 0 {
		return 0, problem.Invalid("invalid_last_event_id", "Last-Event-ID must be an event id this API sent",
			problem.Field("Last-Event-ID", msg.New("field_error.event_id")))
	}
	return id, nil
}

// openStream subscribes to the hub and starts the response; the caller must unsubscribe.
func (s Streams) openStream(w http.ResponseWriter, r *http.Request, p identity.Principal, match func(owner, taskNo string) bool) (*Subscriber, int64, *sseWriter, error) {
	if s.Hub == nil {
		return nil, 0, nil, problem.New(http.StatusServiceUnavailable, "streams_unavailable", "live events are not available on this server; poll GET /api/v1/tasks/{id}")
	}
	sub, safe, err := s.Hub.Subscribe(r.Context(), p.User, match)
	switch {
	case errors.Is(err, ErrTooManyStreams):
		pr := problem.New(http.StatusTooManyRequests, "too_many_streams",
			fmt.Sprintf("you already have %d live event streams open on this server; close one (or poll) and try again", s.Hub.Limits().MaxPerUser))
		pr.WithRetryAfter(int(s.Hub.Limits().Retry.Seconds()))
		return nil, 0, nil, pr
	case errors.Is(err, ErrClosed):
		pr := problem.New(http.StatusServiceUnavailable, "streams_unavailable", "the server is shutting down; reconnect shortly")
		pr.WithRetryAfter(1)
		return nil, 0, nil, pr
	case err != nil:
		return nil, 0, nil, err
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	sw := &sseWriter{w: w, ctl: http.NewResponseController(w), timeout: s.Hub.Limits().WriteTimeout}
	fmt.Fprintf(&sw.buf, "retry: %d\n\n", s.Hub.Limits().Retry.Milliseconds())
	return sub, safe, sw, nil
}

// TaskEvents answers GET /api/v1/tasks/{id}/events.
func (s Streams) TaskEvents(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	ctx := r.Context()
	id, err := request.TaskID(r)
	if err != nil {
		return err
	}
	after, err := lastEventID(r)
	if err != nil {
		return err
	}
	t, err := s.Store.Get(ctx, id, p.Scope())
	if err != nil {
		return err
	}
	if after >= 0 && t.Status.Terminal() {
		// A client resuming a finished task it has seen to the end: 204 tells an EventSource
		// to stop reconnecting.
		more, err := s.Store.TaskEvents(ctx, t.ID, after, 1)
		if err != nil {
			return err
		}
		if len(more) == 0 {
			w.WriteHeader(http.StatusNoContent)
			return nil
		}
	}
	taskNo := t.TaskNo
	sub, safe, sw, err := s.openStream(w, r, p, func(_, no string) bool { return no == taskNo })
	if err != nil {
		return err
	}
	defer s.Hub.Unsubscribe(sub)
	st := &taskStream{s: s, sw: sw, scope: p.Scope(), task: t, cursor: after}

	if after < 0 {
		// A fresh client: the task as it is, current up to safe.
		st.cursor = safe
		if t, err = s.Store.Get(ctx, id, p.Scope()); err != nil {
			return nil
		}
		st.task = t
		st.view = s.View(ctx, t)
		if err := sw.event("status", st.cursor, StreamView{View: st.view}); err != nil || t.Status.Terminal() {
			return nil
		}
	} else {
		// A resuming client: every change after its last id, up to safe.
		done, err := st.replay(ctx, safe)
		if err != nil || done {
			return nil
		}
		if st.cursor < safe {
			st.cursor = safe
		}
		if err := sw.comment("resumed"); err != nil {
			return nil
		}
	}
	return s.follow(ctx, sub, sw, st.handle)
}

// follow relays the hub's messages to one stream until it ends, sending keep-alives.
func (s Streams) follow(ctx context.Context, sub *Subscriber, sw *sseWriter, handle func(context.Context, Message) (bool, error)) error {
	keepAlive := time.NewTicker(s.Hub.Limits().KeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sub.Gone():
			return nil // dropped (too far behind) or shutting down: the client resumes
		case <-keepAlive.C:
			if err := sw.comment("keep-alive"); err != nil {
				return nil
			}
		case m := <-sub.Messages():
			done, err := handle(ctx, m)
			if err != nil || done {
				return nil
			}
		}
	}
}

// taskStream is the state of one task's stream.
type taskStream struct {
	s      Streams
	sw     *sseWriter
	scope  store.Scope
	task   *store.Task
	view   task.View
	cursor int64
}

// replay sends the task's events in (cursor, upto] from the outbox; done when the stream
// has ended (terminal, or the client went away).
func (st *taskStream) replay(ctx context.Context, upto int64) (bool, error) {
	for {
		events, err := st.s.Store.TaskEvents(ctx, st.task.ID, st.cursor, replayLimit)
		if err != nil {
			return true, err
		}
		n := 0
		for i := range events {
			if events[i].ID > upto {
				break
			}
			n++
		}
		events = events[:n]
		if len(events) == 0 && st.cursor >= 0 && st.view.ID == "" {
			// Nothing after the client's last id: it has seen everything. A finished task
			// answers "no more" (a client that reconnects gets the same), otherwise go on live.
			t, err := st.s.Store.Get(ctx, st.task.TaskNo, st.scope)
			if err != nil {
				return true, err
			}
			st.task, st.view = t, st.s.View(ctx, t)
			if t.Status.Terminal() {
				return true, st.sw.comment("the task has finished; no more events")
			}
			return false, nil
		}
		for i := range events {
			last := i == len(events)-1 && len(events) < replayLimit
			done, err := st.status(ctx, &events[i], last)
			if err != nil || done {
				return true, err
			}
		}
		if len(events) < replayLimit {
			return false, nil
		}
	}
}

// status sends one committed change with the task as it now is. The stream ends after a
// terminal change when the task is still in that state (a retry since would follow).
func (st *taskStream) status(ctx context.Context, e *store.Event, latest bool) (bool, error) {
	t, err := st.s.Store.Get(ctx, st.task.TaskNo, st.scope)
	if err != nil {
		return true, err
	}
	st.task, st.view, st.cursor = t, st.s.View(ctx, t), e.ID
	if err := st.sw.event("status", e.ID, StreamView{View: st.view, Event: eventView(e)}); err != nil {
		return true, err
	}
	return latest && e.Status.Terminal() && t.Status == e.Status && t.Attempt == e.Attempt, nil
}

// handle relays one hub message.
func (st *taskStream) handle(ctx context.Context, m Message) (bool, error) {
	switch {
	case m.Event != nil:
		if m.Event.ID <= st.cursor {
			return false, nil
		}
		return st.status(ctx, m.Event, true)
	case m.Progress != nil:
		if st.view.Status != store.StatusRunning || m.Progress.Progress.Current < st.view.Progress.Current {
			return false, nil
		}
		st.view = withProgress(st.view, m.Progress)
		return false, st.sw.event("progress", st.cursor, StreamView{View: st.view})
	}
	return false, nil
}

// withProgress is v moved to a progress notice: the progress and the counts of the same
// committed batch (a notice never takes the counts back).
func withProgress(v task.View, n *jobs.Notice) task.View {
	v.Progress, v.UpdatedAt = *n.Progress, n.Progress.UpdatedAt
	if n.Counts != nil && n.Counts.Total >= v.Counts.Total {
		v.Counts = *n.Counts
	}
	return v
}

func eventView(e *store.Event) *EventView {
	return &EventView{ID: e.ID, Name: e.Event, Status: e.Status, Attempt: e.Attempt, Actor: e.Actor, At: e.CreatedAt.UTC()}
}

// maxCachedViews bounds the task views one scope stream keeps for its progress events.
const maxCachedViews = 256

// ScopeEvents answers GET /api/v1/events?owner=: every task the caller may see.
func (s Streams) ScopeEvents(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	ctx := r.Context()
	after, err := lastEventID(r)
	if err != nil {
		return err
	}
	scope := p.Scope()
	owner := r.URL.Query().Get("owner")
	if m, bad := textcheck.Problem(owner, request.MaxQueryValue); bad {
		return problem.Invalid("invalid_query", "the query has invalid parameters", problem.Field("owner", m))
	}
	if owner != "" && !scope.Admin && owner != p.User {
		return problem.Invalid("invalid_query", "the query has invalid parameters", problem.Field("owner", msg.New("field_error.follow_others")))
	}
	if !scope.Admin {
		owner = p.User
	}
	match := func(o, _ string) bool { return owner == "" || o == owner }
	sub, safe, sw, err := s.openStream(w, r, p, match)
	if err != nil {
		return err
	}
	defer s.Hub.Unsubscribe(sub)
	ss := &scopeStream{s: s, sw: sw, scope: scope, views: map[string]task.View{}, cursor: safe}
	if after < 0 {
		// Tell the browser where it is current from without sending an event, so that a
		// reconnect resumes from here.
		fmt.Fprintf(&sw.buf, "id: %d\n\n", safe)
		if err := sw.flush(); err != nil {
			return nil
		}
	} else {
		ss.cursor = after
		for ss.cursor < safe {
			events, err := s.Store.ScopeEvents(ctx, scope, owner, ss.cursor, replayLimit)
			if err != nil {
				return nil
			}
			for i := range events {
				if events[i].ID > safe {
					break
				}
				if err := ss.status(ctx, &events[i]); err != nil {
					return nil
				}
			}
			if len(events) < replayLimit {
				break
			}
		}
		ss.cursor = max(ss.cursor, safe)
		fmt.Fprintf(&sw.buf, "id: %d\n\n", ss.cursor)
		if err := sw.flush(); err != nil {
			return nil
		}
	}
	return s.follow(ctx, sub, sw, ss.handle)
}

// scopeStream is the state of one all-tasks stream.
type scopeStream struct {
	s      Streams
	sw     *sseWriter
	scope  store.Scope
	views  map[string]task.View // task_no → last view sent, for progress events
	cursor int64
}

func (ss *scopeStream) remember(v task.View) {
	if _, ok := ss.views[v.ID]; !ok && len(ss.views) >= maxCachedViews {
		for k := range ss.views { // forget one at random
			delete(ss.views, k)
			break
		}
	}
	if v.Status.Terminal() {
		delete(ss.views, v.ID)
		return
	}
	ss.views[v.ID] = v
}

// status sends one committed change with the task as it now is. A task the scope cannot
// see (the hub's filter is by owner; the store checks again) is skipped.
func (ss *scopeStream) status(ctx context.Context, e *store.Event) error {
	ss.cursor = max(ss.cursor, e.ID)
	t, err := ss.s.Store.Get(ctx, e.TaskNo, ss.scope)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	v := ss.s.View(ctx, t)
	ss.remember(v)
	return ss.sw.event("status", e.ID, StreamView{View: v, Event: eventView(e)})
}

func (ss *scopeStream) handle(ctx context.Context, m Message) (bool, error) {
	switch {
	case m.Event != nil:
		if m.Event.ID <= ss.cursor {
			return false, nil
		}
		return false, ss.status(ctx, m.Event)
	case m.Progress != nil:
		n := m.Progress
		v, ok := ss.views[n.TaskNo]
		if !ok {
			t, err := ss.s.Store.Get(ctx, n.TaskNo, ss.scope)
			if errors.Is(err, store.ErrNotFound) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			v = ss.s.View(ctx, t)
		}
		if v.Status != store.StatusRunning || n.Progress.Current < v.Progress.Current {
			return false, nil
		}
		v = withProgress(v, n)
		ss.remember(v)
		return false, ss.sw.event("progress", ss.cursor, StreamView{View: v})
	}
	return false, nil
}

// Streams serves the live event streams of /api/v1/events and /api/v1/tasks/{id}/events,
// fed by the hub. Its handlers have the API's shape: the caller is identified, and an error
// is answered by httpapi as a problem.
type Streams struct {
	// Hub is the process's follower of task events; nil (no Redis) answers 503
	// streams_unavailable.
	Hub *Hub
	// Store reads the tasks and the outbox the streams replay.
	Store *store.Store
	// View renders a task as the API shows it, with its live progress (httpapi's view).
	View func(ctx context.Context, t *store.Task) task.View
}
