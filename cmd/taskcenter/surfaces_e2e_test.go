package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/xuri/excelize/v2"
)

// Every way the product shows a task — polling GET, the task's event stream, the web page in
// Chromium (the list and the task's own page), `tc watch` / `tc show`, and a webhook receiver —
// follows the same tasks at the same time, and each must tell the same story: what it shows
// at any moment is a state that committed, with progress and counts of the same batch; it is
// never ahead of what GET answers next; it never goes back; and at the end every one of them
// shows the same final status, counts and progress.
//
// "Never more than a batch behind" is judged where it can be without timing guesses: a stream
// event says when it was made (its progress's updated_at, its change's time), and must be
// within a batch of what GET had answered by then. Streams send progress at most once per
// worker.progress_interval, so at a given instant a live surface may trail GET by the batches
// of one interval; what is asserted for it is that it catches up with every state GET showed
// (within storyCatchUp, a bound no healthy run comes near).
//
// The imports' files are generated here, so the test knows every state an import can commit:
// after n batches it has read min(n·batch, rows) rows and rejected exactly the bad rows among
// them. A surface showing anything else (a half batch, counts of one batch beside the
// progress of another) shows something that never committed.

const (
	storyBatch     = 50    // import rows per transaction: several batches, several progress events
	storyPage      = 200   // export rows per page
	storyMainRows  = 3000  // the import with some rejected rows (.xlsx)
	storyMainBad   = 23    // every 23rd of its rows has a bad phone
	storyLongRows  = 12000 // the import cancelled while running, then retried (.csv)
	storyLongBad   = 41    // every 41st of its rows has a bad phone
	storyRejRows   = 120   // the import whose every row is rejected (.csv)
	storyCustomers = 3000  // customers the export writes (code_prefix C)

	// storyCatchUp is how long a live surface may take to show what GET showed: generous, a
	// person would call anything slower stuck; under load it takes milliseconds to a second.
	storyCatchUp = 10 * time.Second
	// storyWait bounds each wait for what a person would see.
	storyWait = 45 * time.Second
)

// Surfaces, as sightings name them.
const (
	surfGet     = "get"         // polling GET /api/v1/tasks/{id}
	surfSSE     = "sse"         // GET /api/v1/tasks/{id}/events
	surfList    = "page-list"   // the web page's task list (follows /api/v1/events)
	surfDetail  = "page-detail" // the web page of one task (follows its event stream)
	surfTC      = "tc"          // tc watch (lines while it waits, the summary at the end)
	surfWebhook = "webhook"     // a receiver subscribed to every event, keeping the latest per task
)

var storySurfaces = []string{surfGet, surfSSE, surfList, surfDetail, surfTC, surfWebhook}

type storyCounts struct {
	Total   int64 `json:"total"`
	Success int64 `json:"success"`
	Failed  int64 `json:"failed"`
}

func (c storyCounts) String() string { return fmt.Sprintf("%d/%d/%d", c.Total, c.Success, c.Failed) }

type storyProgress struct {
	Current   int64     `json:"current"`
	Total     int64     `json:"total"`
	Percent   int       `json:"percent"`
	UpdatedAt time.Time `json:"updated_at"`
}

func (p storyProgress) String() string {
	return fmt.Sprintf("%d/%d %d%%", p.Current, p.Total, p.Percent)
}

// storyView is the part of the task view (GET, stream events) the test reads.
type storyView struct {
	ID              string        `json:"id"`
	Type            string        `json:"type"`
	Status          string        `json:"status"`
	Attempt         int           `json:"attempt"`
	CancelRequested bool          `json:"cancel_requested"`
	Progress        storyProgress `json:"progress"`
	Counts          storyCounts   `json:"counts"`
	Error           *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Result *struct {
		Rows        int64    `json:"rows"`
		FirstErrors []string `json:"first_errors"`
	} `json:"result"`
	Links struct {
		Result      string `json:"result"`
		ErrorReport string `json:"error_report"`
		Cancel      string `json:"cancel"`
		Retry       string `json:"retry"`
	} `json:"links"`
	Attempts []struct {
		Attempt int `json:"attempt"`
	} `json:"attempts"`
	Event *struct {
		ID      int64     `json:"id"`
		Name    string    `json:"name"`
		Status  string    `json:"status"`
		Attempt int       `json:"attempt"`
		At      time.Time `json:"at"`
	} `json:"event"`
}

func (v *storyView) errCode() string {
	if v.Error == nil {
		return ""
	}
	return v.Error.Code
}

// sighting is what one surface showed of one task at one moment.
type sighting struct {
	surface  string
	task     string
	sent     time.Time // GET: when the request went out
	read     time.Time // when the test had it in hand
	made     time.Time // when the server produced what it shows, when the surface says so
	status   string
	viewed   string         // the status of the view its counts and progress come from, when it differs
	attempt  int            // 0: the surface does not show it
	counts   *storyCounts   // nil: the surface does not show counts
	progress *storyProgress // nil: the surface does not show progress
	evt      int64          // the outbox event it shows (stream status events, webhooks)
	rows     *int64         // the rows of the result file, when it shows them
	shows    string         // what it showed, for messages
}

// viewStatus is the status the sighting's counts and progress belong to.
func (s sighting) viewStatus() string {
	if s.viewed != "" {
		return s.viewed
	}
	return s.status
}

func (s sighting) String() string {
	out := fmt.Sprintf("%s at %s: %s", s.surface, s.read.Format("15:04:05.000"), s.status)
	if s.counts != nil {
		out += " counts " + s.counts.String()
	}
	if s.progress != nil {
		out += " progress " + s.progress.String()
	}
	if s.shows != "" {
		out += fmt.Sprintf(" (%s)", s.shows)
	}
	return out
}

// storyLog keeps every sighting, from every goroutine.
type storyLog struct {
	mu  sync.Mutex
	all []sighting
}

func (l *storyLog) add(s sighting) {
	l.mu.Lock()
	l.all = append(l.all, s)
	l.mu.Unlock()
}

func (l *storyLog) of(task, surface string) []sighting {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []sighting
	for _, s := range l.all {
		if s.task == task && s.surface == surface {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b sighting) int { return a.read.Compare(b.read) })
	return out
}

func (l *storyLog) last(task, surface string) (sighting, bool) {
	all := l.of(task, surface)
	if len(all) == 0 {
		return sighting{}, false
	}
	return all[len(all)-1], true
}

// storyTask is one task followed, and what it must do.
type storyTask struct {
	name    string // how the test calls it
	id      string
	kind    string // import or export
	rows    int64  // data rows of the file, or customers exported
	step    int64  // rows per batch (import) or page (export)
	bad     []int64
	final   string // its final status
	errCode string // its final error code
	exit    int    // tc's exit code for its final status
	retried bool   // cancelled while running, then retried

	// Of the retried task: when the retry was asked for, its outbox event, and the attempt
	// that was cancelled (set before the checks run).
	retryAt          time.Time
	retriedEvt       int64
	cancelledAttempt int
}

// badRows returns bad[n] = rows rejected among the first n data rows when every every-th row is.
func badRows(rows, every int64) []int64 {
	bad := make([]int64, rows+1)
	for n := int64(1); n <= rows; n++ {
		bad[n] = bad[n-1]
		if every > 0 && n%every == 0 {
			bad[n]++
		}
	}
	return bad
}

// committed says what is wrong with counts no batch of this task can have committed.
func (k *storyTask) committed(c storyCounts, status string) string {
	switch k.kind {
	case "import":
		if c.Total < 0 || c.Total > k.rows || (c.Total%k.step != 0 && c.Total != k.rows) {
			return fmt.Sprintf("%d rows counted is not the end of a batch of %d", c.Total, k.step)
		}
		if c.Failed != k.bad[c.Total] || c.Success != c.Total-c.Failed {
			return fmt.Sprintf("counts %s are not what the first %d rows give (%d ok, %d rejected)", c, c.Total, c.Total-k.bad[c.Total], k.bad[c.Total])
		}
	case "export":
		done := storyCounts{Total: k.rows, Success: k.rows}
		if c != (storyCounts{}) && !(c == done && status == "SUCCESS") {
			return fmt.Sprintf("counts %s while %s: an export counts nothing until it succeeds, then %s", c, status, done)
		}
	}
	return ""
}

