package httpapi

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskcenter/taskcenter/httpapi/live"
	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/store"
)

// streamEnv is the API behind a real HTTP server, with live events on.
type streamEnv struct {
	*apiEnv
	rdb    *redis.Client
	name   string // the Redis client name of this API's connections
	board  *jobs.ProgressBoard
	server *httptest.Server
}

func newStreamAPI(t *testing.T, limits live.Limits) *streamEnv {
	t.Helper()
	rd := testenv.NewRedis(t)
	name := "sse-test-" + strings.ToLower(rand.Text()[:10])
	rdb := redis.NewClient(&redis.Options{Addr: rd.Addr, DB: rd.DB, ClientName: name})
	t.Cleanup(func() { rdb.Close() })
	board := jobs.NewProgressBoard(rdb)
	e := newAPI(t, func(d *Deps) {
		d.Redis, d.Board, d.Events = rdb, board, limits
	})
	server := httptest.NewServer(e.handler)
	t.Cleanup(server.Close)
	t.Cleanup(e.srv.Close) // runs first: ends the streams, so the server's Close does not wait
	return &streamEnv{apiEnv: e, rdb: rdb, name: name, board: board, server: server}
}

// sseEvent is one event (or comment) read from a stream.
type sseEvent struct {
	ID      string
	Kind    string // "" for an id-only block, "comment" for a comment line
	Data    string
	Comment string
}

func (e sseEvent) view(t *testing.T) live.StreamView {
	t.Helper()
	var v live.StreamView
	if err := json.Unmarshal([]byte(e.Data), &v); err != nil {
		t.Fatalf("event data %q: %v", e.Data, err)
	}
	return v
}

// sseClient reads one stream in the background.
type sseClient struct {
	t      *testing.T
	res    *http.Response
	events chan sseEvent
	cancel context.CancelFunc
}

func (s *streamEnv) open(t *testing.T, path, token string, headers ...string) *sseClient {
	t.Helper()
	c, res := s.tryOpen(t, path, token, headers...)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", path, res.StatusCode)
	}
	return c
}

func (s *streamEnv) tryOpen(t *testing.T, path, token string, headers ...string) (*sseClient, *http.Response) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.server.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET %s: %v", path, err)
	}
	c := &sseClient{t: t, res: res, events: make(chan sseEvent, 10000), cancel: cancel}
	t.Cleanup(c.close)
	if res.StatusCode != http.StatusOK {
		return c, res
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	go func() {
		defer close(c.events)
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev sseEvent
		pending := false
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if pending {
					c.events <- ev
				}
				ev, pending = sseEvent{}, false
			case strings.HasPrefix(line, ":"):
				c.events <- sseEvent{Kind: "comment", Comment: strings.TrimSpace(line[1:])}
			default:
				k, v, _ := strings.Cut(line, ":")
				v = strings.TrimPrefix(v, " ")
				switch k {
				case "id":
					ev.ID, pending = v, true
				case "event":
					ev.Kind, pending = v, true
				case "data":
					ev.Data, pending = v, true
				case "retry":
				}
			}
		}
	}()
	return c, res
}

func (c *sseClient) close() {
	c.cancel()
	c.res.Body.Close()
}

// next returns the next event that is not a comment; false when the stream ended.
func (c *sseClient) next(within time.Duration) (sseEvent, bool) {
	c.t.Helper()
	deadline := time.After(within)
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				return sseEvent{}, false
			}
			if ev.Kind == "comment" {
				continue
			}
			return ev, true
		case <-deadline:
			c.t.Fatalf("no event within %s", within)
		}
	}
}

