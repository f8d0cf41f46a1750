package store_test

// The randomized model test of the task state machine. A seeded generator drives
// actors against real Postgres and Redis: workers that claim, heartbeat, write import batches,
// finish with a result file, hit transient errors, run out of retries, hand tasks back, crash
// (drop their lease mid-task, leaving partial files) and stall; users that cancel and retry at
// random moments; the real cleanup round; and a clock that ages every timestamp so heartbeats
// go stale, retries come due and alerts ripen. Some steps run two actors at once, so the
// database's serialisation is exercised too. After every step the invariants below are checked;
// a violation prints the seed and the steps that led to it.
//
//	go test -run TestStateMachineModel ./store/                      # 200 seeds (make test)
//	TASKCENTER_MODEL_SEEDS=10000 go test -run TestStateMachineModel -timeout 2h ./store/   # make soak
//	TASKCENTER_MODEL_SEED=1234 go test -run TestStateMachineModel -v ./store/              # replay one

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/cleanup"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/customers"
	"github.com/taskcenter/taskcenter/store/storetest"
)

const (
	modelTakeover = 10 * time.Second // heartbeats older than this may be taken over
	modelTimeout  = 40               // timeout_seconds: cleanup times out silence this long
	modelMaxRetry = 2
)

func TestStateMachineModel(t *testing.T) {
	t.Parallel()
	testenv.RunModelSeeds(t, 4, func(t *testing.T) func(uint64) { return newModelWorld(t).runSeed })
}

// modelWorld is one shard's database, Redis, data dir and cleaner, reset between seeds.
type modelWorld struct {
	t       *testing.T
	db      *bun.DB
	st      *store.Store
	files   storage.Store
	root    string // the data dir
	rdb     *testenv.Redis
	cleaner *cleanup.Cleaner
	alerts  *alertLog
}

type alertLog struct {
	mu     sync.Mutex
	byTask map[string]int
}

func (a *alertLog) TaskFailed(_ context.Context, al jobs.Alert) {
	a.mu.Lock()
	a.byTask[al.TaskNo]++
	a.mu.Unlock()
}

func (a *alertLog) count(taskNo string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.byTask[taskNo]
}

func newModelWorld(t *testing.T) *modelWorld {
	pg := storetest.NewPostgres(t)
	rd := testenv.NewRedis(t)
	root := t.TempDir()
	fs, err := storage.New(context.Background(), storage.Config{}, root)
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(pg.DB)
	alerts := &alertLog{byTask: map[string]int{}}
	sched, _ := cleanup.ParseSpec("@every 1s")
	enq := jobs.NewEnqueuer(asynq.NewClientFromRedisClient(rd.Client), asynq.NewInspectorFromRedisClient(rd.Client), nil)
	c := cleanup.New(cleanup.Config{Schedule: sched, Location: time.UTC, OrphanGrace: 5 * time.Second, TakeoverAfter: modelTakeover,
		BatchSize: 100, UploadTTL: time.Hour, TempTTL: 0, Retention: 1000 * time.Hour},
		"model", cleanup.Deps{Store: st, Enqueuer: enq, Files: fs, TaskAlerter: alerts, Logger: slog.New(slog.DiscardHandler)})
	return &modelWorld{t: t, db: pg.DB, st: st, files: fs, root: root, rdb: rd, cleaner: c, alerts: alerts}
}