func terminalStatus(s string) bool {
	switch s {
	case "SUCCESS", "PARTIAL_SUCCESS", "FAILED", "TIMEOUT", "CANCELLED":
		return true
	}
	return false
}

// expectedPercent is the percent a view shows for its progress (jobs.Percent and the view's
// "work that ran to the end shows 100 %" rule).
func expectedPercent(status string, p storyProgress) int {
	if status == "SUCCESS" || status == "PARTIAL_SUCCESS" || (terminalStatus(status) && p.Total > 0 && p.Current >= p.Total) {
		return 100
	}
	if p.Total <= 0 {
		return 0
	}
	return int(min(p.Current*100/p.Total, 99))
}

// progressOK says what is wrong with progress (and counts shown beside it) that this task
// cannot have had.
func (k *storyTask) progressOK(p storyProgress, c *storyCounts, status string) string {
	if want := expectedPercent(status, p); p.Percent != want {
		return fmt.Sprintf("%d%% for %d/%d while %s, want %d%%", p.Percent, p.Current, p.Total, status, want)
	}
	if p.Total != 0 && p.Total != k.rows {
		return fmt.Sprintf("progress total %d, the task has %d rows", p.Total, k.rows)
	}
	if p.Current > k.rows || (p.Current%k.step != 0 && p.Current != k.rows) {
		return fmt.Sprintf("progress %d is not the end of a batch of %d", p.Current, k.step)
	}
	if (status == "SUCCESS" || status == "PARTIAL_SUCCESS") && p.Current != k.rows {
		return fmt.Sprintf("progress %d/%d at %s", p.Current, p.Total, status)
	}
	// An import's progress and counts move together, batch by batch; a view may read the
	// live progress a batch after the counts, never before.
	if k.kind == "import" && c != nil && (p.Current < c.Total || p.Current > c.Total+k.step) {
		return fmt.Sprintf("progress %d and %d rows counted are more than one batch apart", p.Current, c.Total)
	}
	return ""
}

// rank places a sighting's status in the task's life, which only moves forward: PENDING,
// RUNNING, the end; for the retried task CANCELLED, then PENDING, RUNNING and the end again.
func (k *storyTask) rank(s sighting) (int, string) {
	order := []string{"PENDING", "RUNNING", k.final}
	base := 0
	if k.retried {
		leg2 := !s.read.Before(k.retryAt)
		if s.evt > 0 && k.retriedEvt > 0 {
			leg2 = s.evt >= k.retriedEvt
		}
		switch {
		case !leg2:
			order = []string{"PENDING", "RUNNING", "CANCELLED"}
		case s.status == "CANCELLED":
			return 2, "" // the cancelled state, still shown
		default:
			base = 3
		}
		if s.attempt > 0 && s.status == "RUNNING" && (s.attempt > k.cancelledAttempt) != leg2 {
			return -1, fmt.Sprintf("RUNNING attempt %d %s the retry of attempt %d", s.attempt,
				map[bool]string{false: "before", true: "after"}[leg2], k.cancelledAttempt)
		}
	}
	status := s.status
	if status == "RETRY_WAIT" {
		status = "RUNNING" // a transient fault, retried at once: the task is still under way
	}
	i := slices.Index(order, status)
	if i < 0 {
		return -1, fmt.Sprintf("status %q is none this task goes through (%v)", s.status, order)
	}
	return base + i, ""
}

// story is the test's world: the process, the surfaces and what they showed.
type story struct {
	t     *testing.T
	e     *env
	p     *proc
	log   storyLog
	tasks []*storyTask
	hooks *storyHooks

	mu       sync.Mutex
	problems []string
	reported bool            // the problems have been reported
	ids      map[string]bool // the tasks followed, once submitted
}

func (s *story) problem(format string, args ...any) {
	s.mu.Lock()
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

// waitFor polls cond until it holds, failing the test after storyWait.
func (s *story) waitFor(what string, cond func() bool) {
	s.t.Helper()
	deadline := time.Now().Add(storyWait)
	for !cond() {
		if time.Now().After(deadline) {
			s.t.Fatalf("waited %s for %s", storyWait, what)
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// get reads a task the way any API client polls it.
func (s *story) get(ctx context.Context, id string) (*storyView, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", s.p.base+"/api/v1/tasks/"+id, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	res, err := s.p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", id, res.StatusCode, body)
	}
	var v storyView
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

func viewSighting(surface string, v *storyView, sent, read time.Time) sighting {
	c, p := v.Counts, v.Progress
	return sighting{surface: surface, task: v.ID, sent: sent, read: read, status: v.Status, attempt: v.Attempt, counts: &c, progress: &p}
}

// pollGets polls every task as a client without streams would.
func (s *story) pollGets(ctx context.Context, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			for _, k := range s.tasks {
				sent := time.Now()
				v, err := s.get(ctx, k.id)
				if err != nil {
					if ctx.Err() == nil {
						s.problem("poll %s: %v", k.name, err)
					}
					continue
				}
				s.log.add(viewSighting(surfGet, v, sent, time.Now()))
			}
			select {
			case <-ctx.Done():
			case <-time.After(60 * time.Millisecond):
			}
		}
	}()
}

// streamRun is one connection to a task's event stream.
type streamRun struct {
	done     chan struct{}
	lastID   string     // the last id: field, to resume from
	first    int64      // the id of its first event
	last     *storyView // the last status event
	statuses []storyView
	ended    bool // the server ended it (after the task's terminal event)
	err      error
}

// over reports whether the server has ended the stream; the reader's fields may be read once
// it has.
func (r *streamRun) over() bool {
	select {
	case <-r.done:
		return r.ended
	default:
		return false
	}
}

// follow reads a task's event stream, resuming after lastID when it is set, until the server
// ends it.
func (s *story) follow(ctx context.Context, k *storyTask, lastID string) *streamRun {
	r := &streamRun{done: make(chan struct{}), lastID: lastID, first: -1}
	go func() {
		defer close(r.done)
		req, err := http.NewRequestWithContext(ctx, "GET", s.p.base+"/api/v1/tasks/"+k.id+"/events", nil)
		if err != nil {
			r.err = err
			return
		}
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		req.Header.Set("Accept", "text/event-stream")
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		res, err := s.p.client.Do(req)
		if err != nil {
			r.err = err
			return
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(res.Body)
			r.err = fmt.Errorf("events of %s: %d %s", k.name, res.StatusCode, b)
			return
		}
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 64<<10), 8<<20)
		var id, kind string
		var data strings.Builder
		for sc.Scan() {
			line := sc.Text()
			if line == "" {
				if data.Len() > 0 && (kind == "status" || kind == "progress") {
					s.streamEvent(k, r, kind, id, data.String(), time.Now())
				}
				kind = ""
				data.Reset()
				continue
			}
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "id":
				id = value
				r.lastID = value
			case "event":
				kind = value
			case "data":
				if data.Len() > 0 {
					data.WriteByte('\n')
				}
				data.WriteString(value)
			}
		}
		r.err = sc.Err()
		r.ended = r.err == nil && ctx.Err() == nil
	}()
	return r
}

// fullView lists the members every stream event carries: the whole task view, so that a
// client never combines one event's progress with another's counts.
var fullView = []string{"id", "type", "status", "progress", "counts", "attempt", "links", "cancel_requested", "error", "result", "updated_at"}

