package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/client"
)

func newClient(t *testing.T, h http.HandlerFunc) *client.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, "token-0123456789abcdef", client.WithPollInterval(10*time.Millisecond, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestProblemsAreTypedErrors(t *testing.T) {
	t.Parallel()
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"type":"x","title":"Too Many Requests","status":429,"code":"queue_busy","detail":"queue exports is full","request_id":"req_1"}`)
	})
	_, err := c.Get(context.Background(), "tsk_1")
	var p *client.Problem
	if !errors.As(err, &p) || p.Code != "queue_busy" || p.RetryAfter != 7*time.Second || p.RequestID != "req_1" {
		t.Fatalf("errors.As(*Problem): %#v", err)
	}
	var v client.Problem
	if !errors.As(err, &v) || v.Code != "queue_busy" {
		t.Fatalf("errors.As(Problem): %#v", v)
	}
	if !strings.Contains(err.Error(), "queue exports is full") {
		t.Fatalf("message %q", err)
	}
}

// A download that breaks goes on from the last byte with a Range request.
func TestDownloadResumesWithRange(t *testing.T) {
	t.Parallel()
	file := bytes.Repeat([]byte("0123456789"), 10_000)
	var calls atomic.Int32
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		if n == 1 {
			// Promise the whole file, send a third of it, and break the connection.
			w.Header().Set("Content-Length", strconv.Itoa(len(file)))
			w.Header().Set("Last-Modified", "Mon, 30 Nov 2026 00:00:00 GMT")
			w.Header().Set("Content-Disposition", `attachment; filename="customers.xlsx"`)
			w.WriteHeader(http.StatusOK)
			w.Write(file[:len(file)/3])
			w.(http.Flusher).Flush()
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		if r.Header.Get("Range") != "bytes="+strconv.Itoa(len(file)/3)+"-" || r.Header.Get("If-Range") == "" {
			t.Errorf("resume request: Range %q If-Range %q", r.Header.Get("Range"), r.Header.Get("If-Range"))
		}
		http.ServeContent(w, r, "customers.xlsx", time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC), bytes.NewReader(file))
	})
	var got bytes.Buffer
	d, err := c.DownloadResult(context.Background(), "tsk_1", &got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), file) || d.Resumed != 1 || d.Name != "customers.xlsx" || d.Size != int64(len(file)) {
		t.Fatalf("got %d bytes (equal %v), download %+v", got.Len(), bytes.Equal(got.Bytes(), file), d)
	}
}

// Wait follows the event stream to the terminal status.
func TestWaitFollowsTheEventStream(t *testing.T) {
	t.Parallel()
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/events") {
			t.Errorf("polled %s although the stream is there", r.URL.Path)
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "retry: 1000\n\nid: 1\nevent: status\ndata: {\"id\":\"tsk_1\",\"status\":\"RUNNING\"}\n\n: keep-alive\n\n")
		fmt.Fprint(w, "id: 1\nevent: progress\ndata: {\"id\":\"tsk_1\",\"status\":\"RUNNING\",\"progress\":{\"current\":50,\"total\":100}}\n\n")
		fmt.Fprint(w, "id: 2\nevent: status\ndata: {\"id\":\"tsk_1\",\"status\":\"SUCCESS\",\"progress\":{\"current\":100,\"total\":100}}\n\n")
	})
	var seen []string
	task, err := c.Wait(context.Background(), "tsk_1", client.OnUpdate(func(t *client.Task) {
		seen = append(seen, fmt.Sprintf("%s:%d", t.Status, t.Progress.Current))
	}))
	if err != nil || task.Status != "SUCCESS" {
		t.Fatalf("wait: %+v %v", task, err)
	}
	if strings.Join(seen, " ") != "RUNNING:0 RUNNING:50 SUCCESS:100" {
		t.Fatalf("updates %v", seen)
	}
}

// Without a stream (an older server answers 404 no_route) Wait polls; an unknown task is an
// error, not a reason to poll.
func TestWaitPollsWithoutAStream(t *testing.T) {
	t.Parallel()
	var polls atomic.Int32
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		switch {
		case strings.Contains(r.URL.Path, "tsk_gone"):
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"status":404,"code":"task_not_found","detail":"no task with this id is visible to you"}`)
		case strings.HasSuffix(r.URL.Path, "/events"):
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"status":404,"code":"no_route","detail":"no such endpoint"}`)
		default:
			w.Header().Set("Content-Type", "application/json")
			status := "RUNNING"
			if polls.Add(1) >= 3 {
				status = "PARTIAL_SUCCESS"
			}
			fmt.Fprintf(w, `{"id":"tsk_1","status":%q,"updated_at":"2026-12-01T00:00:0%dZ"}`, status, polls.Load())
		}
	})
	task, err := c.Wait(context.Background(), "tsk_1")
	if err != nil || task.Status != "PARTIAL_SUCCESS" || polls.Load() != 3 {
		t.Fatalf("wait: %+v %v after %d polls", task, err, polls.Load())
	}
	_, err = c.Wait(context.Background(), "tsk_gone")
	var p *client.Problem
	if !errors.As(err, &p) || p.Code != "task_not_found" {
		t.Fatalf("unknown task: %v", err)
	}
}