func (w *modelWorld) reset() {
	ctx := context.Background()
	// DELETE, not TRUNCATE: a TRUNCATE gives every table and index new files, 160–200 ms a
	// seed in a loaded suite (pg_stat_statements, 2026-12-03, host vm), where the model's few
	// rows go in milliseconds. The tables holding task rows follow by ON DELETE CASCADE.
	if _, err := w.db.ExecContext(ctx, "DELETE FROM tasks; DELETE FROM customers; DELETE FROM cleanup_rounds"); err != nil {
		w.t.Fatal(err)
	}
	w.rdb.Client.FlushDB(ctx)
	for _, area := range []string{storage.Results, storage.ScratchDir} {
		dir := filepath.Join(w.root, area)
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	w.alerts.mu.Lock()
	clear(w.alerts.byTask)
	w.alerts.mu.Unlock()
}

// mTask is the model's knowledge of one task.
type mTask struct {
	id         int64
	no         string
	rows       int          // data rows in its "file"
	bad        map[int]bool // rejected rows
	generation int          // bumped by each manual retry
	// cancelAttempt is the attempt number when a cancel was acknowledged in this generation
	// (-1: none). From then on the task must not be claimed again nor end other than
	// CANCELLED or by a completed success.
	cancelAttempt int
	terminal      *snapshot // the row when last seen terminal
}

// snapshot is what must not change on a terminal row except through the retry API.
type snapshot struct {
	status                 store.Status
	attempt, retryCount    int
	total, success, failed int64
	checkpoint, errorCode  string
	alertDue               bool
}

func snap(t *store.Task) *snapshot {
	return &snapshot{status: t.Status, attempt: t.Attempt, retryCount: t.RetryCount, total: t.TotalCount, success: t.SuccessCount,
		failed: t.FailedCount, checkpoint: string(t.Checkpoint), errorCode: t.ErrorCode, alertDue: t.AlertDueAt != nil}
}

// mWorker is one worker actor.
type mWorker struct {
	name  string
	lease *store.Lease
	task  *mTask
	next  int // next data row to write
	temp  *os.File
}

// model is one seed's run.
type model struct {
	w       *modelWorld
	rng     *rand.Rand
	seed    uint64
	tasks   []*mTask
	workers []*mWorker
	trace   []string
	mu      sync.Mutex // guards tasks' model fields and trace during concurrent steps
	rngMu   sync.Mutex
	// roundAlone: the last step was a cleanup round with nothing running beside it, so the
	// files invariant can be checked.
	roundAlone bool
}

func (w *modelWorld) runSeed(seed uint64) {
	w.reset()
	m := &model{w: w, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), seed: seed}
	ctx := context.Background()
	for i := range 2 + m.intn(3) {
		m.submit(ctx, i)
	}
	for i := range 2 + m.intn(2) {
		m.workers = append(m.workers, &mWorker{name: fmt.Sprintf("w%d", i)})
	}
	steps := 30 + m.intn(30)
	for step := range steps {
		m.roundAlone = false
		if m.intn(100) < 15 {
			a, b := m.pair()
			m.logf("step %d: together: %s + %s", step, a.name, b.name)
			var wg sync.WaitGroup
			wg.Go(func() { a.run(ctx) })
			wg.Go(func() { b.run(ctx) })
			wg.Wait()
		} else {
			a := m.action()
			m.logf("step %d: %s", step, a.name)
			a.run(ctx)
			m.roundAlone = a.round
		}
		if m.w.t.Failed() {
			return
		}
		m.check(ctx, step, false)
	}
	// Ripen every alert and run the round twice, then check the end-of-run invariants.
	m.age(ctx, 120)
	m.round(ctx)
	m.round(ctx)
	m.roundAlone = true
	m.check(ctx, steps, true)
}

// intn draws from the seed's generator; actors running together share it under the lock.
func (m *model) intn(n int) int {
	m.rngMu.Lock()
	defer m.rngMu.Unlock()
	return m.rng.IntN(n)
}

func (m *model) logf(format string, args ...any) {
	m.mu.Lock()
	m.trace = append(m.trace, fmt.Sprintf(format, args...))
	m.mu.Unlock()
}

// bug stops the actor on an unexpected error (from any goroutine).
func (m *model) bug(format string, args ...any) {
	m.w.t.Errorf("seed %d: %s\nreplay: TASKCENTER_MODEL_SEED=%d go test -run TestStateMachineModel -v ./store/", m.seed, fmt.Sprintf(format, args...), m.seed)
	runtime.Goexit()
}