func (s *story) streamEvent(k *storyTask, r *streamRun, kind, id, data string, at time.Time) {
	var v storyView
	var members map[string]json.RawMessage
	if err := json.Unmarshal([]byte(data), &v); err != nil || json.Unmarshal([]byte(data), &members) != nil {
		s.problem("%s: %s event that is not a task view: %q", k.name, kind, data)
		return
	}
	for _, m := range fullView {
		if _, ok := members[m]; !ok {
			s.problem("%s: %s event %s has no %q: %s", k.name, kind, id, m, data)
		}
	}
	n, _ := strconv.ParseInt(id, 10, 64)
	if r.first < 0 {
		r.first = n
	}
	sg := viewSighting(surfSSE, &v, at, at)
	sg.shows = kind + " " + id
	switch kind {
	case "progress":
		sg.made = v.Progress.UpdatedAt
		// The counts of a progress event are those of the batch its progress belongs to.
		if k.kind == "import" && v.Counts.Total != v.Progress.Current {
			s.problem("%s: progress event %s carries progress %s beside counts %s of another batch", k.name, id, v.Progress, v.Counts)
		}
	case "status":
		if v.Event != nil {
			sg.made, sg.evt = v.Event.At, v.Event.ID
			if strconv.FormatInt(v.Event.ID, 10) != id {
				s.problem("%s: status event with id %s names event %d", k.name, id, v.Event.ID)
			}
		}
		r.statuses = append(r.statuses, v)
		r.last = &r.statuses[len(r.statuses)-1]
	}
	s.log.add(sg)
}

// tcWatch is one `tc watch` process.
type tcWatch struct {
	done   chan struct{}
	code   int
	stdout string
	stderr []string
	err    error
}

var (
	tcLine    = regexp.MustCompile(`^(tsk_[A-Z0-9]+) ([A-Z_]+)(?: (\d+)% (\d+)/(\d+) rows)?`)
	tcSummary = regexp.MustCompile(`(?m)^([A-Z_]+) (tsk_[A-Z0-9]+) (\S+?)(?:: (\d+) rows(?:, (\d+) ok, (\d+) rejected)?)?(?: in \S+)?$`)
	tcErrLine = regexp.MustCompile(`(?m)^  error (\S+): (.*)$`)
)

// watch runs `tc watch ID` as a script would (no terminal: a line per change), reading its
// lines as they come.
func (s *story) watch(k *storyTask) *tcWatch {
	cmd := exec.Command(tcBinary(s.t), "watch", k.id)
	cmd.Env = []string{"TASKCENTER_URL=" + s.p.base, "TASKCENTER_TOKEN=" + aliceToken, "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	w := &tcWatch{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			at, line := time.Now(), sc.Text()
			w.stderr = append(w.stderr, line)
			m := tcLine.FindStringSubmatch(line)
			if m == nil || m[1] != k.id {
				s.problem("tc watch %s printed %q", k.name, line)
				continue
			}
			sg := sighting{surface: surfTC, task: k.id, read: at, status: m[2], shows: line}
			if m[3] != "" {
				pct, _ := strconv.Atoi(m[3])
				cur, _ := strconv.ParseInt(m[4], 10, 64)
				tot, _ := strconv.ParseInt(m[5], 10, 64)
				sg.progress = &storyProgress{Current: cur, Total: tot, Percent: pct}
			}
			s.log.add(sg)
		}
		err := cmd.Wait()
		w.stdout = out.String()
		if ee, ok := err.(*exec.ExitError); ok {
			w.code = ee.ExitCode()
		} else {
			w.err = err
		}
		// What it printed last stays on the screen: the summary is its final sighting.
		if m := tcSummary.FindStringSubmatch(w.stdout); m != nil && m[2] == k.id {
			sg := sighting{surface: surfTC, task: k.id, read: time.Now(), status: m[1], shows: strings.TrimSpace(strings.SplitN(w.stdout, "\n", 2)[0])}
			if m[5] != "" {
				sg.counts = &storyCounts{}
				sg.counts.Total, _ = strconv.ParseInt(m[4], 10, 64)
				sg.counts.Success, _ = strconv.ParseInt(m[5], 10, 64)
				sg.counts.Failed, _ = strconv.ParseInt(m[6], 10, 64)
			}
			s.log.add(sg)
		} else {
			s.problem("tc watch %s: no summary line in %q", k.name, w.stdout)
		}
	}()
	s.t.Cleanup(func() {
		cmd.Process.Kill() //nolint:errcheck // it has usually exited already
		<-w.done
	})
	return w
}

func (w *tcWatch) finished() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// storyHooks is a webhook receiver subscribed to every event of alice's tasks. It verifies
// each delivery as the README tells receivers to, and keeps per task the event with the
// highest id it got (a receiver that de-duplicates and ignores stale repeats).
type storyHooks struct {
	s      *story
	url    string
	mu     sync.Mutex
	secret string
	got    []storyDelivery
	latest map[string]storyDelivery
	bad    []string
}

type storyDelivery struct {
	at  time.Time
	evt int64
	p   storyHookPayload
}

// storyHookPayload is a delivery as the README documents it: the event (its name, its place
// among the task's events, the status and attempt it committed) and the task's view when the
// delivery was made.
type storyHookPayload struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	Sequence  int64     `json:"sequence"`
	Status    string    `json:"status"`
	Attempt   int       `json:"attempt"`
	CreatedAt time.Time `json:"created_at"`
	Task      storyView `json:"task"`
}

func (h *storyHooks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	at := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	var p storyHookPayload
	sig := r.Header.Get("Taskcenter-Signature")
	switch {
	case !validSignature(h.secret, sig, body, at):
		h.bad = append(h.bad, "bad signature "+sig)
	case json.Unmarshal(body, &p) != nil:
		h.bad = append(h.bad, "not JSON: "+string(body))
	case p.ID != r.Header.Get("Taskcenter-Event-Id") || p.Type != r.Header.Get("Taskcenter-Event"):
		h.bad = append(h.bad, fmt.Sprintf("headers %q %q for %s %s", r.Header.Get("Taskcenter-Event-Id"), r.Header.Get("Taskcenter-Event"), p.ID, p.Type))
	default:
		evt, _ := strconv.ParseInt(strings.TrimPrefix(p.ID, "evt_"), 10, 64)
		d := storyDelivery{at: at, evt: evt, p: p}
		h.got = append(h.got, d)
		// The README's receiver: the event's status, in sequence order, is the task's latest;
		// a repeat or an older event changes nothing.
		if p.Sequence > h.latest[p.Task.ID].p.Sequence {
			h.latest[p.Task.ID] = d
			c, pr := p.Task.Counts, p.Task.Progress
			h.s.log.add(sighting{surface: surfWebhook, task: p.Task.ID, read: at, made: p.CreatedAt, status: p.Status, viewed: p.Task.Status,
				attempt: p.Attempt, counts: &c, progress: &pr, evt: evt, shows: fmt.Sprintf("%s %s #%d", p.ID, p.Type, p.Sequence)})
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// validSignature checks Taskcenter-Signature as the README says: t=<unix>,v1=<hex HMAC-SHA256
// of "<t>.<body>">, at most five minutes off.
func validSignature(secret, header string, body []byte, now time.Time) bool {
	var ts, v1 string
	for kv := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			v1 = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || now.Sub(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	got, err := hex.DecodeString(v1)
	return err == nil && hmac.Equal(got, mac.Sum(nil))
}

func (h *storyHooks) latestOf(task string) (storyDelivery, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	d, ok := h.latest[task]
	return d, ok
}

func (h *storyHooks) deliveries() []storyDelivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.got)
}

// newStoryHooks starts the receiver and subscribes it, through the API, to every event.
func (s *story) newStoryHooks() *storyHooks {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.t.Fatal(err)
	}
	h := &storyHooks{s: s, url: "http://" + ln.Addr().String() + "/hooks", latest: map[string]storyDelivery{}}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // closed at cleanup
	s.t.Cleanup(func() { srv.Close() })
	res := s.p.do("POST", "/api/v1/webhooks", aliceToken, map[string]any{"url": h.url, "events": []string{
		"task.submitted", "task.started", "task.cancel_requested", "task.retry_scheduled", "task.succeeded",
		"task.partially_succeeded", "task.failed", "task.timed_out", "task.cancelled", "task.retried"}})
	if res.status != http.StatusCreated {
		s.t.Fatalf("subscribe the receiver: %d %s", res.status, res.body)
	}
	var sub struct {
		Secret string `json:"secret"`
	}
	res.json(s.t, &sub)
	h.mu.Lock()
	h.secret = sub.Secret
	h.mu.Unlock()
	return h
}

// storyTab is one Chromium tab. A tab runs one thing at a time: its poller and the test's
// clicks take turns.
type storyTab struct {
	name string
	ctx  context.Context
	mu   sync.Mutex
}

func (tb *storyTab) do(actions ...chromedp.Action[chromedp.Void]) error {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	return chromedp.Do(ctx, actions...)
}

func (tb *storyTab) read(js string) (string, error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	ctx, cancel := context.WithTimeout(tb.ctx, 3*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[string](js))
}

// newTab opens another tab in the same browser (signed in: the cookie is shared).
func newTab(t *testing.T, b *browserSession, name string) *storyTab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open the %s tab: %v", name, err)
	}
	b.watchConsole(ctx, name+": ")
	return &storyTab{name: name, ctx: ctx}
}

