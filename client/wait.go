package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// WaitOption tunes Wait.
type WaitOption func(*waitOptions)

type waitOptions struct {
	onUpdate func(*Task)
	pollOnly bool
}

// OnUpdate calls f with the task each time Wait learns something new (a status change or
// progress), the final state included. f runs on Wait's goroutine; keep it quick.
func OnUpdate(f func(*Task)) WaitOption { return func(o *waitOptions) { o.onUpdate = f } }

// PollOnly makes Wait poll instead of following the event stream.
func PollOnly() WaitOption { return func(o *waitOptions) { o.pollOnly = true } }

// Wait follows a task until it ends and returns it as it ended. It follows the live event
// stream (GET /api/v1/tasks/{id}/events, Server-Sent Events) when the server offers it,
// resuming after a dropped stream without losing a status change; when the server has no
// stream (404, 501, 503) or the stream cannot be reached, it polls the task with back-off.
// It returns early with ctx's error, or with a *Problem the server answered (an unknown
// task, a bad token).
func (c *Client) Wait(ctx context.Context, id string, opts ...WaitOption) (*Task, error) {
	var o waitOptions
	for _, f := range opts {
		f(&o)
	}
	update := func(t *Task) {
		if o.onUpdate != nil {
			o.onUpdate(t)
		}
	}
	if !o.pollOnly {
		lastID := ""
		for drops := 0; ; drops++ {
			t, err := c.follow(ctx, id, &lastID, update)
			if t != nil && t.Terminal() {
				return t, nil
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			var p *Problem
			if errors.As(err, &p) && !streamMissing(p) {
				return nil, err
			}
			if err != nil || drops >= 20 {
				break // no stream here, or it keeps failing: poll
			}
			// The stream ended without the task ending (server shutting down, or it dropped a
			// slow reader): resume from the last event.
			sleep(ctx, time.Second)
		}
	}
	return c.poll(ctx, id, update)
}

// streamMissing reports whether an answer means "no event stream here", not "no such task".
func streamMissing(p *Problem) bool {
	switch p.Status {
	case http.StatusNotFound:
		return p.Code != "task_not_found"
	case http.StatusMethodNotAllowed, http.StatusNotAcceptable, http.StatusTooManyRequests,
		http.StatusNotImplemented, http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// follow reads the task's event stream until it ends; it returns the last task seen.
func (c *Client) follow(ctx context.Context, id string, lastID *string, update func(*Task)) (*Task, error) {
	q := url.Values{}
	req, err := c.request(ctx, http.MethodGet, "/api/v1/tasks/"+url.PathEscape(id)+"/events", q, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-store")
	if *lastID != "" {
		req.Header.Set("Last-Event-ID", *lastID)
	}
	res, err := c.open(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return nil, &Problem{Status: http.StatusNotImplemented, Code: "no_event_stream", Detail: "the server answered " + ct + ", not an event stream"}
	}
	var last *Task
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	var event, data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if data.Len() > 0 && (event.String() == "status" || event.String() == "progress") {
				var t Task
				if json.Unmarshal([]byte(data.String()), &t) == nil && t.ID != "" {
					last = &t
					update(&t)
					if event.String() == "status" && t.Terminal() {
						return last, nil
					}
				}
			}
			event.Reset()
			data.Reset()
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			event.Reset()
			event.WriteString(value)
		case "data":
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(value)
		case "id":
			*lastID = value
		}
	}
	return last, sc.Err()
}

// poll gets the task until it ends, backing off while nothing changes.
func (c *Client) poll(ctx context.Context, id string, update func(*Task)) (*Task, error) {
	interval := c.pollFirst
	var seen time.Time
	for {
		t, err := c.Get(ctx, id)
		switch {
		case err == nil:
			if !t.UpdatedAt.Equal(seen) || t.Terminal() || t.Progress.UpdatedAt.After(seen) {
				update(t)
				seen = latest(t.UpdatedAt, t.Progress.UpdatedAt)
				interval = c.pollFirst
			} else {
				interval = min(interval*3/2, c.maxPoll)
			}
			if t.Terminal() {
				return t, nil
			}
		case ctx.Err() != nil:
			return nil, ctx.Err()
		default:
			var p *Problem
			if errors.As(err, &p) && p.Status < 500 && p.Status != http.StatusTooManyRequests {
				return nil, err
			}
			interval = min(interval*2, c.maxPoll) // the server is unreachable or busy: keep trying
			if p != nil && p.RetryAfter > interval {
				interval = p.RetryAfter
			}
		}
		sleep(ctx, interval)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