func (m *model) fail(step int, format string, args ...any) {
	m.w.t.Helper()
	tail := m.trace
	if len(tail) > 40 {
		tail = tail[len(tail)-40:]
	}
	m.w.t.Fatalf("seed %d, step %d: %s\nreplay: TASKCENTER_MODEL_SEED=%d go test -run TestStateMachineModel -v ./store/\nlast steps:\n  %s",
		m.seed, step, fmt.Sprintf(format, args...), m.seed, strings.Join(tail, "\n  "))
}

func (m *model) submit(ctx context.Context, i int) {
	mt := &mTask{no: fmt.Sprintf("tsk_M%dT%d", m.seed, i), rows: 1 + m.intn(12), bad: map[int]bool{}, cancelAttempt: -1}
	for r := 1; r <= mt.rows; r++ {
		if m.intn(5) == 0 {
			mt.bad[r] = true
		}
	}
	task, _, err := m.w.st.Create(ctx, store.NewTask{TaskNo: mt.no, Type: "import:customers", Owner: "alice", Queue: "imports",
		MaxRetry: modelMaxRetry, TimeoutSeconds: modelTimeout})
	if err != nil {
		m.bug("%v", err)
	}
	mt.id = task.ID
	m.tasks = append(m.tasks, mt)
}

type action struct {
	name  string
	run   func(ctx context.Context)
	actor string // who acts: a worker, "user", "clock" or "cleaner"
	round bool
}

// pair picks two actions by different actors to run at the same time. A user's retry is never
// one of them: the model could not tell which of a racing retry and cancel won.
func (m *model) pair() (action, action) {
	for {
		a, b := m.action(), m.action()
		if a.actor != b.actor && !strings.HasPrefix(a.name, "retry") && !strings.HasPrefix(b.name, "retry") {
			return a, b
		}
	}
}

// action picks the next actor and what it does.
func (m *model) action() action {
	r := m.intn(100)
	switch {
	case r < 62:
		wk := m.workers[m.intn(len(m.workers))]
		return m.workerAction(wk)
	case r < 72:
		mt := m.tasks[m.intn(len(m.tasks))]
		return action{name: "cancel " + mt.no, run: func(ctx context.Context) { m.cancel(ctx, mt) }, actor: "user"}
	case r < 80:
		mt := m.tasks[m.intn(len(m.tasks))]
		return action{name: "retry " + mt.no, run: func(ctx context.Context) { m.retry(ctx, mt) }, actor: "user"}
	case r < 90:
		secs := 1 + m.intn(30)
		return action{name: fmt.Sprintf("clock +%ds", secs), run: func(ctx context.Context) { m.age(ctx, secs) }, actor: "clock"}
	default:
		return action{name: "cleanup round", run: func(ctx context.Context) { m.round(ctx) }, actor: "cleaner", round: true}
	}
}

func (m *model) workerAction(wk *mWorker) action {
	a := m.workerStep(wk)
	a.actor = wk.name
	return a
}

func (m *model) workerStep(wk *mWorker) action {
	if wk.lease == nil {
		mt := m.tasks[m.intn(len(m.tasks))]
		return action{name: wk.name + " claims " + mt.no, run: func(ctx context.Context) { m.claim(ctx, wk, mt) }}
	}
	r := m.intn(100)
	switch {
	case r < 15:
		return action{name: wk.name + " heartbeats", run: func(ctx context.Context) { m.heartbeat(ctx, wk) }}
	case r < 55:
		return action{name: wk.name + " commits a batch", run: func(ctx context.Context) { m.batch(ctx, wk) }}
	case r < 63:
		return action{name: wk.name + " hits a transient error", run: func(ctx context.Context) { m.transient(ctx, wk) }}
	case r < 67:
		return action{name: wk.name + " fails on bad input", run: func(ctx context.Context) {
			m.end(ctx, wk, "fail", func(l store.Lease) (*store.Task, error) { return m.w.st.EndFailed(ctx, l, "bad", "broken file") })
		}}
	case r < 73:
		return action{name: wk.name + " hands its task back", run: func(ctx context.Context) {
			m.end(ctx, wk, "release", func(l store.Lease) (*store.Task, error) { return m.w.st.EndInterrupted(ctx, l, "shutdown") })
		}}
	case r < 80:
		return action{name: wk.name + " crashes", run: func(ctx context.Context) { m.crash(wk) }}
	default:
		return action{name: wk.name + " stalls", run: func(context.Context) {}}
	}
}