// What the page shows, read off the DOM the way a person reads it: the status chip, the
// progress bar (its value and its "NN% · current/total" label) and "total / ok / rejected".
const listJS = `JSON.stringify(Array.from(document.querySelectorAll("#tasks tbody tr[data-id]")).map(tr => ({
	id: tr.dataset.id, status: tr.dataset.status,
	pct: tr.querySelector(".progress").getAttribute("aria-valuenow"),
	label: tr.querySelector(".progress .pct").textContent,
	counts: tr.querySelector(".counts").textContent})))`

const detailJS = `(() => { const q = s => document.querySelector(s); const bar = q("#task-progress");
	return JSON.stringify({path: location.pathname, shown: !!q("#detail") && !q("#detail").hidden,
		status: (q("#task-status") && q("#task-status").dataset.status) || "",
		pct: bar ? bar.getAttribute("aria-valuenow") : "", label: bar ? bar.querySelector(".pct").textContent : "",
		counts: q("#task-facts .counts") ? q("#task-facts .counts").textContent : "",
		error: q("#task-error") && !q("#task-error").hidden ? q("#task-error").textContent : "",
		by: q("#task-cancelled-by") && !q("#task-cancelled-by").hidden ? q("#task-cancelled-by").textContent : "",
		cancel: !!q("#cancel"), retry: !!q("#retry"), download: !!q("#download"), report: !!q("#error-report")}); })()`

type pageRow struct {
	ID       string `json:"id"`
	Path     string `json:"path"`
	Shown    bool   `json:"shown"`
	Status   string `json:"status"`
	Pct      string `json:"pct"`
	Label    string `json:"label"`
	Counts   string `json:"counts"`
	Error    string `json:"error"`
	By       string `json:"by"` // who cancelled it, once the page has read the task again
	Cancel   bool   `json:"cancel"`
	Retry    bool   `json:"retry"`
	Download bool   `json:"download"`
	Report   bool   `json:"report"`
}

var (
	pageCounts = regexp.MustCompile(`^(\d+) / (\d+) / (\d+)$`)
	pageLabel  = regexp.MustCompile(`^(\d+)%(?: · (\d+)/(\d+))?$`)
)

// sighting turns what the page shows into numbers; a bar whose value and label disagree is
// a problem of its own.
func (r pageRow) sighting(s *story, surface, task string, at time.Time) (sighting, bool) {
	if r.Status == "" {
		return sighting{}, false
	}
	sg := sighting{surface: surface, task: task, read: at, status: r.Status, shows: fmt.Sprintf("%q %q", r.Label, r.Counts)}
	if m := pageCounts.FindStringSubmatch(strings.TrimSpace(r.Counts)); m != nil {
		c := storyCounts{}
		c.Total, _ = strconv.ParseInt(m[1], 10, 64)
		c.Success, _ = strconv.ParseInt(m[2], 10, 64)
		c.Failed, _ = strconv.ParseInt(m[3], 10, 64)
		sg.counts = &c
	} else {
		s.problem("%s of %s shows counts %q", surface, task, r.Counts)
	}
	m := pageLabel.FindStringSubmatch(strings.TrimSpace(r.Label))
	if m == nil || m[1] != r.Pct {
		s.problem("%s of %s: the bar is at %q but says %q", surface, task, r.Pct, r.Label)
		return sg, true
	}
	p := storyProgress{}
	p.Percent, _ = strconv.Atoi(m[1])
	if m[2] != "" {
		p.Current, _ = strconv.ParseInt(m[2], 10, 64)
		p.Total, _ = strconv.ParseInt(m[3], 10, 64)
	}
	sg.progress = &p
	return sg, true
}

func (s *story) known(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids[id]
}

// watchTab reads a tab every 100 ms while the test runs.
func (s *story) watchTab(ctx context.Context, wg *sync.WaitGroup, tb *storyTab, js string, record func(string, time.Time)) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			out, err := tb.read(js)
			if err == nil {
				record(out, time.Now())
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
}

func (s *story) recordList(out string, at time.Time) {
	var rows []pageRow
	if json.Unmarshal([]byte(out), &rows) != nil {
		return
	}
	for _, r := range rows {
		if !s.known(r.ID) {
			continue
		}
		if sg, ok := r.sighting(s, surfList, r.ID, at); ok {
			s.log.add(sg)
		}
	}
}

func (s *story) recordDetail(out string, at time.Time) {
	var r pageRow
	if json.Unmarshal([]byte(out), &r) != nil || !r.Shown {
		return
	}
	id := strings.TrimPrefix(r.Path, "/tasks/")
	if !s.known(id) {
		return
	}
	if sg, ok := r.sighting(s, surfDetail, id, at); ok {
		s.log.add(sg)
	}
}

// readDetail reads the task page a tab shows now.
func (s *story) readDetail(tb *storyTab) pageRow {
	s.t.Helper()
	out, err := tb.read(detailJS)
	if err != nil {
		s.t.Fatalf("read the %s tab: %v", tb.name, err)
	}
	var r pageRow
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		s.t.Fatalf("read the %s tab: %v %q", tb.name, err, out)
	}
	s.recordDetail(out, time.Now()) // what the test saw is a sighting too
	return r
}

// openTask shows a task's page in a tab and waits until it has loaded.
func (s *story) openTask(tb *storyTab, k *storyTask) {
	s.t.Helper()
	if err := tb.do(chromedp.Navigate(s.p.base + "/tasks/" + k.id)); err != nil {
		s.t.Fatalf("open %s in the %s tab: %v", k.name, tb.name, err)
	}
	s.waitFor(k.name+"'s page in the "+tb.name+" tab", func() bool {
		r := s.readDetail(tb)
		return r.Shown && r.Path == "/tasks/"+k.id && r.Status != ""
	})
}

// storyImport is a generated import file.
func storyCSV(prefix string, rows, badEvery int64, allBad bool) []byte {
	var b bytes.Buffer
	b.WriteString("code,name,phone,email,city\n")
	for n := int64(1); n <= rows; n++ {
		phone := fmt.Sprintf("139%08d", n)
		if allBad || (badEvery > 0 && n%badEvery == 0) {
			phone = "12345"
		}
		fmt.Fprintf(&b, "%s%06d,name %d,%s,%s%d@example.com,Beijing\n", prefix, n, n, phone, strings.ToLower(prefix), n)
	}
	return b.Bytes()
}