// expect reads the next event and checks its kind and the task's status.
func (c *sseClient) expect(kind string, status store.Status) (sseEvent, live.StreamView) {
	c.t.Helper()
	ev, ok := c.next(10 * time.Second)
	if !ok {
		c.t.Fatalf("the stream ended; want a %s event (%s)", kind, status)
	}
	if ev.Kind != kind {
		c.t.Fatalf("event %q (%s), want %q", ev.Kind, ev.Data, kind)
	}
	v := ev.view(c.t)
	if status != "" && v.Status != status {
		c.t.Fatalf("%s event with status %s, want %s: %s", kind, v.Status, status, ev.Data)
	}
	return ev, v
}

// expectEnd waits for the stream to end.
func (c *sseClient) expectEnd() {
	c.t.Helper()
	if ev, ok := c.next(10 * time.Second); ok {
		c.t.Fatalf("the stream went on: %+v", ev)
	}
}

// submit creates a customers export for token and returns its task.
func (s *streamEnv) submit(t *testing.T, token string) *store.Task {
	t.Helper()
	rec := s.callJSON("POST", "/api/v1/exports", token, map[string]any{"type": "customers"})
	if rec.Code != http.StatusAccepted {
		t.Fatalf("submit: %d %s", rec.Code, rec.Body)
	}
	var out struct{ Task TaskView }
	json.Unmarshal(rec.Body.Bytes(), &out) //nolint:errcheck
	task, err := s.st.Get(context.Background(), out.Task.ID, store.Scope{Admin: true})
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// start claims a task as a worker would and announces it.
func (s *streamEnv) start(t *testing.T, task *store.Task) store.Lease {
	t.Helper()
	ctx := context.Background()
	c, err := s.st.ClaimTask(ctx, task.ID, "test-worker", time.Minute)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	s.board.Changed(ctx, task.TaskNo, task.Owner) //nolint:errcheck
	return c.Lease
}

func (s *streamEnv) succeed(t *testing.T, task *store.Task, l store.Lease, status store.Status) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.st.EndFinished(ctx, l, store.Outcome{Status: status, Result: json.RawMessage(`{}`)}); err != nil {
		t.Fatalf("succeed: %v", err)
	}
	s.board.Changed(ctx, task.TaskNo, task.Owner) //nolint:errcheck
}