func (m *model) claim(ctx context.Context, wk *mWorker, mt *mTask) {
	c, err := m.w.st.ClaimTask(ctx, mt.id, wk.name, modelTakeover)
	var nc *store.NotClaimableError
	var ended *store.ClaimEndedError
	switch {
	case errors.As(err, &nc):
		return
	case errors.As(err, &ended):
		m.logf("  %s: claim ended %s as %s", wk.name, mt.no, ended.Task.Status)
		m.removeTemp(mt, 0)
		if ended.Task.AlertDueAt != nil {
			m.sendAlert(ctx, mt)
		}
		return
	case err != nil:
		m.bug("claim: %v", err)
	}
	var cp struct {
		Row int `json:"row"`
	}
	json.Unmarshal(c.Task.Checkpoint, &cp) //nolint:errcheck
	m.mu.Lock()
	wk.lease, wk.task, wk.next = &c.Lease, mt, cp.Row+1
	m.mu.Unlock()
	m.logf("  %s: claimed %s attempt %d (%s), resuming at row %d", wk.name, mt.no, c.Lease.Attempt, c.Trigger, wk.next)
	if c.Trigger != "first" {
		m.removeTemp(mt, c.Lease.Attempt) // what the runtime does: earlier attempts' partial files are dead
	}
	if m.intn(2) == 0 {
		wk.temp, _ = m.w.files.CreateTemp(storage.AttemptPrefix(mt.no, c.Lease.Attempt), ".xlsx")
	}
}

func (m *model) removeTemp(mt *mTask, keep int) {
	if _, err := m.w.files.RemoveAttemptTemp(mt.no, keep); err != nil {
		m.bug("%v", err)
	}
}

// lost forgets the lease when a write turned out fenced.
func (m *model) lost(wk *mWorker, err error) bool {
	if errors.Is(err, store.ErrFenced) {
		m.logf("  %s: fenced (%v)", wk.name, err)
		m.drop(wk)
		return true
	}
	if err != nil {
		m.bug("%s: %v", wk.name, err)
	}
	return false
}

func (m *model) drop(wk *mWorker) {
	if wk.temp != nil {
		wk.temp.Close()
	}
	m.mu.Lock()
	wk.lease, wk.task, wk.temp = nil, nil, nil
	m.mu.Unlock()
}

func (m *model) heartbeat(ctx context.Context, wk *mWorker) {
	l := *wk.lease
	cancelled, err := m.w.st.Heartbeat(ctx, l)
	if m.lost(wk, err) {
		return
	}
	if cancelled {
		m.end(ctx, wk, "cancelled", func(l store.Lease) (*store.Task, error) { return m.w.st.EndCancelled(ctx, l) })
	}
}

func code(mt *mTask, row int) string { return fmt.Sprintf("%s-R%d", mt.no, row) }