func storyXLSX(t *testing.T, prefix string, rows, badEvery int64) []byte {
	t.Helper()
	return sheetBytes(t, func(f *excelize.File) {
		sw, err := f.NewStreamWriter("Sheet1")
		if err != nil {
			t.Fatal(err)
		}
		sw.SetRow("A1", []any{"code", "name", "phone", "email", "city"}) //nolint:errcheck
		for n := int64(1); n <= rows; n++ {
			phone := fmt.Sprintf("139%08d", n)
			if n%badEvery == 0 {
				phone = "12345"
			}
			cell, _ := excelize.CoordinatesToCellName(1, int(n)+1)
			sw.SetRow(cell, []any{fmt.Sprintf("%s%06d", prefix, n), fmt.Sprintf("name %d", n), phone, fmt.Sprintf("%s%d@example.com", strings.ToLower(prefix), n), "Beijing"}) //nolint:errcheck
		}
		if err := sw.Flush(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestEverySurfaceTellsTheSameStory(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test")
	}
	began := time.Now()
	tcBinary(t) // built before anything is timed
	b := newBrowser(t)
	e := newEnv(t, map[string]string{
		"TASKCENTER_IMPORT_BATCH_SIZE":      strconv.Itoa(storyBatch),
		"TASKCENTER_EXPORT_PAGE_SIZE":       strconv.Itoa(storyPage),
		"TASKCENTER_CLEANUP_SPEC":           "@every 1h", // nothing but the tasks moves
		"TASKCENTER_WORKER_POLL_INTERVAL":   "100ms",
		"TASKCENTER_WEBHOOKS_ALLOWED_HOSTS": "127.0.0.1",
		"TASKCENTER_WEBHOOKS_RETRY_BASE":    "200ms",
		"TASKCENTER_WEBHOOKS_RETRY_MAX":     "2s",
		"TASKCENTER_WEBHOOKS_POLL_INTERVAL": "100ms",
		// Postgres' idle-in-transaction and lock timeouts are a third of the takeover window:
		// with the harness's 1 s, a race-enabled process starved of CPU on a loaded machine
		// overruns them inside a batch, and the import waits out a transient retry. Nothing
		// dies in this test, so a long window costs nothing; a transient fault that still
		// happens is retried at once.
		"TASKCENTER_WORKER_TAKEOVER_AFTER":             "30s",
		"TASKCENTER_TYPES_IMPORT_CUSTOMERS_RETRY_BASE": "100ms",
	})
	e.seedCustomers(storyCustomers)
	p := e.start("all")
	s := &story{t: t, e: e, p: p}
	t.Cleanup(func() {
		// A wait that gave up ends the test before the problems are reported: they may say why.
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.reported && len(s.problems) > 0 {
			t.Logf("problems seen before the test stopped:\n%s", strings.Join(s.problems, "\n"))
		}
	})
	s.hooks = s.newStoryHooks()

	main := &storyTask{name: "import", kind: "import", rows: storyMainRows, step: storyBatch, bad: badRows(storyMainRows, storyMainBad), final: "PARTIAL_SUCCESS", exit: 2}
	long := &storyTask{name: "cancelled-and-retried import", kind: "import", rows: storyLongRows, step: storyBatch, bad: badRows(storyLongRows, storyLongBad), final: "PARTIAL_SUCCESS", exit: 2, retried: true}
	export := &storyTask{name: "export", kind: "export", rows: storyCustomers, step: storyPage, final: "SUCCESS", exit: 0}
	rejected := &storyTask{name: "all-rejected import", kind: "import", rows: storyRejRows, step: storyBatch, bad: badRows(storyRejRows, 1), final: "FAILED", errCode: "all_rows_rejected", exit: 1}
	mainFile := storyXLSX(t, "M", storyMainRows, storyMainBad)
	longFile := storyCSV("K", storyLongRows, storyLongBad, false)
	rejFile := storyCSV("R", storyRejRows, 0, true)

	// The page first, so that it is there when the tasks are submitted (it shows them as
	// they come, from the all-tasks stream).
	b.signIn(p.base, aliceToken)
	listTab := &storyTab{name: "list", ctx: b.ctx}
	longTab := newTab(t, b, "retried task")
	otherTab := newTab(t, b, "other tasks")
	stop, stopAll := context.WithCancel(context.Background())
	defer stopAll()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopAll()
	s.watchTab(stop, &wg, listTab, listJS, s.recordList)
	ready := time.Now()

	// --- four tasks at once ---------------------------------------------------------------
	main.id = p.submitImport(aliceToken, "story-main.xlsx", mainFile, map[string]string{"mode": "upsert"}).ID
	long.id = p.submitImport(aliceToken, "story-long.csv", longFile, map[string]string{"mode": "upsert"}).ID
	export.id = p.submitExport(aliceToken, map[string]any{"type": "customers", "filter": map[string]any{"code_prefix": "C"}}).ID
	rejected.id = p.submitImport(aliceToken, "story-rejected.csv", rejFile, map[string]string{"mode": "upsert"}).ID
	s.tasks = []*storyTask{main, long, export, rejected}
	s.mu.Lock()
	s.ids = map[string]bool{main.id: true, long.id: true, export.id: true, rejected.id: true}
	s.mu.Unlock()
	submitted := time.Now()
	s.pollGets(stop, &wg)
	streams := map[*storyTask]*streamRun{}
	watches := map[*storyTask]*tcWatch{}
	for _, k := range s.tasks {
		streams[k] = s.follow(stop, k, "")
		watches[k] = s.watch(k)
	}
	s.watchTab(stop, &wg, longTab, detailJS, s.recordDetail)
	s.watchTab(stop, &wg, otherTab, detailJS, s.recordDetail)
	s.openTask(longTab, long)
	s.openTask(otherTab, main)

	// --- cancel the long import while it runs, from the command line ------------------------
	var before *storyView
	s.waitFor("the long import to commit two batches", func() bool {
		v, err := s.get(stop, long.id)
		before = v
		return err == nil && (v.Counts.Total >= 2*storyBatch || terminalStatus(v.Status))
	})
	if before.Status != "RUNNING" && before.Status != "RETRY_WAIT" {
		t.Fatalf("the long import is %s before it could be cancelled (counts %s)", before.Status, before.Counts)
	}
	if r := p.tc(t.TempDir(), aliceToken, "cancel", long.id); r.code != 0 {
		t.Fatalf("tc cancel: exit %d", r.code)
	}
	// Every surface comes to show it cancelled, as a person looking at each would wait for.
	s.waitFor("every surface to show the long import CANCELLED", func() bool {
		g, err := s.get(stop, long.id)
		if err != nil || g.Status != "CANCELLED" {
			return false
		}
		l, _ := s.log.last(long.id, surfList)
		d := s.readDetail(longTab)
		h, _ := s.hooks.latestOf(long.id)
		return streams[long].over() && watches[long].finished() && l.status == "CANCELLED" &&
			d.Status == "CANCELLED" && d.Retry && h.p.Status == "CANCELLED"
	})
	cancelled, err := s.get(stop, long.id)
	if err != nil {
		t.Fatal(err)
	}
	s.sameEnd(long, "cancelled", cancelled, streams[long].last, s.readDetail(longTab), watches[long], nil)
	if cancelled.Counts.Total >= long.rows || cancelled.Links.Retry == "" {
		t.Fatalf("the cancelled import: counts %s, links %+v", cancelled.Counts, cancelled.Links)
	}
	cancelledAt := time.Now()
	long.cancelledAttempt = cancelled.Attempt

	// --- retry it from its page --------------------------------------------------------------
	// After the cancelled event the page reads the task again, which adds "Cancelled by …"
	// above the buttons and moves them; a person clicks once the page has stopped changing.
	s.waitFor("the page to say who cancelled it", func() bool {
		d := s.readDetail(longTab)
		return d.Status == "CANCELLED" && d.Retry && strings.HasPrefix(d.By, "Cancelled by alice")
	})
	long.retryAt = time.Now()
	if err := longTab.do(clickShown("#retry")); err != nil {
		t.Fatalf("click retry: %v", err)
	}
	s.waitFor("the retry to be accepted", func() bool {
		v, err := s.get(stop, long.id)
		return err == nil && v.Status != "CANCELLED"
	})
	firstStream, firstWatch := streams[long], watches[long]
	streams[long] = s.follow(stop, long, firstStream.lastID) // resumes after the cancel
	watches[long] = s.watch(long)

	// --- everything ends, and every surface shows it ------------------------------------------
	for _, k := range s.tasks {
		s.waitFor("every surface to show the end of the "+k.name, func() bool {
			g, err := s.get(stop, k.id)
			if err != nil || g.Status != k.final || (k.retried && g.Attempt <= k.cancelledAttempt) {
				return false
			}
			l, _ := s.log.last(k.id, surfList)
			h, _ := s.hooks.latestOf(k.id)
			return streams[k].over() && watches[k].finished() && l.status == k.final && h.p.Status == k.final
		})
	}
	s.waitFor("the retried import's page to show its end", func() bool { return s.readDetail(longTab).Status == long.final })
	ended := time.Now()
	pages := map[*storyTask]pageRow{long: s.readDetail(longTab)}
	for _, k := range []*storyTask{main, export, rejected} {
		if k != main {
			s.openTask(otherTab, k)
		}
		s.waitFor(k.name+"'s page to show its end", func() bool { return s.readDetail(otherTab).Status == k.final })
		pages[k] = s.readDetail(otherTab)
	}
	stopAll()
	wg.Wait()

	// --- the end, on every surface -------------------------------------------------------------
	for _, k := range s.tasks {
		g, err := s.get(context.Background(), k.id)
		if err != nil {
			t.Fatal(err)
		}
		s.log.add(viewSighting(surfGet, g, time.Now(), time.Now()))
		s.expectEnd(k, g)
		show := s.tcShow(k)
		s.sameEnd(k, "end", g, streams[k].last, pages[k], watches[k], &show)
	}
	// The rule for an import whose every row was rejected: retrying it would fail the same
	// way, so no surface offers it and the API refuses it.
	if res := p.do("POST", "/api/v1/tasks/"+rejected.id+"/retry", aliceToken, nil); res.status != http.StatusConflict {
		t.Errorf("retry of the all-rejected import: %d %s, want 409", res.status, res.body)
	}
	if r := p.tc(t.TempDir(), aliceToken, "retry", rejected.id); r.code != 1 {
		t.Errorf("tc retry of the all-rejected import: exit %d, want 1", r.code)
	}

	// --- every moment along the way --------------------------------------------------------------
	outbox := s.outbox()
	for _, k := range s.tasks {
		if k.retried {
			for _, ev := range outbox[k.id] {
				if ev.Event == "task.retried" {
					k.retriedEvt = ev.ID
				}
			}
			if k.retriedEvt == 0 {
				t.Errorf("the outbox has no task.retried for %s", k.name)
			}
		}
	}
	var runs []*streamRun
	for k, r := range streams {
		if k == long {
			runs = []*streamRun{firstStream, r}
		} else {
			runs = []*streamRun{r}
		}
		s.checkStream(k, runs, outbox[k.id])
	}
	s.checkHooks(outbox)
	lags := map[string]time.Duration{}
	for _, k := range s.tasks {
		s.checkSightings(k, lags)
	}
	if firstWatch.code != 1 {
		t.Errorf("tc watch of the cancelled import: exit %d, want 1", firstWatch.code)
	}

	for _, pr := range b.errorsBut(nil) {
		s.problem("the browser reported: %s", pr)
	}
	s.mu.Lock()
	problems := slices.Clone(s.problems)
	s.reported = true
	s.mu.Unlock()
	if len(problems) > 40 {
		problems = append(problems[:40], fmt.Sprintf("… and %d more", len(problems)-40))
	}
	for _, pr := range problems {
		t.Error(pr)
	}

	counts := map[string]int{}
	s.log.mu.Lock()
	for _, sg := range s.log.all {
		counts[sg.surface]++
	}
	s.log.mu.Unlock()
	t.Logf("sightings per surface: %v; slowest catch-up per surface: %v", counts, lags)
	t.Logf("timing: set-up %s, submit→cancelled everywhere %s, retry→everything ended everywhere %s, checks %s, total %s",
		ready.Sub(began).Round(time.Millisecond), cancelledAt.Sub(submitted).Round(time.Millisecond),
		ended.Sub(cancelledAt).Round(time.Millisecond), time.Since(ended).Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

// expectEnd checks a task's final view against what its input must give.
func (s *story) expectEnd(k *storyTask, g *storyView) {
	var want storyCounts
	switch k.kind {
	case "import":
		want = storyCounts{Total: k.rows, Success: k.rows - k.bad[k.rows], Failed: k.bad[k.rows]}
	case "export":
		want = storyCounts{Total: k.rows, Success: k.rows}
	}
	if g.Status != k.final || g.errCode() != k.errCode || g.Counts != want ||
		g.Progress.Current != k.rows || g.Progress.Total != k.rows || g.Progress.Percent != 100 {
		s.problem("%s ended %s %q counts %s progress %s; want %s %q counts %s progress %d/%d 100%%",
			k.name, g.Status, g.errCode(), g.Counts, g.Progress, k.final, k.errCode, want, k.rows, k.rows)
	}
	wantReport := k.kind == "import"
	if (g.Links.ErrorReport != "") != wantReport || (g.Links.Result != "") != (k.kind == "export") || g.Links.Retry != "" || g.Links.Cancel != "" {
		s.problem("%s ended with links %+v", k.name, g.Links)
	}
	if k.kind == "export" && (g.Result == nil || g.Result.Rows != g.Counts.Success) {
		s.problem("the export wrote %+v rows but counts %s", g.Result, g.Counts)
	}
	if want := 1; len(g.Attempts) != want+map[bool]int{true: 1}[k.retried] {
		// More attempts than that are transient faults retried (the log says why); the
		// surfaces must agree all the same.
		s.t.Logf("%s has %d attempts (%d expected)", k.name, len(g.Attempts), want+map[bool]int{true: 1}[k.retried])
	}
}

// tcShow runs `tc show ID` and reads what it prints.
func (s *story) tcShow(k *storyTask) sighting {
	s.t.Helper()
	r := s.p.tc(s.t.TempDir(), aliceToken, "show", k.id)
	sg := sighting{surface: "tc show", task: k.id, read: time.Now(), shows: r.stdout}
	if r.code != 0 {
		s.problem("tc show %s: exit %d", k.name, r.code)
		return sg
	}
	if m := regexp.MustCompile(`(?m)^(tsk_\S+)  (\S+)  ([A-Z_]+)$`).FindStringSubmatch(r.stdout); m != nil {
		sg.status = m[3]
	}
	if m := regexp.MustCompile(`(?m)^owner \S+, queue \S+, attempt (\d+) `).FindStringSubmatch(r.stdout); m != nil {
		sg.attempt, _ = strconv.Atoi(m[1])
	}
	if m := regexp.MustCompile(`(?m)^progress (\d+)/(\d+) \((\d+)%\), rows (\d+) ok (\d+) rejected (\d+)$`).FindStringSubmatch(r.stdout); m != nil {
		var p storyProgress
		var c storyCounts
		p.Current, _ = strconv.ParseInt(m[1], 10, 64)
		p.Total, _ = strconv.ParseInt(m[2], 10, 64)
		p.Percent, _ = strconv.Atoi(m[3])
		c.Total, _ = strconv.ParseInt(m[4], 10, 64)
		c.Success, _ = strconv.ParseInt(m[5], 10, 64)
		c.Failed, _ = strconv.ParseInt(m[6], 10, 64)
		sg.progress, sg.counts = &p, &c
	}
	if m := regexp.MustCompile(`(?m)^result (.+) \((\d+) rows, (\d+) bytes\)`).FindStringSubmatch(r.stdout); m != nil && k.kind == "export" {
		n, _ := strconv.ParseInt(m[2], 10, 64)
		sg.rows = &n
	}
	return sg
}

// sameEnd compares how each surface shows a task that has stopped (cancelled, or at its end)
// with GET: status, counts, progress, error and the actions offered.
func (s *story) sameEnd(k *storyTask, when string, g, streamed *storyView, page pageRow, w *tcWatch, show *sighting) {
	s.t.Helper()
	type shown struct {
		surface                string
		status                 string
		counts                 *storyCounts
		progress               *storyProgress
		errCode                *string
		report, retry, results *bool
		cancel                 *bool
		rows                   *int64
		attempt                int
	}
	ref := func(v bool) *bool { return &v }
	str := func(v string) *string { return &v }
	var all []shown
	gc, gp, gcode := g.Counts, g.Progress, g.errCode()
	gp.UpdatedAt = time.Time{}
	var rows *int64
	if g.Result != nil && k.kind == "export" {
		rows = &g.Result.Rows
	}
	all = append(all, shown{surface: surfGet, status: g.Status, counts: &gc, progress: &gp, errCode: &gcode,
		report: ref(g.Links.ErrorReport != ""), retry: ref(g.Links.Retry != ""), results: ref(g.Links.Result != ""),
		cancel: ref(g.Links.Cancel != ""), rows: rows, attempt: g.Attempt})
	if streamed == nil {
		s.problem("%s (%s): the event stream showed no status", k.name, when)
	} else {
		c, pr := streamed.Counts, streamed.Progress
		pr.UpdatedAt = time.Time{}
		sh := shown{surface: surfSSE, status: streamed.Status, counts: &c, progress: &pr, errCode: str(streamed.errCode()),
			report: ref(streamed.Links.ErrorReport != ""), retry: ref(streamed.Links.Retry != ""), results: ref(streamed.Links.Result != ""),
			cancel: ref(streamed.Links.Cancel != ""), attempt: streamed.Attempt}
		if streamed.Result != nil && k.kind == "export" {
			sh.rows = &streamed.Result.Rows
		}
		all = append(all, sh)
	}
	if sg, ok := page.sighting(s, surfDetail, k.id, time.Now()); ok {
		sh := shown{surface: surfDetail, status: sg.status, counts: sg.counts, progress: sg.progress,
			report: ref(page.Report), retry: ref(page.Retry), results: ref(page.Download), cancel: ref(page.Cancel)}
		all = append(all, sh)
		if g.Error != nil && !strings.Contains(page.Error, g.Error.Message) {
			s.problem("%s (%s): the page says %q, GET's error is %q", k.name, when, page.Error, g.Error.Message)
		}
		if g.Error == nil && page.Error != "" {
			s.problem("%s (%s): the page shows an error %q, GET none", k.name, when, page.Error)
		}
	} else {
		s.problem("%s (%s): the page shows no status", k.name, when)
	}
	if l, ok := s.log.last(k.id, surfList); ok {
		all = append(all, shown{surface: surfList, status: l.status, counts: l.counts, progress: l.progress})
	}
	// tc watch: its summary, the hints it prints, and its exit code.
	if m := tcSummary.FindStringSubmatch(w.stdout); m != nil {
		sh := shown{surface: "tc watch", status: m[1],
			report:  ref(strings.Contains(w.stdout, "rejected rows: tc error-report "+k.id)),
			results: ref(strings.Contains(w.stdout, "download: tc download "+k.id))}
		if m[5] != "" {
			c := storyCounts{}
			c.Total, _ = strconv.ParseInt(m[4], 10, 64)
			c.Success, _ = strconv.ParseInt(m[5], 10, 64)
			c.Failed, _ = strconv.ParseInt(m[6], 10, 64)
			sh.counts = &c
		}
		code := ""
		if em := tcErrLine.FindStringSubmatch(w.stdout); em != nil {
			code = em[1]
		}
		if g.Error != nil && g.Error.Message != "" || code != "" {
			sh.errCode = &code
		}
		all = append(all, sh)
		wantExit := k.exit
		if when == "cancelled" {
			wantExit = 1
		}
		if w.code != wantExit {
			s.problem("%s (%s): tc watch exited %d, want %d for %s", k.name, when, w.code, wantExit, g.Status)
		}
	} else {
		s.problem("%s (%s): tc watch printed no summary: %q", k.name, when, w.stdout)
	}
	if show != nil {
		all = append(all, shown{surface: "tc show", status: show.status, counts: show.counts, progress: show.progress, attempt: show.attempt, rows: show.rows})
	}
	if d, ok := s.hooks.latestOf(k.id); ok {
		v := d.p.Task
		c, pr := v.Counts, v.Progress
		pr.UpdatedAt = time.Time{}
		sh := shown{surface: surfWebhook, status: d.p.Status, counts: &c, progress: &pr, errCode: str(v.errCode()), attempt: d.p.Attempt,
			report: ref(v.Links.ErrorReport != ""), retry: ref(v.Links.Retry != ""), results: ref(v.Links.Result != ""), cancel: ref(v.Links.Cancel != "")}
		if v.Status != d.p.Status {
			s.problem("%s (%s): the latest webhook, %s, committed %s but shows the task %s", k.name, when, d.p.ID, d.p.Status, v.Status)
		}
		ending := map[string]string{"SUCCESS": "task.succeeded", "PARTIAL_SUCCESS": "task.partially_succeeded",
			"FAILED": "task.failed", "CANCELLED": "task.cancelled"}[g.Status]
		if d.p.Type != ending {
			s.problem("%s (%s): the latest webhook is %s, want %s for %s", k.name, when, d.p.Type, ending, g.Status)
		}
		if v.Result != nil && k.kind == "export" {
			sh.rows = &v.Result.Rows
		}
		all = append(all, sh)
	} else {
		s.problem("%s (%s): the receiver got nothing", k.name, when)
	}

	var table strings.Builder
	fmt.Fprintf(&table, "%s, %s:\n", k.name, when)
	want := all[0]
	for _, sh := range all {
		var diffs []string
		line := fmt.Sprintf("  %-12s %-15s", sh.surface, sh.status)
		if sh.status != want.status {
			diffs = append(diffs, "status")
		}
		if sh.counts != nil {
			line += " counts " + sh.counts.String()
			if *sh.counts != *want.counts {
				diffs = append(diffs, "counts")
			}
		}
		if sh.progress != nil {
			line += " progress " + sh.progress.String()
			// The page and tc show the percent, and current/total only while there is a total.
			if sh.progress.Percent != want.progress.Percent || (sh.progress.Total != 0 || want.progress.Total == 0) &&
				(sh.progress.Current != want.progress.Current || sh.progress.Total != want.progress.Total) {
				diffs = append(diffs, "progress")
			}
		}
		if sh.errCode != nil {
			line += fmt.Sprintf(" error %q", *sh.errCode)
			if *sh.errCode != *want.errCode {
				diffs = append(diffs, "error")
			}
		}
		for _, l := range []struct {
			name      string
			got, want *bool
		}{{"error report", sh.report, want.report}, {"retry", sh.retry, want.retry}, {"result", sh.results, want.results}, {"cancel", sh.cancel, want.cancel}} {
			if l.got == nil {
				continue
			}
			if *l.got {
				line += " [" + l.name + "]"
			}
			if *l.got != *l.want {
				diffs = append(diffs, l.name+" link")
			}
		}
		if sh.rows != nil {
			line += fmt.Sprintf(" rows %d", *sh.rows)
			if want.rows == nil || *sh.rows != *want.rows {
				diffs = append(diffs, "result rows")
			}
		}
		if sh.attempt != 0 {
			line += fmt.Sprintf(" attempt %d", sh.attempt)
			if sh.attempt != want.attempt {
				diffs = append(diffs, "attempt")
			}
		}
		if len(diffs) > 0 {
			line += "   ← differs from GET: " + strings.Join(diffs, ", ")
			s.problem("%s (%s): %s shows %s differently from GET", k.name, when, sh.surface, strings.Join(diffs, ", "))
		}
		table.WriteString(line + "\n")
	}
	s.t.Log(table.String())
}

type storyEvent struct {
	ID      int64  `bun:"id"`
	TaskNo  string `bun:"task_no"`
	Event   string `bun:"event"`
	Status  string `bun:"status"`
	Attempt int    `bun:"attempt"`
}

// outbox returns each task's committed changes, in order.
func (s *story) outbox() map[string][]storyEvent {
	s.t.Helper()
	var evs []storyEvent
	if err := s.e.db().NewRaw(`SELECT id, task_no, event, status, attempt FROM task_events ORDER BY id`).Scan(context.Background(), &evs); err != nil {
		s.t.Fatal(err)
	}
	out := map[string][]storyEvent{}
	for _, ev := range evs {
		out[ev.TaskNo] = append(out[ev.TaskNo], ev)
	}
	return out
}

// checkStream: a task's stream announces every change that committed after it opened, once,
// in order, and as it committed; a resumed stream goes on from where the last one stopped.
func (s *story) checkStream(k *storyTask, runs []*streamRun, outbox []storyEvent) {
	byID := map[int64]storyEvent{}
	for _, ev := range outbox {
		byID[ev.ID] = ev
	}
	var got []int64
	for i, r := range runs {
		if r.err != nil || !r.ended {
			s.problem("%s: event stream %d ended with %v (ended by the server: %v)", k.name, i+1, r.err, r.ended)
		}
		for _, v := range r.statuses {
			if v.Event == nil {
				if i > 0 || len(got) > 0 {
					s.problem("%s: a status event without its change after the first", k.name)
				}
				continue
			}
			ev, ok := byID[v.Event.ID]
			if !ok || ev.Event != v.Event.Name || ev.Status != v.Event.Status || ev.Attempt != v.Event.Attempt {
				s.problem("%s: the stream announced %+v, the outbox has %+v", k.name, *v.Event, ev)
			}
			got = append(got, v.Event.ID)
		}
	}
	var want []int64
	for _, ev := range outbox {
		if ev.ID > runs[0].first {
			want = append(want, ev.ID)
		}
	}
	if !slices.Equal(got, want) {
		s.problem("%s: the stream announced changes %v; after it opened the outbox has %v", k.name, got, want)
	}
}

// checkHooks: the receiver heard of every change of every task, each validly signed, saying
// what committed and its place among its task's events, and (per task) in that order.
func (s *story) checkHooks(outbox map[string][]storyEvent) {
	got := s.hooks.deliveries()
	s.hooks.mu.Lock()
	bad := slices.Clone(s.hooks.bad)
	s.hooks.mu.Unlock()
	for _, b := range bad {
		s.problem("webhook delivery refused by the receiver: %s", b)
	}
	type place struct {
		ev  storyEvent
		seq int64
	}
	places := map[int64]place{}
	for _, evs := range outbox {
		for i, ev := range evs {
			places[ev.ID] = place{ev, int64(i + 1)}
		}
	}
	seen := map[int64]int{}
	next := map[string]int64{} // per task, the sequence that may arrive first next
	for _, d := range got {
		pl, ok := places[d.evt]
		if !ok || pl.ev.TaskNo != d.p.Task.ID || pl.ev.Event != d.p.Type || pl.ev.Status != d.p.Status ||
			pl.ev.Attempt != d.p.Attempt || pl.seq != d.p.Sequence {
			s.problem("webhook %s %s #%d says %s attempt %d of %s; the outbox has %+v as #%d",
				d.p.ID, d.p.Type, d.p.Sequence, d.p.Status, d.p.Attempt, d.p.Task.ID, pl.ev, pl.seq)
		}
		seen[d.evt]++
		if seen[d.evt] > 1 {
			continue
		}
		if d.p.Sequence != next[d.p.Task.ID]+1 {
			s.problem("webhook %s (%s, #%d) of %s arrived first after #%d", d.p.ID, d.p.Type, d.p.Sequence, d.p.Task.ID, next[d.p.Task.ID])
		}
		next[d.p.Task.ID] = max(next[d.p.Task.ID], d.p.Sequence)
	}
	for _, k := range s.tasks {
		for _, ev := range outbox[k.id] {
			if seen[ev.ID] == 0 {
				s.problem("%s: the receiver never got %s (evt_%d)", k.name, ev.Event, ev.ID)
			}
		}
	}
	repeats := 0
	for _, n := range seen {
		repeats += n - 1
	}
	s.t.Logf("webhooks: %d deliveries of %d events (%d repeats)", len(got), len(seen), repeats)
}

// checkSightings walks every surface's sightings of a task in the order the test had them:
// each is a committed state, none goes back, none is ahead of what GET answered next, none is
// more than a batch behind what GET had answered before it was made, and each live surface
// catches up with what GET showed.
func (s *story) checkSightings(k *storyTask, lags map[string]time.Duration) {
	gets := s.log.of(k.id, surfGet)
	if len(gets) == 0 {
		s.problem("%s: GET never answered", k.name)
		return
	}
	rank := func(o sighting) int { // reported once, in the walk below
		r, _ := k.rank(o)
		return r
	}
	after := func(at time.Time) sighting { // the first GET sent after at
		for _, g := range gets {
			if g.sent.After(at) {
				return g
			}
		}
		return gets[len(gets)-1]
	}
	before := func(at time.Time) (sighting, bool) { // the last GET answered before at
		var out sighting
		ok := false
		for _, g := range gets {
			if g.read.Before(at) {
				out, ok = g, true
			}
		}
		return out, ok
	}
	for _, surface := range storySurfaces {
		all := s.log.of(k.id, surface)
		if len(all) == 0 {
			s.problem("%s: %s never showed it", k.name, surface)
			continue
		}
		var prev sighting
		prevRank := -1
		for i, o := range all {
			r, why := k.rank(o)
			if why != "" {
				s.problem("%s: %s: %s", k.name, o, why)
			}
			if r < prevRank {
				s.problem("%s: %s went back: %s, then %s; GET answered %s", k.name, surface, prev, o, after(o.read))
			}
			if o.counts != nil {
				if why := k.committed(*o.counts, o.viewStatus()); why != "" {
					s.problem("%s: %s: %s", k.name, o, why)
				}
				if i > 0 && prev.counts != nil && (o.counts.Total < prev.counts.Total || o.counts.Failed < prev.counts.Failed) {
					s.problem("%s: %s counts went back: %s, then %s; GET answered %s", k.name, surface, prev, o, after(o.read))
				}
			}
			if o.progress != nil {
				if why := k.progressOK(*o.progress, o.counts, o.viewStatus()); why != "" {
					s.problem("%s: %s: %s", k.name, o, why)
				}
				if i > 0 && prev.progress != nil && o.progress.Current < prev.progress.Current && o.progress.Total != 0 {
					s.problem("%s: %s progress went back: %s, then %s; GET answered %s", k.name, surface, prev, o, after(o.read))
				}
			}
			if surface != surfGet {
				// Never ahead: whatever it shows had committed, so GET answers it (or more).
				g := after(o.read)
				if rg := rank(g); r > rg {
					s.problem("%s: %s is ahead of GET: %s, then %s", k.name, surface, o, g)
				}
				if o.counts != nil && (o.counts.Total > g.counts.Total || o.counts.Success > g.counts.Success || o.counts.Failed > g.counts.Failed) {
					s.problem("%s: %s shows counts GET has not: %s, then %s", k.name, surface, o, g)
				}
				if o.progress != nil && o.progress.Current > g.progress.Current {
					s.problem("%s: %s shows progress GET has not: %s, then %s", k.name, surface, o, g)
				}
			}
			if !o.made.IsZero() {
				// Never behind by more than a batch of what had committed when it was made.
				if g, ok := before(o.made); ok {
					if rank(g) > r {
						s.problem("%s: %s was made behind GET: %s after %s", k.name, surface, o, g)
					}
					if o.counts != nil && o.counts.Total < g.counts.Total-k.step {
						s.problem("%s: %s was made more than a batch behind GET: %s after %s", k.name, surface, o, g)
					}
					if o.progress != nil && o.progress.Current < g.progress.Current-k.step {
						s.problem("%s: %s progress was made more than a batch behind GET: %s after %s", k.name, surface, o, g)
					}
				}
			}
			prev, prevRank = o, max(prevRank, r)
		}
		if surface == surfGet {
			continue
		}
		// Catching up: after GET answered a state, the surface shows it (or a later one, or
		// at most a batch less) within storyCatchUp. tc prints progress only every few
		// seconds and webhooks come only with status changes, so they are held to the status.
		withCounts := surface == surfSSE || surface == surfList || surface == surfDetail
		for _, g := range gets {
			if g.read.Before(all[0].read) {
				continue
			}
			rg := rank(g)
			caught := func(o sighting) bool {
				ro := rank(o)
				if ro != rg || !withCounts {
					return ro >= rg
				}
				return (o.counts == nil || o.counts.Total >= g.counts.Total-k.step) &&
					(o.progress == nil || o.progress.Total == 0 || o.progress.Current >= g.progress.Current-k.step)
			}
			var shown *sighting // what the surface showed when GET answered
			for i := range all {
				if !all[i].read.After(g.read) {
					shown = &all[i]
				}
			}
			if shown != nil && caught(*shown) {
				continue
			}
			found, any := false, false
			for _, o := range all {
				if !o.read.After(g.read) {
					continue
				}
				any = true
				if caught(o) {
					found = true
					lag := o.read.Sub(g.read)
					lags[surface] = max(lags[surface], lag.Round(time.Millisecond))
					if lag > storyCatchUp {
						s.problem("%s: %s took %s to show what GET showed: %s, then %s", k.name, surface, lag, g, o)
					}
					break
				}
			}
			if any && !found {
				s.problem("%s: %s never showed what GET showed: %s; it stayed at %s", k.name, surface, g, all[len(all)-1])
			}
		}
	}
}