func eventIDs(t *testing.T, st *store.Store, task *store.Task) []int64 {
	t.Helper()
	evs, err := st.TaskEvents(context.Background(), task.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	return mapped(evs, func(e store.Event) int64 { return e.ID })
}

func TestTaskStreamDeliversStatusAndProgressInOrderThenEnds(t *testing.T) {
	t.Parallel()
	s := newStreamAPI(t, live.Limits{Poll: time.Hour}) // only pub/sub wake-ups: no poll to hide a missing one
	task := s.submit(t, aliceToken)
	c := s.open(t, "/api/v1/tasks/"+task.TaskNo+"/events", aliceToken)

	first, v := c.expect("status", store.StatusPending)
	if v.Event != nil || v.ID != task.TaskNo || v.Links.Self == "" {
		t.Fatalf("the first event is not the task as it is: %s", first.Data)
	}
	lease := s.start(t, task)
	started, v := c.expect("status", store.StatusRunning)
	if v.Event == nil || v.Event.Name != store.EventStarted || v.Event.Attempt != 1 || strconv.FormatInt(v.Event.ID, 10) != started.ID {
		t.Fatalf("started event: id %s data %s", started.ID, started.Data)
	}
	for _, cur := range []int64{25, 50, 75} {
		counts := Counts{Total: cur, Success: cur - 3, Failed: 3}
		if err := s.board.Set(context.Background(), task.TaskNo, task.Owner, cur, 100, counts); err != nil {
			t.Fatal(err)
		}
		ev, v := c.expect("progress", store.StatusRunning)
		if v.Progress.Current != cur || v.Progress.Percent != int(cur) || ev.ID != started.ID {
			t.Fatalf("progress event id %s (want %s, the last status id) data %s", ev.ID, started.ID, ev.Data)
		}
		// Every progress event is the whole view: its counts are those of the same batch.
		if v.Counts != counts {
			t.Fatalf("progress event at %d carries counts %+v, want %+v: %s", cur, v.Counts, counts, ev.Data)
		}
	}
	s.succeed(t, task, lease, store.StatusPartialSuccess)
	done, v := c.expect("status", store.StatusPartialSuccess)
	if v.Event.Name != store.EventPartiallySucceded || v.Progress.Percent != 100 {
		t.Fatalf("terminal event: %s", done.Data)
	}
	c.expectEnd()

	ids := eventIDs(t, s.st, task)
	if got := []string{started.ID, done.ID}; got[0] != strconv.FormatInt(ids[1], 10) || got[1] != strconv.FormatInt(ids[2], 10) {
		t.Fatalf("status ids %v, outbox ids %v", got, ids)
	}
}

func TestTaskStreamResumesFromLastEventIDWithoutGaps(t *testing.T) {
	t.Parallel()
	s := newStreamAPI(t, live.Limits{Poll: 100 * time.Millisecond})
	task := s.submit(t, aliceToken)
	lease := s.start(t, task)
	submitted := eventIDs(t, s.st, task)[0]

	// The client saw "submitted" and went away; the task started meanwhile.
	c := s.open(t, "/api/v1/tasks/"+task.TaskNo+"/events", aliceToken, "Last-Event-ID", strconv.FormatInt(submitted, 10))
	ev, v := c.expect("status", store.StatusRunning)
	if v.Event.Name != store.EventStarted {
		t.Fatalf("replayed %s", ev.Data)
	}
	s.succeed(t, task, lease, store.StatusSuccess)
	ev, v = c.expect("status", store.StatusSuccess)
	if v.Event.Name != store.EventSucceeded {
		t.Fatalf("live after replay: %s", ev.Data)
	}
	c.expectEnd()

	// Resuming from the start replays every change in order, then ends (finished task).
	c = s.open(t, "/api/v1/tasks/"+task.TaskNo+"/events?last_event_id=0", aliceToken)
	var names []string
	for {
		ev, ok := c.next(5 * time.Second)
		if !ok {
			break
		}
		names = append(names, ev.view(t).Event.Name)
	}
	if strings.Join(names, ",") != "task.submitted,task.started,task.succeeded" {
		t.Fatalf("replay %v", names)
	}
	// Resuming a finished task from its last change: 204, so an EventSource stops.
	last := eventIDs(t, s.st, task)
	_, res := s.tryOpen(t, "/api/v1/tasks/"+task.TaskNo+"/events", aliceToken, "Last-Event-ID", strconv.FormatInt(last[len(last)-1], 10))
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("resume after the end: %d", res.StatusCode)
	}
	// A fresh client of a finished task gets its state, then the end.
	c = s.open(t, "/api/v1/tasks/"+task.TaskNo+"/events", aliceToken)
	c.expect("status", store.StatusSuccess)
	c.expectEnd()

	if rec := s.call("GET", "/api/v1/tasks/"+task.TaskNo+"/events", aliceToken, nil, "Last-Event-Id", "soon"); rec.Code != http.StatusBadRequest ||
		problemOf(t, rec).Code != "invalid_last_event_id" {
		t.Fatalf("bad Last-Event-ID: %d %s", rec.Code, rec.Body)
	}
}