func (m *model) batch(ctx context.Context, wk *mWorker) {
	mt, l := wk.task, *wk.lease
	if wk.next > mt.rows {
		m.finish(ctx, wk)
		return
	}
	last := min(wk.next+m.intn(4), mt.rows)
	var good []customers.Row
	var bad []store.Item
	for r := wk.next; r <= last; r++ {
		if mt.bad[r] {
			bad = append(bad, store.Item{TaskID: mt.id, Row: r, Field: "phone", Message: "phone: must be 11 digits", Raw: []byte(`["x"]`)})
		} else {
			good = append(good, customers.Row{Row: r, Code: code(mt, r), Name: "n", Phone: "13800138000"})
		}
	}
	cancelled, err := m.w.st.CommitBatch(ctx, l, func(ctx context.Context, tx bun.Tx) (store.Batch, error) {
		written, err := customers.Write(ctx, tx, mt.id, good, customers.Mode{})
		if err != nil {
			return store.Batch{}, err
		}
		conflicts := written.Conflicts
		if len(conflicts) > 0 {
			return store.Batch{}, fmt.Errorf("a row of this import was already written: %v", conflicts)
		}
		if err := store.InsertItems(ctx, tx, bad); err != nil {
			return store.Batch{}, err
		}
		cp, _ := json.Marshal(map[string]int{"row": last})
		n := int64(last - wk.next + 1)
		return store.Batch{Checkpoint: cp, TotalDelta: n, SuccessDelta: int64(len(good)), FailedDelta: int64(len(bad)),
			ProgressCurrent: int64(last), ProgressTotal: int64(mt.rows)}, nil
	})
	if m.lost(wk, err) {
		return
	}
	m.logf("  %s: committed rows %d-%d of %s", wk.name, wk.next, last, mt.no)
	wk.next = last + 1
	if cancelled {
		if wk.next > mt.rows {
			m.finish(ctx, wk) // the work is done: the cancel came too late
			return
		}
		m.end(ctx, wk, "cancelled", func(l store.Lease) (*store.Task, error) { return m.w.st.EndCancelled(ctx, l) })
	}
}

// finish writes the result file and records the success, or crashes in between.
func (m *model) finish(ctx context.Context, wk *mWorker) {
	mt, l := wk.task, *wk.lease
	row, err := m.w.st.GetByID(ctx, mt.id)
	if err != nil {
		m.bug("%v", err)
	}
	status, key, name := store.StatusSuccess, "file", fmt.Sprintf("%s-a%d.xlsx", mt.no, l.Attempt)
	if row.FailedCount > 0 {
		status, key, name = store.StatusPartialSuccess, "error_report", fmt.Sprintf("%s-a%d-errors.xlsx", mt.no, l.Attempt)
	}
	rel := storage.Results + "/" + name
	tmp, err := m.w.files.CreateTemp(storage.AttemptPrefix(mt.no, l.Attempt), ".xlsx")
	if err == nil {
		tmp.WriteString("result") //nolint:errcheck
		_, err = m.w.files.Commit(ctx, tmp, rel, "")
	}
	if err != nil {
		// A superseded attempt's partial files are deleted by the attempt that replaced it (or
		// by the cleanup round): its file work fails, as a zombie's database writes do. A live
		// attempt's files must never vanish.
		if row, rerr := m.w.st.GetByID(ctx, mt.id); rerr == nil && row.Status == store.StatusRunning && row.Attempt == l.Attempt {
			m.bug("%s: the live attempt %d lost its partial file: %v", wk.name, l.Attempt, err)
		}
		m.logf("  %s: a superseded attempt's file work failed (%v)", wk.name, err)
		m.drop(wk)
		return
	}
	if m.intn(6) == 0 {
		m.logf("  %s: crashed after writing %s", wk.name, rel)
		m.drop(wk)
		return
	}
	exp := time.Now().Add(time.Duration(30+m.intn(120)) * time.Second)
	result, _ := json.Marshal(map[string]any{key: rel})
	_, err = m.w.st.EndFinished(ctx, l, store.Outcome{Status: status, Result: result, ResultExpiresAt: &exp})
	if errors.Is(err, store.ErrFenced) {
		m.w.files.Delete(ctx, rel) //nolint:errcheck // the runtime discards a superseded attempt's result
	}
	if m.lost(wk, err) {
		return
	}
	m.logf("  %s: %s ended %s", wk.name, mt.no, status)
	m.ended(wk)
}

func (m *model) transient(ctx context.Context, wk *mWorker) {
	row, err := m.w.st.GetByID(ctx, wk.task.id)
	if err != nil {
		m.bug("%v", err)
	}
	if row.RetryCount < row.MaxRetry {
		m.end(ctx, wk, "retry later", func(l store.Lease) (*store.Task, error) {
			return m.w.st.EndRetryWait(ctx, l, "transient", "blip", time.Duration(m.intn(20))*time.Second)
		})
		return
	}
	mt := wk.task
	if m.end(ctx, wk, "give up", func(l store.Lease) (*store.Task, error) {
		return m.w.st.EndGaveUp(ctx, l, "retries_exhausted", "gave up")
	}) {
		m.sendAlert(ctx, mt)
	}
}

func (m *model) sendAlert(ctx context.Context, mt *mTask) {
	if got, err := m.w.st.ClaimAlert(ctx, mt.id); err != nil {
		m.bug("%v", err)
	} else if got != nil {
		m.w.alerts.TaskFailed(ctx, jobs.AlertOf(got))
	}
}

// end runs one ending of the worker's attempt and reports whether it took effect.
func (m *model) end(ctx context.Context, wk *mWorker, what string, write func(store.Lease) (*store.Task, error)) bool {
	t, err := write(*wk.lease)
	if m.lost(wk, err) {
		return false
	}
	m.logf("  %s: %s -> %s", wk.name, what, t.Status)
	m.ended(wk)
	return true
}

// ended is the runtime's tail of a terminal (or hand-back) write.
func (m *model) ended(wk *mWorker) {
	mt := wk.task
	if wk.temp != nil {
		storage.Discard(wk.temp)
		wk.temp = nil
	}
	row, err := m.w.st.GetByID(context.Background(), mt.id)
	if err == nil && row.Status.Terminal() {
		m.removeTemp(mt, 0)
	}
	m.drop(wk)
}

func (m *model) crash(wk *mWorker) {
	m.logf("  %s: crashed holding %s attempt %d", wk.name, wk.task.no, wk.lease.Attempt)
	wk.temp = nil // the partial file stays behind
	m.drop(wk)
}

// accepted reports whether a user action went through: a conflict (the task's state refuses
// the action) is an answer the API gives; any other error is a bug.
func (m *model) accepted(action string, err error) bool {
	var conflict *store.ConflictError
	if errors.As(err, &conflict) {
		return false
	}
	if err != nil {
		m.bug("%s: %v", action, err)
	}
	return true
}

func (m *model) cancel(ctx context.Context, mt *mTask) {
	res, err := m.w.st.Cancel(ctx, mt.no, store.Scope{Owner: "alice"})
	if !m.accepted("cancel", err) {
		return
	}
	m.mu.Lock()
	if mt.cancelAttempt < 0 {
		mt.cancelAttempt = res.Task.Attempt
	}
	m.mu.Unlock()
	m.logf("  cancel of %s acknowledged at attempt %d (immediate %v)", mt.no, res.Task.Attempt, res.Immediate)
}

func (m *model) retry(ctx context.Context, mt *mTask) {
	if _, err := m.w.st.Retry(ctx, mt.no, store.Scope{Owner: "alice"}); !m.accepted("retry", err) {
		return
	}
	m.mu.Lock()
	mt.generation++
	mt.cancelAttempt = -1
	mt.terminal = nil
	m.mu.Unlock()
	m.w.alerts.mu.Lock()
	delete(m.w.alerts.byTask, mt.no) // a new generation may alert again
	m.w.alerts.mu.Unlock()
	m.logf("  retry of %s accepted (generation %d)", mt.no, mt.generation)
}

// age moves every clock-like column secs into the past, as if that much time had passed
// with no actor doing anything.
func (m *model) age(ctx context.Context, secs int) {
	_, err := m.w.db.ExecContext(ctx, `UPDATE tasks SET heartbeat_at = heartbeat_at - make_interval(secs => ?),
		next_retry_at = next_retry_at - make_interval(secs => ?), enqueued_at = enqueued_at - make_interval(secs => ?),
		alert_due_at = alert_due_at - make_interval(secs => ?), result_expires_at = result_expires_at - make_interval(secs => ?)`,
		secs, secs, secs, secs, secs)
	if err != nil {
		m.bug("%v", err)
	}
}