func TestScopeStreamCarriesOnlyTheCallersTasks(t *testing.T) {
	t.Parallel()
	s := newStreamAPI(t, live.Limits{Poll: 200 * time.Millisecond})
	bob := s.open(t, "/api/v1/events", bobToken)
	first, _ := bob.next(5 * time.Second)
	if first.Kind != "" || first.ID == "" {
		t.Fatalf("the stream does not start by telling its position: %+v", first)
	}
	admin := s.open(t, "/api/v1/events?owner=alice", adminToken)
	admin.next(5 * time.Second)

	// alice's task runs with progress; bob's task is submitted in the middle. (Each step
	// waits for the admin's stream to show the last: a stream that lags a whole task behind
	// skips progress that is already over, and status changes are what it must not lose.)
	var kinds []string
	see := func() {
		t.Helper()
		ev, v := admin.any()
		if v.Owner != "alice" {
			t.Fatalf("the admin's owner=alice stream carried %s's task: %s", v.Owner, ev.Data)
		}
		status := v.Status
		if v.Event != nil {
			status = v.Event.Status // the change; the view is the task as it is when sent
		}
		kinds = append(kinds, ev.Kind+":"+string(status))
	}
	alice := s.submit(t, aliceToken)
	see()
	lease := s.start(t, alice)
	see()
	s.board.Set(context.Background(), alice.TaskNo, alice.Owner, 10, 20, Counts{Total: 10, Success: 10}) //nolint:errcheck
	see()
	bobs := s.submit(t, bobToken)
	s.board.Set(context.Background(), alice.TaskNo, alice.Owner, 20, 20, Counts{Total: 20, Success: 20}) //nolint:errcheck
	see()
	s.succeed(t, alice, lease, store.StatusSuccess)
	see()
	ev, v := bob.expect("status", store.StatusPending)
	if v.ID != bobs.TaskNo || v.Owner != "bob" {
		t.Fatalf("bob's stream: %s", ev.Data)
	}
	if strings.Join(kinds, ",") != "status:PENDING,status:RUNNING,progress:RUNNING,progress:RUNNING,status:SUCCESS" {
		t.Fatalf("admin saw %v", kinds)
	}
	// Nothing of alice's reaches bob, whatever arrives later.
	time.Sleep(500 * time.Millisecond)
	for {
		select {
		case ev := <-bob.events:
			if ev.Kind == "comment" {
				continue
			}
			t.Fatalf("bob's stream carried %+v", ev)
		default:
		}
		break
	}
	if rec := s.call("GET", "/api/v1/events?owner=alice", bobToken, nil); rec.Code != http.StatusBadRequest {
		t.Fatalf("bob following alice: %d", rec.Code)
	}
	if rec := s.call("GET", "/api/v1/tasks/"+alice.TaskNo+"/events", bobToken, nil); rec.Code != http.StatusNotFound {
		t.Fatalf("bob following alice's task: %d", rec.Code)
	}
}

// any reads the next event, whatever its kind.
func (c *sseClient) any() (sseEvent, live.StreamView) {
	c.t.Helper()
	ev, ok := c.next(10 * time.Second)
	if !ok {
		c.t.Fatal("the stream ended")
	}
	return ev, ev.view(c.t)
}

func TestOneRedisSubscriptionServesEveryStream(t *testing.T) {
	t.Parallel()
	s := newStreamAPI(t, live.Limits{Poll: time.Hour})
	task := s.submit(t, aliceToken)
	s.start(t, task)
	const n = 12
	var clients []*sseClient
	for i := range n {
		token := aliceToken
		if i%2 == 1 {
			token = adminToken
		}
		c := s.open(t, "/api/v1/tasks/"+task.TaskNo+"/events", token)
		c.expect("status", store.StatusRunning)
		clients = append(clients, c)
	}
	ctx := context.Background()
	// Connections of this API (by client name) subscribed to anything: exactly one.
	list, err := s.rdb.ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	subscribers := 0
	for line := range strings.SplitSeq(strings.TrimSpace(list), "\n") {
		if strings.Contains(line, " name="+s.name+" ") && !strings.Contains(line, " sub=0 ") {
			subscribers++
		}
	}
	if subscribers != 1 {
		t.Fatalf("%d streams hold %d Redis subscriptions, want 1:\n%s", n, subscribers, list)
	}
	// The channel's subscribers (PUBSUB NUMSUB counts every process on this Redis, other
	// tests' included): ours is one of them, not n.
	numsub, err := s.rdb.PubSubNumSub(ctx, jobs.EventsChannel).Result()
	if err != nil || numsub[jobs.EventsChannel] < 1 {
		t.Fatalf("PUBSUB NUMSUB %v %v", numsub, err)
	}
	t.Logf("%d streams, 1 subscription of this API; PUBSUB NUMSUB %s = %d (all processes on this Redis)", n, jobs.EventsChannel, numsub[jobs.EventsChannel])

	s.board.Set(ctx, task.TaskNo, task.Owner, 7, 10, Counts{Total: 7, Success: 7}) //nolint:errcheck
	for i, c := range clients {
		if _, v := c.expect("progress", store.StatusRunning); v.Progress.Current != 7 {
			t.Fatalf("client %d: %+v", i, v.Progress)
		}
	}
	if got := s.srv.hub.Streams(); got != n {
		t.Fatalf("hub has %d streams, want %d", got, n)
	}
}

func TestStreamSendsKeepAlives(t *testing.T) {
	t.Parallel()
	s := newStreamAPI(t, live.Limits{KeepAlive: 100 * time.Millisecond})
	c := s.open(t, "/api/v1/events", aliceToken)
	deadline := time.After(5 * time.Second)
	for {
		select {
		case ev := <-c.events:
			if ev.Kind == "comment" && ev.Comment == "keep-alive" {
				return
			}
		case <-deadline:
			t.Fatal("no keep-alive comment")
		}
	}
}

func TestStreamsPerUserAreBounded(t *testing.T) {
	t.Parallel()
	s := newStreamAPI(t, live.Limits{MaxPerUser: 2})
	a1 := s.open(t, "/api/v1/events", aliceToken)
	s.open(t, "/api/v1/events", aliceToken)
	_, res := s.tryOpen(t, "/api/v1/events", aliceToken)
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
		t.Fatalf("a third stream: %d", res.StatusCode)
	}
	var p problem.Problem
	json.NewDecoder(res.Body).Decode(&p) //nolint:errcheck
	if p.Code != "too_many_streams" {
		t.Fatalf("problem %+v", p)
	}
	s.open(t, "/api/v1/events", bobToken) // others are not affected
	a1.close()
	testenv.Eventually(t, 5*time.Second, "a closed stream to free its slot", func() bool {
		c, res := s.tryOpen(t, "/api/v1/events", aliceToken)
		if res.StatusCode == http.StatusOK {
			return true
		}
		c.close()
		return false
	})
}

// A client that never reads is dropped; the others get every event meanwhile.
func TestAClientThatNeverReadsDoesNotHoldUpOthers(t *testing.T) {
	t.Parallel()
	s := newStreamAPI(t, live.Limits{Buffer: 64, WriteTimeout: 300 * time.Millisecond, Poll: time.Hour})
	task := s.submit(t, aliceToken)
	s.start(t, task)
	good := s.open(t, "/api/v1/tasks/"+task.TaskNo+"/events", aliceToken)
	good.expect("status", store.StatusRunning)

	// The stuck client: a tiny receive window, and it never reads.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1024) }) //nolint:errcheck
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(s.server.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /api/v1/tasks/%s/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", task.TaskNo, aliceToken)
	testenv.Eventually(t, 5*time.Second, "both streams to register", func() bool { return s.srv.hub.Streams() == 2 })

	ctx := context.Background()
	// Publish in bursts until the stuck client is dropped (its socket buffers fill first);
	// after each burst the reading client must have every event.
	var mu sync.Mutex
	got := 0
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case ev, ok := <-good.events:
				if !ok {
					return
				}
				if ev.Kind != "progress" {
					continue
				}
				mu.Lock()
				if v := ev.view(t); v.Progress.Current != int64(got+1) {
					t.Errorf("progress %d after %d", v.Progress.Current, got)
				}
				got++
				mu.Unlock()
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()
	const limit = 40_000
	sent := 0
	for sent < limit && s.srv.hub.Streams() > 1 {
		for range 20 { // under the stream buffer: a reading client keeps up with a burst
			sent++
			n := jobs.Notice{Kind: jobs.NoticeProgress, TaskNo: task.TaskNo, Owner: task.Owner,
				Progress: &jobs.Progress{Current: int64(sent), Total: limit, Percent: sent * 99 / limit, UpdatedAt: time.Now()}}
			body, _ := json.Marshal(n)
			s.rdb.Publish(ctx, jobs.EventsChannel, body) //nolint:errcheck
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			n := got
			mu.Unlock()
			if n == sent {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the reading client got %d of %d events (streams %d)", n, sent, s.srv.hub.Streams())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if s.srv.hub.Streams() != 1 {
		t.Fatalf("the stuck client was not dropped after %d events", sent)
	}
	t.Logf("the stuck client was dropped after %d events; the reading client got all %d", sent, got)
}

func TestCancelAndRetryAnnounceTheChange(t *testing.T) {
	t.Parallel()
	s := newStreamAPI(t, live.Limits{Poll: time.Hour}) // a wake-up must come from the announcement
	task := s.submit(t, aliceToken)
	c := s.open(t, "/api/v1/tasks/"+task.TaskNo+"/events", aliceToken)
	c.expect("status", store.StatusPending)
	all := s.open(t, "/api/v1/events", aliceToken)
	all.next(5 * time.Second) // its position
	if rec := s.call("POST", "/api/v1/tasks/"+task.TaskNo+"/cancel", aliceToken, nil); rec.Code != http.StatusOK {
		t.Fatalf("cancel: %d %s", rec.Code, rec.Body)
	}
	_, v := c.expect("status", store.StatusCancelled)
	if v.Event.Name != store.EventCancelled || v.Event.Actor != "alice" {
		t.Fatalf("cancel event %+v", v.Event)
	}
	c.expectEnd()
	if _, v := all.expect("status", store.StatusCancelled); v.Event.Name != store.EventCancelled {
		t.Fatalf("cancel event %+v", v.Event)
	}
	if rec := s.call("POST", "/api/v1/tasks/"+task.TaskNo+"/retry", aliceToken, nil); rec.Code != http.StatusAccepted {
		t.Fatalf("retry: %d %s", rec.Code, rec.Body)
	}
	if _, v := all.expect("status", store.StatusPending); v.Event.Name != store.EventRetried {
		t.Fatalf("retry event %+v", v.Event)
	}
}

func TestCloseEndsEveryStream(t *testing.T) {
	t.Parallel()
	s := newStreamAPI(t, live.Limits{})
	c := s.open(t, "/api/v1/events", aliceToken)
	c.next(5 * time.Second)
	s.srv.Close()
	c.expectEnd()
	if rec := s.call("GET", "/api/v1/events", aliceToken, nil); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("a stream after Close: %d", rec.Code)
	}
}

// GET reads the row, then the live progress: when the worker has moved on in between, the
// view shows the newer progress with the counts of that same batch, not with the row's older
// counts (a page once showed 700 rows counted beside 850 read).
func TestGetShowsLiveProgressWithTheCountsOfTheSameBatch(t *testing.T) {
	t.Parallel()
	s := newStreamAPI(t, live.Limits{})
	task := s.submit(t, aliceToken)
	s.start(t, task)
	live := Counts{Total: 850, Success: 830, Failed: 20}
	if err := s.board.Set(context.Background(), task.TaskNo, task.Owner, 850, 3000, live); err != nil {
		t.Fatal(err)
	}
	v := s.taskView(aliceToken, task.TaskNo)
	if v.Progress.Current != 850 || v.Counts != live {
		t.Fatalf("GET shows progress %d/%d with counts %+v; want 850/3000 with %+v", v.Progress.Current, v.Progress.Total, v.Counts, live)
	}
}