func (m *model) round(ctx context.Context) {
	rep := m.w.cleaner.Round(ctx)
	if rep.Errors > 0 {
		m.bug("cleanup round failed: %+v", rep)
	}
	m.logf("  round: timed out %d, orphans %d, expired %d, temp %d, orphan results %d, alerts %d",
		rep.TimedOut, rep.Orphans, rep.ResultsExpired, rep.TempDeleted, rep.ResultsOrphaned, rep.FailureAlerts)
}

// check verifies every invariant against the database.
func (m *model) check(ctx context.Context, step int, final bool) {
	var running []string
	var rows []struct {
		store.Task
		Written          int          `bun:"written"`
		Rejected         int          `bun:"rejected"`
		DistinctRejected int          `bun:"distinct_rejected"`
		Open             int          `bun:"open"`
		OpenOwn          int          `bun:"open_own"`
		EventStatus      store.Status `bun:"event_status"`
		EventAttempt     int          `bun:"event_attempt"`
	}
	// One query for every task and its counts: the check runs after every step.
	err := m.w.db.NewRaw(`SELECT t.*,
		(SELECT count(*) FROM customers WHERE last_import_task_id = t.id) AS written,
		(SELECT count(*) FROM task_items WHERE task_id = t.id) AS rejected,
		(SELECT count(DISTINCT row_no) FROM task_items WHERE task_id = t.id) AS distinct_rejected,
		(SELECT count(*) FROM task_runs WHERE task_id = t.id AND finished_at IS NULL) AS open,
		(SELECT count(*) FROM task_runs WHERE task_id = t.id AND finished_at IS NULL AND attempt = t.attempt) AS open_own,
		(SELECT status FROM task_events WHERE task_id = t.id ORDER BY id DESC LIMIT 1) AS event_status,
		(SELECT attempt FROM task_events WHERE task_id = t.id ORDER BY id DESC LIMIT 1) AS event_attempt
		FROM tasks t ORDER BY t.id`).Scan(ctx, &rows)
	if err != nil {
		m.w.t.Fatal(err)
	}
	if len(rows) != len(m.tasks) {
		m.fail(step, "%d task rows, the model has %d", len(rows), len(m.tasks))
	}
	for i, mt := range m.tasks {
		row, c := &rows[i].Task, &rows[i]
		// Every committed status change has its event: the newest event shows the row as it is.
		if c.EventStatus != row.Status || c.EventAttempt != row.Attempt {
			m.fail(step, "%s is %s at attempt %d, its newest event says %s at attempt %d", mt.no, row.Status, row.Attempt, c.EventStatus, c.EventAttempt)
		}
		// retry_count never exceeds the budget.
		if row.RetryCount > row.MaxRetry {
			m.fail(step, "%s: retry_count %d > max_retry %d", mt.no, row.RetryCount, row.MaxRetry)
		}
		// Customers and rejected rows are exactly the rows up to the checkpoint, each once.
		var cp struct {
			Row int `json:"row"`
		}
		json.Unmarshal(row.Checkpoint, &cp) //nolint:errcheck
		written, rejected, distinctRejected := c.Written, c.Rejected, c.DistinctRejected
		if written+rejected != cp.Row || rejected != distinctRejected || row.TotalCount != int64(cp.Row) ||
			row.SuccessCount != int64(written) || row.FailedCount != int64(rejected) {
			m.fail(step, "%s: checkpoint row %d, customers %d, rejected rows %d (distinct %d), counts %d/%d/%d",
				mt.no, cp.Row, written, rejected, distinctRejected, row.TotalCount, row.SuccessCount, row.FailedCount)
		}
		wantRejected := 0
		for r := 1; r <= cp.Row; r++ {
			if mt.bad[r] {
				wantRejected++
			}
		}
		if rejected != wantRejected {
			m.fail(step, "%s: %d rejected rows recorded, the file has %d bad rows up to row %d", mt.no, rejected, wantRejected, cp.Row)
		}
		// At most one attempt is open, and only the row's own while it is RUNNING.
		open, openOwn := c.Open, c.OpenOwn
		if (row.Status == store.StatusRunning && (open != 1 || openOwn != 1)) || (row.Status != store.StatusRunning && open != 0) {
			m.fail(step, "%s is %s at attempt %d with %d open runs (%d of its attempt)", mt.no, row.Status, row.Attempt, open, openOwn)
		}
		// A success means every row was handled.
		if (row.Status == store.StatusSuccess || row.Status == store.StatusPartialSuccess) && cp.Row != mt.rows {
			m.fail(step, "%s ended %s after %d of %d rows", mt.no, row.Status, cp.Row, mt.rows)
		}
		// An acknowledged cancel: never claimed again, and out of RUNNING only as CANCELLED or
		// a completed success.
		if mt.cancelAttempt >= 0 {
			switch {
			case row.Attempt > mt.cancelAttempt:
				m.fail(step, "%s was claimed again (attempt %d) after its cancel was acknowledged at attempt %d", mt.no, row.Attempt, mt.cancelAttempt)
			case row.Status == store.StatusPending || row.Status == store.StatusRetryWait || row.Status == store.StatusFailed || row.Status == store.StatusTimeout:
				m.fail(step, "%s is %s after its cancel was acknowledged", mt.no, row.Status)
			}
		}
		// Terminal rows change only through the retry API.
		if row.Status.Terminal() {
			s := snap(row)
			if mt.terminal != nil && *mt.terminal != *s {
				m.fail(step, "terminal %s changed without a retry: %+v -> %+v", mt.no, *mt.terminal, *s)
			}
			mt.terminal = s
		} else if mt.terminal != nil {
			m.fail(step, "terminal %s became %s without a retry", mt.no, row.Status)
		}
		// One alert per exhausted generation; none for anything else.
		alerts := m.w.alerts.count(mt.no)
		if alerts > 1 || (alerts == 1 && row.AlertDueAt == nil) {
			m.fail(step, "%s: %d alerts (alert due: %v)", mt.no, alerts, row.AlertDueAt != nil)
		}
		if final && row.AlertDueAt != nil && alerts != 1 {
			m.fail(step, "%s ran out of retries but was alerted %d times", mt.no, alerts)
		}
		if row.Status == store.StatusRunning {
			running = append(running, fmt.Sprintf("%s-a%d", mt.no, row.Attempt))
		}
	}
	if !m.roundAlone {
		return
	}
	// After a cleanup round every file on disk belongs to a row, and every file a row points at
	// exists.
	refs := map[string]bool{}
	for _, mt := range m.tasks {
		row, _ := m.w.st.GetByID(ctx, mt.id)
		for _, f := range jobs.ResultFiles(row) {
			refs[f] = true
			if p := filepath.Join(m.w.root, filepath.FromSlash(f)); !exists(p) {
				m.fail(step, "%s points at %s, which does not exist", mt.no, f)
			}
		}
	}
	results, _ := os.ReadDir(filepath.Join(m.w.root, storage.Results))
	for _, e := range results {
		rel := storage.Results + "/" + e.Name()
		taskNo, attempt, _ := storage.ResultOwner(e.Name())
		if !refs[rel] && !slices.Contains(running, fmt.Sprintf("%s-a%d", taskNo, attempt)) {
			m.fail(step, "after a cleanup round, %s belongs to no row", rel)
		}
	}
	temps, _ := os.ReadDir(m.w.files.TempDir())
	for _, e := range temps {
		taskNo, attempt := storage.TempOwner(e.Name())
		if !slices.Contains(running, fmt.Sprintf("%s-a%d", taskNo, attempt)) {
			m.fail(step, "after a cleanup round, temp entry %s belongs to no running attempt", e.Name())
		}
	}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }
