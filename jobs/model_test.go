package jobs_test

// TestRuntimeModel is the randomized model test of the worker runtime.
//
// store's TestStateMachineModel drives the store's transitions itself, so it cannot see what
// the runtime decides: which policy a retry follows, what a delivery does with a task it may
// not claim, what is enqueued when an attempt ends, when a cancel is honoured. This test drives
// the real runtime as cmd/taskcenter/run.go wires it: three worker processes, each a
// jobs.Runtime with its own ClaimBatcher and Completer, receive deliveries through
// Runtime.ProcessTask from many goroutines at once. asynq's side is played with the jobs the
// code itself put in Redis: a delivery takes one, and its outcome goes back to Redis as
// asynq's processor would send it (done, retried after RetryDelay, archived); now and then a
// job is delivered again, or before it is due, as asynq may. Around the deliveries a seeded
// generator lets users cancel and retry at random moments (and race the two on one task), ages
// the clock, takes over attempts whose heartbeat went stale while their delivery still runs,
// cuts deliveries off as a lost asynq lease does, submits more work, and races two cleanup
// replicas on one slot through Cleaner.ProcessTask. Tasks are submitted through jobs.Submitter
// with one policy and run by runtimes configured with another (one type's runtimes more
// generous than its tasks' policy, the other's stricter), so every decision has to follow the
// policy fixed on the row.
//
// After every step the invariants in check hold on one snapshot of the database. At the end
// of a seed every delivery returns, a cleanup round runs, and every task left waiting must
// have a job asynq will deliver; then the jobs are delivered until none is left, and every
// task must have ended.
//
//	go test -race -run TestRuntimeModel ./jobs/                                  # default seeds
//	TASKCENTER_MODEL_SEEDS=300 go test -run TestRuntimeModel -timeout 1h ./jobs/  # a soak
//	TASKCENTER_MODEL_SEED=17 go test -run TestRuntimeModel -v ./jobs/             # replay one
//
// The default, 200 seeds in two shards (as make test runs it), takes about 75 s under -race on a
// loaded two-core machine.
// A failure names its seed, how to replay it, the last steps, and a file with the whole trace.
// A replay takes the same steps and gives every attempt the same handler plan; how the
// concurrent deliveries interleave is the scheduler's, so a replay reproduces a failure often,
// not always. TASKCENTER_MODEL_LOG=1 shows the runtime's own log.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/batch"
	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/cleanup"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/customers"
	"github.com/taskcenter/taskcenter/store/storetest"
)

const (
	rmTakeover    = 10 * time.Second // heartbeats older than this may be taken over (aged by the clock)
	rmTimeoutSecs = 60               // timeout_seconds: the cleanup times out attempts silent this long
	rmHeartbeat   = 40 * time.Millisecond
	rmMaxRuntime  = time.Hour // the row's max runtime: no attempt here may hit it
	rmMaxInflight = 10        // deliveries in flight at once
	// rmSettle bounds how long a delivery whose handler is not parked may take to return. It
	// is far above what one takes on a loaded machine; running out of it means one hangs.
	rmSettle = 45 * time.Second
	// rmAsynqMaxRetry is what jobs.Enqueuer gives asynq (asynq.MaxRetry).
	rmAsynqMaxRetry = 25
	rmShards        = 2
)

var (
	rmOwners = []string{"alice", "bob", "carol"}
	rmQueues = []string{"qa", "qb"}
)

func TestRuntimeModel(t *testing.T) {
	t.Parallel()
	testenv.RunModelSeeds(t, rmShards, func(t *testing.T) func(uint64) { return newRMWorld(t).runSeed })
}

// rmWorld is one shard's database, Redis and data dir, reset between seeds.
type rmWorld struct {
	t       *testing.T
	db      *bun.DB
	st      *store.Store
	replica *store.Store // the second cleanup replica's own pool, as another process has
	rdb     *redis.Client
	insp    *asynq.Inspector
	asynq   *asynq.Client // asynq's own moves of a job it delivered (retry, archive)
	enq     *jobs.Enqueuer
	files   storage.Store
	root    string
	logger  *slog.Logger
	// Cleanup slots: one new slot per raced round, in the past (a slot is the latest
	// activation at or before now).
	slotBase time.Time
	slots    int
}

func newRMWorld(t *testing.T) *rmWorld {
	pg := storetest.NewPostgres(t)
	rd := testenv.NewRedis(t)
	open := func(conns int) *bun.DB {
		db, err := store.Open(pg.URL, store.OpenOptions{MaxOpenConns: conns})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	db := open(24)
	root := t.TempDir()
	files, err := storage.New(context.Background(), storage.Config{}, root)
	if err != nil {
		t.Fatal(err)
	}
	// Production enqueues through the script pipeliner (cmd/taskcenter/run.go).
	scripts := jobs.NewScriptPipeliner(rd.Client)
	t.Cleanup(scripts.Stop)
	insp := asynq.NewInspectorFromRedisClient(rd.Client)
	logger := slog.New(slog.DiscardHandler)
	if os.Getenv("TASKCENTER_MODEL_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return &rmWorld{t: t, db: db, st: store.New(db), replica: store.New(open(4)), rdb: rd.Client, insp: insp,
		asynq: asynq.NewClientFromRedisClient(rd.Client), enq: jobs.NewEnqueuer(asynq.NewClientFromRedisClient(scripts), insp, nil),
		files: files, root: root, logger: logger, slotBase: time.Now().Add(-time.Hour).Truncate(time.Minute)}
}

func (w *rmWorld) reset() {
	ctx := context.Background()
	// DELETE, not TRUNCATE: a TRUNCATE gives every table and index new files, 160–200 ms a
	// seed in a loaded suite (pg_stat_statements, 2026-12-03, host vm), where the model's few
	// rows go in milliseconds. The tables holding task rows follow by ON DELETE CASCADE.
	if _, err := w.db.ExecContext(ctx, "DELETE FROM tasks; DELETE FROM customers; DELETE FROM cleanup_rounds"); err != nil {
		w.t.Fatal(err)
	}
	if err := w.rdb.FlushDB(ctx).Err(); err != nil {
		w.t.Fatal(err)
	}
	// The asynq clients remember which queues they listed in asynq's queue set, which the
	// flush emptied; the inspector sees only listed queues. Worker processes list their lanes
	// (jobs.Workers keeps them listed), so do that here.
	var lanes []any
	for _, q := range rmQueues {
		for _, lane := range jobs.Lanes(q) {
			lanes = append(lanes, lane)
		}
	}
	if err := w.rdb.SAdd(ctx, "asynq:queues", lanes...).Err(); err != nil {
		w.t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(w.root, storage.Results), w.files.TempDir()} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// rmType is a task type with the policy its tasks are submitted with and the different one
// the runtimes are configured with.
type rmType struct {
	name, queue string
	submit      jobs.SubmitPolicy
	run         jobs.TypePolicy
}

// rmTask is the model's knowledge of one task.
type rmTask struct {
	idx   int
	id    int64
	no    string
	typ   *rmType
	owner string
	rows  int
	bad   map[int]bool
	// retries counts the manual retries the API accepted (each is one task.retried event).
	retries int
	// What the last check saw.
	terminal        *rmSnap // the row when it was terminal
	terminalRetries int     // retries when terminal was taken
	seen            rmCounts
}

// rmSnap is what must not change on a terminal row except through the retry API.
type rmSnap struct {
	status                 store.Status
	attempt, retryCount    int
	total, success, failed int64
	checkpoint, errorCode  string
	result                 string
}

// rmCounts is a task's counts as one attempt left them.
type rmCounts struct {
	attempt                          int
	total, success, failed, progress int64
}

// rmRuntime is one worker process.
type rmRuntime struct {
	name string
	// frozen: its heartbeat never lands (a process cut off from Postgres between batches, or
	// stopped by the OS), so its attempts go stale as soon as the clock moves.
	frozen bool
	rt     *jobs.Runtime
	claims *jobs.ClaimBatcher
	ends   *jobs.Completer
	board  *jobs.ProgressBoard
}

// rmJob is one asynq job.
type rmJob struct {
	lane, id, typ string
	payload       []byte
	taskID        int64
	attempt       int
	state         asynq.TaskState
	// copy: a test-made second delivery of a job (asynq delivers at least once); once it
	// returns it is gone, so the runtime never relies on it for liveness.
	copy bool
}

// rmDelivery is one call of Runtime.ProcessTask.
type rmDelivery struct {
	n         int
	job       rmJob
	r         *rmRuntime
	cancel    context.CancelFunc
	done      chan struct{}
	leaseLost atomic.Bool // asynq withdrew it (its ctx was cancelled)
	parked    atomic.Bool // its handler waits for a cancel, a takeover or the end of the seed

	mu     sync.Mutex
	lease  store.Lease // the attempt its handler runs, once there is one
	handed bool
}

func (d *rmDelivery) setLease(l store.Lease) {
	d.mu.Lock()
	d.lease, d.handed = l, true
	d.mu.Unlock()
}

func (d *rmDelivery) attempt() (store.Lease, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lease, d.handed
}

type rmDeliveryKey struct{}

// rmModel is one seed's run.
type rmModel struct {
	w       *rmWorld
	t       *testing.T
	seed    uint64
	rng     *rand.Rand // the steps' generator: the main goroutine's only
	ctx     context.Context
	at      int  // the step being run
	ending  bool // the steps are over: finish runs
	started time.Time

	types    []*rmType
	rts      []*rmRuntime
	sub      *jobs.Submitter
	creator  *jobs.Creator
	cleaners [2]*cleanup.Cleaner
	slot     *rmSlot
	rounds   *rmRounds
	alerts   *rmAlerts

	release     chan struct{} // closed at the end of a seed: parked handlers finish
	releaseOnce sync.Once
	final       atomic.Bool // handlers no longer park
	deliveries  sync.WaitGroup

	mu       sync.Mutex // guards what follows
	tasks    []*rmTask
	byID     map[int64]*rmTask
	live     map[int]*rmDelivery
	nextDel  int
	invoked  map[store.Lease]int
	failures map[string]int // asynq's failure count per job id
	trace    []string
	bugs     []string
}

func (w *rmWorld) runSeed(seed uint64) {
	w.reset()
	m := &rmModel{w: w, t: w.t, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d)), ctx: context.Background(),
		release: make(chan struct{}), byID: map[int64]*rmTask{}, live: map[int]*rmDelivery{}, invoked: map[store.Lease]int{},
		failures: map[string]int{}, started: time.Now()}
	defer m.teardown()
	m.setup()
	m.submit(3 + m.rng.IntN(4))
	steps := 40 + m.rng.IntN(30)
	for step := range steps {
		m.at = step
		m.step(step)
		m.check(step, false)
	}
	m.finish(steps)
}

// setup builds the seed's policies, worker processes, submitter and cleanup replicas.
func (m *rmModel) setup() {
	// One type's runtimes allow more retries than its tasks were submitted with, the other's
	// fewer; the retry base differs by a factor of four or more either way, so a delay from
	// the wrong base falls outside the row's range. Both configure a stall check and a max
	// runtime that the rows do not have.
	generous := m.rng.IntN(2)
	for i, name := range []string{"model:a", "model:b"} {
		rowRetry := 1 + m.rng.IntN(3)
		cfgRetry := m.rng.IntN(rowRetry)
		if i == generous {
			cfgRetry = rowRetry + 1 + m.rng.IntN(3)
		}
		rowBase := time.Duration(3+m.rng.IntN(8)) * time.Millisecond
		cfgBase := time.Duration(50+m.rng.IntN(150)) * time.Millisecond
		if m.rng.IntN(2) == 0 {
			rowBase, cfgBase = time.Duration(40+m.rng.IntN(40))*time.Millisecond, time.Duration(2+m.rng.IntN(8))*time.Millisecond
		}
		queue := rmQueues[i]
		m.types = append(m.types, &rmType{name: name, queue: queue,
			submit: jobs.SubmitPolicy{Queue: queue, MaxRetry: rowRetry, TimeoutSeconds: rmTimeoutSecs, RetryBase: rowBase, MaxRuntime: rmMaxRuntime},
			run: jobs.TypePolicy{MaxRetry: cfgRetry, RetryBase: cfgBase, MaxRuntime: time.Duration(300+m.rng.IntN(500)) * time.Millisecond,
				StallAfter: time.Duration(150+m.rng.IntN(150)) * time.Millisecond}})
		m.logf("%s: submitted with max_retry %d, retry_base %s; runtimes configured with max_retry %d, retry_base %s",
			name, rowRetry, rowBase, cfgRetry, cfgBase)
	}
	policies, submit := map[string]jobs.TypePolicy{}, map[string]jobs.SubmitPolicy{}
	for _, ty := range m.types {
		policies[ty.name], submit[ty.name] = ty.run, ty.submit
	}
	m.alerts = &rmAlerts{m: m, sent: map[string]int{}}
	for _, spec := range []struct {
		name   string
		frozen bool
	}{{"w1", false}, {"w2", false}, {"wz", true}} {
		hb := rmHeartbeat
		if spec.frozen {
			hb = time.Hour
		}
		// Grouped claims and endings, as a worker with worker.batch_max > 1 runs.
		cfg := batch.Config{MaxBatch: 16, MaxWait: time.Millisecond}
		r := &rmRuntime{name: spec.name, frozen: spec.frozen, board: jobs.NewProgressBoard(m.w.rdb),
			claims: jobs.NewClaimBatcher(m.w.st, spec.name, rmTakeover, cfg), ends: jobs.NewCompleter(m.w.st, cfg, m.w.logger)}
		r.rt = jobs.NewRuntime(jobs.RuntimeConfig{WorkerID: spec.name, HeartbeatInterval: hb, TakeoverAfter: rmTakeover,
			ProgressInterval: 10 * time.Millisecond, AbandonAfter: 500 * time.Millisecond, Types: policies},
			jobs.RuntimeDeps{Store: m.w.st, Enqueuer: m.w.enq, Board: r.board, Files: m.w.files, Alerter: m.alerts,
				Logger: m.w.logger.With("worker", spec.name), Claims: r.claims, Completer: r.ends})
		for _, ty := range m.types {
			r.rt.Register(&rmHandler{typ: ty.name, m: m, r: r})
		}
		m.rts = append(m.rts, r)
	}
	m.creator = jobs.NewCreator(m.w.st, batch.Config{MaxBatch: 16}, m.w.logger)
	m.sub = jobs.NewSubmitter(m.w.st, m.w.enq, submit, nil, nil, m.w.logger, nil).WithCreator(m.creator)
	m.slot, m.rounds = &rmSlot{}, &rmRounds{}
	for i, st := range []*store.Store{m.w.st, m.w.replica} {
		m.cleaners[i] = cleanup.New(cleanup.Config{Schedule: m.slot, Location: time.UTC, OrphanGrace: 5 * time.Second,
			TakeoverAfter: rmTakeover, BatchSize: 100, UploadTTL: time.Hour, TempTTL: time.Hour, Retention: 1000 * time.Hour},
			fmt.Sprintf("replica-%d", i), cleanup.Deps{Store: st, Enqueuer: m.w.enq, Files: m.w.files, Observer: m.rounds,
				TaskAlerter: m.alerts, Logger: m.w.logger})
	}
}

// teardown ends the seed's goroutines and processes, also after a failure.
func (m *rmModel) teardown() {
	m.final.Store(true)
	m.releaseOnce.Do(func() { close(m.release) })
	m.mu.Lock()
	for _, d := range m.live {
		d.cancel()
	}
	m.mu.Unlock()
	if !jobs.ModelWithin(rmSettle, m.deliveries.Wait) {
		m.t.Errorf("seed %d: deliveries still running at the end of the seed: %s", m.seed, m.describeLive())
		return // leave them; closing what they use would only add noise
	}
	for _, r := range m.rts {
		r.rt.Wait(10 * time.Second)
		r.rt.Close()
		r.claims.Close()
		r.ends.Close()
		r.board.Close()
	}
	if m.creator != nil {
		m.creator.Close()
	}
}

// step picks and runs one action.
func (m *rmModel) step(step int) {
	r := m.rng.IntN(100)
	switch {
	case r < 30:
		m.logf("step %d: deliver a job", step)
		m.deliverJob()
	case r < 36:
		m.logf("step %d: asynq delivers a task again", step)
		m.redeliver()
	case r < 43:
		m.logf("step %d: a running attempt goes silent and is taken over", step)
		m.takeover()
	case r < 51:
		mt := m.pickTask()
		m.logf("step %d: cancel %s", step, mt.no)
		m.cancel(mt, m.rng.IntN(3) == 0)
	case r < 58:
		mt := m.pickTask()
		m.logf("step %d: retry %s", step, mt.no)
		m.retry(mt, m.rng.IntN(3) == 0)
	case r < 63:
		mt := m.pickTask()
		m.logf("step %d: cancel and retry %s at once", step, mt.no)
		m.cancelRacingRetry(mt)
	case r < 71:
		secs := 1 + m.rng.IntN(30)
		if m.rng.IntN(5) == 0 {
			secs = rmTimeoutSecs + 1 + m.rng.IntN(30) // past timeout_seconds: the cleanup times out silent attempts
		}
		m.logf("step %d: clock +%ds", step, secs)
		m.age(secs)
	case r < 77:
		m.logf("step %d: two cleanup replicas race for a slot", step)
		m.cleanupRace()
	case r < 80:
		m.logf("step %d: asynq loses a delivery's lease", step)
		m.leaseLost()
	case r < 83:
		n := 1 + m.rng.IntN(3)
		m.logf("step %d: submit %d", step, n)
		m.submit(n)
	default:
		m.logf("step %d: wait for the deliveries to settle", step)
		m.settle()
	}
	m.failOnBugs(step)
}

func (m *rmModel) pickTask() *rmTask {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tasks[m.rng.IntN(len(m.tasks))]
}

// pickRuntime picks a worker process: the frozen one less often.
func (m *rmModel) pickRuntime() *rmRuntime {
	if m.rng.IntN(5) == 0 {
		return m.rts[2]
	}
	return m.rts[m.rng.IntN(2)]
}

// rmParams are a task's parameters: its "file" of rows and which rows are bad.
type rmParams struct {
	Idx  int   `json:"idx"`
	Rows int   `json:"rows"`
	Bad  []int `json:"bad"`
}

// submit creates n tasks through the Submitter, as the API does.
func (m *rmModel) submit(n int) {
	m.mu.Lock()
	base := len(m.tasks)
	m.mu.Unlock()
	subs := make([]jobs.Submission, n)
	params := make([]rmParams, n)
	for i := range subs {
		p := rmParams{Idx: base + i, Rows: 1 + m.rng.IntN(8)}
		for r := 1; r <= p.Rows; r++ {
			if m.rng.IntN(5) == 0 {
				p.Bad = append(p.Bad, r)
			}
		}
		body, _ := json.Marshal(p)
		priority := 0
		if m.rng.IntN(2) == 0 {
			priority = 1 + m.rng.IntN(9) // high, normal and low lanes
		}
		params[i] = p
		subs[i] = jobs.Submission{Type: m.types[m.rng.IntN(len(m.types))].name, Owner: rmOwners[m.rng.IntN(len(rmOwners))],
			Params: body, Priority: priority}
	}
	var tasks []*store.Task
	if n == 1 && m.rng.IntN(2) == 0 {
		t, _, err := m.sub.Submit(m.ctx, subs[0]) // through the Creator, grouped with concurrent submits
		if err != nil {
			m.bugf("submit: %v", err)
			return
		}
		tasks = append(tasks, t)
	} else {
		res, err := m.sub.SubmitMany(m.ctx, subs)
		if err != nil {
			m.bugf("submit: %v", err)
			return
		}
		for _, r := range res {
			if r.Err != nil {
				m.bugf("submit: %v", r.Err)
				return
			}
			tasks = append(tasks, r.Task)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, t := range tasks {
		var ty *rmType
		for _, c := range m.types {
			if c.name == t.Type {
				ty = c
			}
		}
		mt := &rmTask{idx: params[i].Idx, id: t.ID, no: t.TaskNo, typ: ty, owner: t.Owner, rows: params[i].Rows, bad: map[int]bool{}}
		for _, r := range params[i].Bad {
			mt.bad[r] = true
		}
		m.tasks = append(m.tasks, mt)
		m.byID[t.ID] = mt
		m.trace = append(m.trace, fmt.Sprintf("  submitted %s (%s, %s, %d rows, bad %v)", mt.no, t.Type, t.Owner, mt.rows, params[i].Bad))
	}
}

// --- asynq's side -------------------------------------------------------------------------

// listJobs lists the jobs waiting in every lane: pending, scheduled and retrying.
func (m *rmModel) listJobs() []rmJob {
	var out []rmJob
	for _, ty := range m.types {
		for _, lane := range jobs.Lanes(ty.queue) {
			for _, list := range []func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error){
				m.w.insp.ListPendingTasks, m.w.insp.ListScheduledTasks, m.w.insp.ListRetryTasks,
			} {
				infos, err := list(lane, asynq.PageSize(1000))
				if errors.Is(err, asynq.ErrQueueNotFound) {
					continue
				}
				if err != nil {
					m.bugf("list jobs of %s: %v", lane, err)
					return nil
				}
				for _, in := range infos {
					id, attempt, ok := jobs.ModelJobTask(in.Payload)
					if !ok {
						m.bugf("job %s in %s has an unreadable body %q", in.ID, lane, in.Payload)
						continue
					}
					out = append(out, rmJob{lane: lane, id: in.ID, typ: in.Type, payload: in.Payload, taskID: id, attempt: attempt, state: in.State})
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].lane+"/"+out[i].id < out[j].lane+"/"+out[j].id })
	return out
}

// take removes a job from Redis for delivery: asynq's dequeue. While it is delivered its id is
// free (asynq would hold it as active); an enqueue of the same id meanwhile makes a new job,
// as it makes an "-again-" job in production, so either way a delivery follows the change.
func (m *rmModel) take(j rmJob) bool {
	if err := m.w.insp.DeleteTask(j.lane, j.id); err != nil {
		m.logf("  job %s is gone (%v)", j.id, err)
		return false
	}
	return true
}

// dispatch delivers a job to a worker process in a goroutine of its own.
func (m *rmModel) dispatch(j rmJob, r *rmRuntime) *rmDelivery {
	d := &rmDelivery{job: j, r: r, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.WithValue(m.ctx, rmDeliveryKey{}, d))
	d.cancel = cancel
	m.mu.Lock()
	m.nextDel++
	d.n = m.nextDel
	m.live[d.n] = d
	m.trace = append(m.trace, fmt.Sprintf("  delivery %d: job %s (task %d, attempt %d, %s) to %s", d.n, j.id, j.taskID, j.attempt, j.lane, r.name))
	m.mu.Unlock()
	m.deliveries.Add(1)
	go func() {
		defer m.deliveries.Done()
		defer close(d.done)
		defer cancel()
		err := r.rt.ProcessTask(ctx, asynq.NewTask(j.typ, j.payload))
		m.settleJob(d, err)
		m.mu.Lock()
		delete(m.live, d.n)
		m.trace = append(m.trace, fmt.Sprintf("  delivery %d returned: %v", d.n, err))
		m.mu.Unlock()
	}()
	return d
}

// settleJob does with the job what asynq's processor does with a handler's answer.
func (m *rmModel) settleJob(d *rmDelivery, err error) {
	j := d.job
	if j.copy || d.leaseLost.Load() {
		return // a copy is gone once delivered; a withdrawn job was handed back already
	}
	switch {
	case err == nil:
		// done: asynq deletes it
	case errors.Is(err, asynq.SkipRetry):
		m.archive(j)
	default:
		m.mu.Lock()
		n := m.failures[j.id]
		if n >= rmAsynqMaxRetry {
			m.mu.Unlock()
			m.archive(j)
			return
		}
		if jobs.IsFailure(err) {
			m.failures[j.id]++
		}
		m.mu.Unlock()
		m.requeue(j, jobs.RetryDelay(n, err, asynq.NewTask(j.typ, j.payload)))
	}
}

// requeue puts a delivered job back, due after delay. If its id was enqueued anew while it
// was out, that job stands for it.
func (m *rmModel) requeue(j rmJob, delay time.Duration) {
	_, err := m.w.asynq.Enqueue(asynq.NewTask(j.typ, j.payload), asynq.TaskID(j.id), asynq.Queue(j.lane),
		asynq.MaxRetry(rmAsynqMaxRetry), asynq.ProcessIn(delay))
	if err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		m.bugf("requeue job %s: %v", j.id, err)
	}
}

// archive keeps a job asynq gave up on: it holds its id and never runs again.
func (m *rmModel) archive(j rmJob) {
	_, err := m.w.asynq.Enqueue(asynq.NewTask(j.typ, j.payload), asynq.TaskID(j.id), asynq.Queue(j.lane), asynq.MaxRetry(rmAsynqMaxRetry))
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return
	}
	if err != nil {
		m.bugf("archive job %s: %v", j.id, err)
		return
	}
	if err := m.w.insp.ArchiveTask(j.lane, j.id); err != nil && !errors.Is(err, asynq.ErrTaskNotFound) {
		m.bugf("archive job %s: %v", j.id, err)
	}
}

func (m *rmModel) inflight() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.live)
}

// deliverJob delivers one waiting job: a pending one mostly, sometimes a scheduled or
// retrying one before it is due.
func (m *rmModel) deliverJob() {
	if m.inflight() >= rmMaxInflight {
		m.settle()
		return
	}
	all := m.listJobs()
	if len(all) == 0 {
		m.logf("  no job waits")
		return
	}
	var pending []rmJob
	for _, j := range all {
		if j.state == asynq.TaskStatePending {
			pending = append(pending, j)
		}
	}
	j := all[m.rng.IntN(len(all))]
	if len(pending) > 0 && m.rng.IntN(4) > 0 {
		j = pending[m.rng.IntN(len(pending))]
	}
	if m.take(j) {
		m.dispatch(j, m.pickRuntime())
	}
}

// redeliver delivers a task again outside the jobs asynq holds, under its current attempt
// number or the one before (a job asynq delivers twice).
func (m *rmModel) redeliver() {
	if m.inflight() >= rmMaxInflight {
		m.settle()
		return
	}
	mt := m.pickTask()
	row := m.row(mt.id)
	attempt := row.Attempt
	if attempt > 0 && m.rng.IntN(2) == 0 {
		attempt--
	}
	m.dispatch(m.copyJob(row, attempt), m.pickRuntime())
}

func (m *rmModel) copyJob(row *store.Task, attempt int) rmJob {
	m.mu.Lock()
	id := fmt.Sprintf("copy-%d", m.nextDel+1)
	m.mu.Unlock()
	return rmJob{lane: jobs.Lane(row), id: id, typ: row.Type, payload: jobs.ModelPayload(row, attempt), taskID: row.ID, attempt: attempt, copy: true}
}

// takeover makes a parked attempt's heartbeat stale and delivers its task at once to another
// worker process, while the parked delivery still runs: the silent-worker takeover the
// cleanup round hands to asynq, without waiting for the round.
func (m *rmModel) takeover() {
	var parked []*rmDelivery
	m.mu.Lock()
	for _, d := range m.live {
		if _, ok := d.attempt(); ok && d.parked.Load() {
			parked = append(parked, d)
		}
	}
	m.mu.Unlock()
	if len(parked) == 0 {
		m.logf("  no attempt is parked")
		m.redeliver()
		return
	}
	sort.Slice(parked, func(i, j int) bool { return parked[i].n < parked[j].n })
	d := parked[m.rng.IntN(len(parked))]
	l, _ := d.attempt()
	var others []*rmRuntime
	for _, r := range m.rts {
		if r != d.r {
			others = append(others, r)
		}
	}
	_, err := m.w.db.ExecContext(m.ctx, `UPDATE tasks SET heartbeat_at = now() - make_interval(secs => ?)
		WHERE id = ? AND attempt = ? AND status = 'RUNNING'`, (rmTakeover + time.Second).Seconds(), l.TaskID, l.Attempt)
	if err != nil {
		m.bugf("age heartbeat: %v", err)
		return
	}
	m.logf("  %s (delivery %d on %s) went silent", l, d.n, d.r.name)
	m.dispatch(m.copyJob(m.row(l.TaskID), l.Attempt), others[m.rng.IntN(len(others))])
}

// leaseLost cancels a delivery's context, as asynq does when it loses the job's lease; its
// recoverer hands the job back at once, while the handler may still be ending.
func (m *rmModel) leaseLost() {
	var live []*rmDelivery
	m.mu.Lock()
	for _, d := range m.live {
		live = append(live, d)
	}
	m.mu.Unlock()
	if len(live) == 0 {
		return
	}
	sort.Slice(live, func(i, j int) bool { return live[i].n < live[j].n })
	d := live[m.rng.IntN(len(live))]
	m.logf("  delivery %d loses its lease", d.n)
	d.leaseLost.Store(true)
	d.cancel()
	if !d.job.copy {
		m.requeue(d.job, 5*time.Second)
	}
}

// settle waits until every delivery has returned or parked.
func (m *rmModel) settle() {
	deadline := time.Now().Add(rmSettle)
	for {
		busy := 0
		m.mu.Lock()
		for _, d := range m.live {
			if !d.parked.Load() {
				busy++
			}
		}
		m.mu.Unlock()
		if busy == 0 {
			return
		}
		if time.Now().After(deadline) {
			m.fail(-1, "deliveries neither returned nor parked within %s: %s", rmSettle, m.describeLive())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitAll waits until every delivery has returned.
func (m *rmModel) waitAll(step int) {
	if !jobs.ModelWithin(rmSettle, m.deliveries.Wait) {
		m.fail(step, "deliveries did not return within %s after every parked handler was released: %s", rmSettle, m.describeLive())
	}
}

func (m *rmModel) describeLive() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, d := range m.live {
		l, _ := d.attempt()
		out = append(out, fmt.Sprintf("delivery %d (job %s on %s, attempt %s, parked %v, lease lost %v)", d.n, d.job.id, d.r.name, l,
			d.parked.Load(), d.leaseLost.Load()))
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// --- users, clock and cleanup -------------------------------------------------------------

// cancel is the cancel API (httpapi's cancelTask): the store's cancel, then the waiting job
// is withdrawn. An operator cancels through CancelBy with the admin scope.
func (m *rmModel) cancel(mt *rmTask, operator bool) {
	var (
		res *store.CancelResult
		err error
	)
	if operator {
		res, err = m.w.st.CancelBy(m.ctx, mt.no, store.Scope{Admin: true}, "operator")
	} else {
		res, err = m.w.st.Cancel(m.ctx, mt.no, store.Scope{Owner: mt.owner})
	}
	if !m.accepted("cancel", mt, err) {
		return
	}
	m.logf("  cancel of %s acknowledged at attempt %d (immediate %v)", mt.no, res.Task.Attempt, res.Immediate)
	if res.Immediate {
		if err := m.sub.Withdraw(context.Background(), res.Task, res.PrevAttempt); err != nil {
			m.logf("  withdraw %s: %v", mt.no, err)
		}
	}
}

// retry is the retry API (httpapi's retryTask): the store's retry, then the task is enqueued.
func (m *rmModel) retry(mt *rmTask, admin bool) {
	scope := store.Scope{Owner: mt.owner}
	if admin {
		scope = store.Scope{Admin: true}
	}
	t, err := m.w.st.Retry(m.ctx, mt.no, scope)
	if !m.accepted("retry", mt, err) {
		return
	}
	m.mu.Lock()
	mt.retries++
	m.mu.Unlock()
	m.logf("  retry of %s accepted at attempt %d", mt.no, t.Attempt)
	m.sub.Enqueue(m.ctx, t)
}

// accepted reports whether the store took a user's action on mt. A conflict (the task's
// state refuses the action) is logged, as the API would answer it; any other error is a bug.
func (m *rmModel) accepted(action string, mt *rmTask, err error) bool {
	var conflict *store.ConflictError
	if errors.As(err, &conflict) {
		m.logf("  %s of %s refused: %s", action, mt.no, conflict.Status)
		return false
	}
	if err != nil {
		m.bugf("%s %s: %v", action, mt.no, err)
		return false
	}
	return true
}

// cancelRacingRetry runs a cancel and a retry of one task at the same moment.
func (m *rmModel) cancelRacingRetry(mt *rmTask) {
	operator, admin := m.rng.IntN(3) == 0, m.rng.IntN(3) == 0
	start := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		<-start
		m.cancel(mt, operator)
	})
	wg.Go(func() {
		<-start
		m.retry(mt, admin)
	})
	close(start)
	wg.Wait()
}

// age moves every clock-like column secs into the past, as if that much time had passed. A
// run's end moves with its task's next_retry_at, so the back-off stays readable from the two.
// The task rows are locked first: every transition locks its task row before it touches the
// task's run, so each one is wholly before the clock moves or wholly after.
func (m *rmModel) age(secs int) {
	for try := 0; ; try++ {
		err := m.w.db.RunInTx(m.ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			if _, err := tx.ExecContext(ctx, `SELECT 1 FROM tasks ORDER BY id FOR UPDATE`); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE tasks SET heartbeat_at = heartbeat_at - make_interval(secs => ?),
				next_retry_at = next_retry_at - make_interval(secs => ?), enqueued_at = enqueued_at - make_interval(secs => ?),
				alert_due_at = alert_due_at - make_interval(secs => ?)`, secs, secs, secs, secs); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `UPDATE task_runs SET started_at = started_at - make_interval(secs => ?),
				finished_at = finished_at - make_interval(secs => ?)`, secs, secs)
			return err
		})
		// The heartbeat statement locks its rows in no set order: a deadlock with it is
		// possible, and Postgres breaks it by failing one of the two.
		if err != nil && try < 5 && strings.Contains(err.Error(), "deadlock") {
			continue
		}
		if err != nil {
			m.bugf("age: %v", err)
		}
		return
	}
}

// cleanupRace delivers one new slot's cleanup job to both replicas at once: exactly one of
// them may run the round.
func (m *rmModel) cleanupRace() {
	m.w.slots++
	at := m.w.slotBase.Add(time.Duration(m.w.slots%3000) * time.Second)
	m.slot.set(at)
	before := m.rounds.Len()
	start := make(chan struct{})
	errs := make([]error, len(m.cleaners))
	var wg sync.WaitGroup
	for i, c := range m.cleaners {
		wg.Go(func() {
			<-start
			errs[i] = c.ProcessTask(m.ctx, asynq.NewTask(cleanup.Type, nil))
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			m.bugf("cleanup replica %d: %v", i, err)
		}
	}
	ran := m.rounds.Since(before)
	if len(ran) != 1 {
		m.bugf("slot %s: the cleanup round ran %d times, want once", at.Format(time.TimeOnly), len(ran))
		return
	}
	rep := ran[0]
	if rep.Errors > 0 {
		m.bugf("cleanup round: %d steps failed: %+v", rep.Errors, rep)
	}
	m.logf("  round: takeovers %d, orphans %d, timed out %d, alerts %d", rep.Takeovers, rep.Orphans, rep.TimedOut, rep.FailureAlerts)
}

// rmSlot is a schedule whose only activation is the time last set, so each raced round has a
// slot of its own (as cleanup's guard test does).
type rmSlot struct{ at atomic.Pointer[time.Time] }

func (s *rmSlot) set(at time.Time) { s.at.Store(&at) }

func (s *rmSlot) Next(t time.Time) time.Time {
	if at := s.at.Load(); at != nil && t.Before(*at) {
		return *at
	}
	return time.Time{}
}

// rmRounds keeps every round's report.
type rmRounds struct {
	testenv.Collector[cleanup.Report]
}

func (r *rmRounds) CleanupRound(rep cleanup.Report) { r.Add(rep) }

// rmAlerts counts failure alerts per task and attempt: one generation's alert names the
// attempt that failed, and a manual retry's generation fails at a later one.
type rmAlerts struct {
	m    *rmModel
	mu   sync.Mutex
	sent map[string]int
}

func (a *rmAlerts) TaskFailed(_ context.Context, al jobs.Alert) {
	key := fmt.Sprintf("%s#%d", al.TaskNo, al.Attempts)
	a.mu.Lock()
	a.sent[key]++
	n := a.sent[key]
	a.mu.Unlock()
	if n > 1 {
		a.m.bugf("task %s was alerted %d times for its failure at attempt %d", al.TaskNo, n, al.Attempts)
	}
}

func (a *rmAlerts) count(taskNo string, attempt int) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sent[fmt.Sprintf("%s#%d", taskNo, attempt)]
}

// --- the handler ----------------------------------------------------------------------------

type rmHandler struct {
	typ string
	m   *rmModel
	r   *rmRuntime
}

func (h *rmHandler) Type() string { return h.typ }

// What an attempt does.
const (
	rmSucceed   = iota // commits every row left, then succeeds
	rmTransient        // commits a batch or two, then fails transiently
	rmBadInput         // commits a batch or two, then finds its input bad
	rmPanic            // commits a batch or two, then panics
	rmBlock            // commits a batch or two, then waits for a cancel, a takeover or the end
	rmCrash            // commits a batch or two, then stops reporting until it is taken over
)

var rmModeNames = []string{"succeed", "fail transiently", "find bad input", "panic", "block until cancelled", "crash"}

type rmPlan struct {
	mode     int
	batches  int  // batches before the outcome (all of them for rmSucceed)
	size     int  // rows per batch
	progress bool // reports progress between batches
	file     bool // a success stores a result file
}

// plan is what attempt of the task with index idx does: a function of the seed, the task and
// the attempt only, so a replay gives every attempt the same plan whatever the interleaving.
func (m *rmModel) plan(idx, attempt int) rmPlan {
	r := rand.New(rand.NewPCG(m.seed^0x9e3779b97f4a7c15, uint64(idx)<<32|uint64(attempt)))
	p := rmPlan{batches: r.IntN(3), size: 1 + r.IntN(4), progress: r.IntN(3) == 0, file: r.IntN(2) == 0}
	switch x := r.IntN(100); {
	case x < 30:
		p.mode = rmSucceed
	case x < 55:
		p.mode = rmTransient
	case x < 62:
		p.mode = rmBadInput
	case x < 65:
		p.mode = rmPanic
	case x < 83:
		p.mode = rmBlock
	default:
		p.mode = rmCrash
	}
	if m.final.Load() && (p.mode == rmBlock || p.mode == rmCrash) {
		p.mode = rmSucceed
	}
	return p
}

func (h *rmHandler) Run(ctx context.Context, run *jobs.Run) (jobs.Result, error) {
	m := h.m
	d, _ := ctx.Value(rmDeliveryKey{}).(*rmDelivery)
	if d == nil {
		m.bugf("%s ran without its delivery's context", run.Lease)
		return jobs.Result{}, errors.New("no delivery")
	}
	var p rmParams
	if err := run.Params(&p); err != nil {
		m.bugf("%s: params: %v", run.Lease, err)
		return jobs.Result{}, err
	}
	d.setLease(run.Lease)
	plan := m.plan(p.Idx, run.Lease.Attempt)
	m.mu.Lock()
	m.invoked[run.Lease]++
	twice := m.invoked[run.Lease] > 1
	m.trace = append(m.trace, fmt.Sprintf("  %s runs on %s (%s, delivery %d): %s", run.Lease, h.r.name, run.Trigger, d.n, rmModeNames[plan.mode]))
	m.mu.Unlock()
	if twice {
		m.bugf("attempt %s ran twice", run.Lease)
	}
	w := &rmWork{m: m, run: run, p: p, plan: plan, bad: map[int]bool{}, next: rmCheckpoint(run.Task.Checkpoint) + 1}
	for _, r := range p.Bad {
		w.bad[r] = true
	}
	if plan.mode == rmSucceed {
		if err := w.commitAll(ctx); err != nil {
			return jobs.Result{}, err
		}
		return w.result(ctx, plan.file)
	}
	for range plan.batches {
		if err := w.commit(ctx); err != nil {
			return jobs.Result{}, err
		}
	}
	switch plan.mode {
	case rmTransient:
		return jobs.Result{}, errors.New("model: a dependency is flaky")
	case rmBadInput:
		return jobs.Result{}, jobs.BadInput("model_bad", "the model's input is broken")
	case rmPanic:
		panic("model: the handler panics")
	case rmBlock:
		return w.block(ctx, d)
	default:
		return w.crash(ctx, d)
	}
}

// rmWork is one attempt's work through the task's rows.
type rmWork struct {
	m    *rmModel
	run  *jobs.Run
	p    rmParams
	plan rmPlan
	bad  map[int]bool
	next int // the next row to write
}

func rmCheckpoint(cp json.RawMessage) int {
	var c struct {
		Row int `json:"row"`
	}
	json.Unmarshal(cp, &c) //nolint:errcheck // no checkpoint: row 0
	return c.Row
}

// commit writes the next batch of rows (customers for good rows, failed items for bad ones)
// with its checkpoint, through run.CommitBatch. Any error ends the attempt.
func (w *rmWork) commit(ctx context.Context) error {
	if w.next > w.p.Rows {
		return nil
	}
	first, last := w.next, min(w.next+w.plan.size-1, w.p.Rows)
	var (
		good []customers.Row
		bad  []store.Item
	)
	no := w.run.Task.TaskNo
	for r := first; r <= last; r++ {
		if w.bad[r] {
			bad = append(bad, store.Item{TaskID: w.run.Task.ID, Row: r, Field: "phone", Message: "phone: must be 11 digits", Raw: []byte(`["x"]`)})
		} else {
			good = append(good, customers.Row{Row: r, Code: rmCode(no, r), Name: "n", Phone: "13800138000"})
		}
	}
	err := w.run.CommitBatch(ctx, func(ctx context.Context, tx bun.Tx) (store.Batch, error) {
		written, err := customers.Write(ctx, tx, w.run.Task.ID, good, customers.Mode{})
		if err != nil {
			return store.Batch{}, err
		}
		conflicts := written.Conflicts
		if len(conflicts) > 0 {
			w.m.bugf("%s: rows %d-%d were written before (a side effect twice): %v", w.run.Lease, first, last, conflicts)
			return store.Batch{}, errors.New("model: rows written twice")
		}
		if err := store.InsertItems(ctx, tx, bad); err != nil {
			return store.Batch{}, err
		}
		cp, _ := json.Marshal(map[string]int{"row": last})
		return store.Batch{Checkpoint: cp, TotalDelta: int64(last - first + 1), SuccessDelta: int64(len(good)), FailedDelta: int64(len(bad)),
			ProgressCurrent: int64(last), ProgressTotal: int64(w.p.Rows)}, nil
	})
	if err != nil {
		return err
	}
	w.next = last + 1
	if w.plan.progress {
		return w.run.Progress(ctx, int64(last), int64(w.p.Rows))
	}
	return nil
}

func (w *rmWork) commitAll(ctx context.Context) error {
	for w.next <= w.p.Rows {
		if err := w.commit(ctx); err != nil {
			return err
		}
	}
	return nil
}

func rmCode(taskNo string, row int) string { return fmt.Sprintf("%s-R%d", taskNo, row) }

// result is the success of an attempt that has written every row, naming its attempt, with a
// result file when file is set.
func (w *rmWork) result(ctx context.Context, file bool) (jobs.Result, error) {
	status := store.StatusSuccess
	if len(w.bad) > 0 {
		status = store.StatusPartialSuccess
	}
	data := map[string]any{"attempt": w.run.Lease.Attempt}
	res := jobs.Result{Status: status, Data: data}
	if file {
		key := storage.ResultKey(w.run.Task.TaskNo, w.run.Lease.Attempt, "", ".txt")
		body := fmt.Sprintf("rows %d of %s", w.p.Rows, w.run.Lease)
		if _, err := w.m.w.files.Put(ctx, key, strings.NewReader(body), int64(len(body)), "text/plain"); err != nil {
			return jobs.Result{}, err
		}
		data["file"] = key
		res.Files = []string{key}
	}
	return res, nil
}

// block waits for a cancel (seen through the heartbeat, or through its own progress reports on
// a process whose heartbeat does not land), a takeover, or the end of the seed, when it
// finishes the rows and succeeds.
func (w *rmWork) block(ctx context.Context, d *rmDelivery) (jobs.Result, error) {
	d.parked.Store(true)
	defer d.parked.Store(false)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for i := 1; ; i++ {
		select {
		case <-ctx.Done():
			return jobs.Result{}, ctx.Err()
		case <-w.m.release:
			d.parked.Store(false)
			if err := w.commitAll(ctx); err != nil {
				return jobs.Result{}, err
			}
			return w.result(ctx, w.plan.file)
		case <-tick.C:
		}
		if err := w.run.Checkpoint(ctx); err != nil {
			return jobs.Result{}, err
		}
		if i%20 == 0 {
			if err := w.run.Progress(ctx, int64(w.next-1), int64(w.p.Rows)); err != nil {
				return jobs.Result{}, err
			}
		}
	}
}

// crash hangs without progress or checkpoints until its lease is gone. On a process whose
// heartbeat lands it hears that when a takeover or the cleanup's timeout fences it (its
// heartbeat is refused), and then claims a success with a result file for rows it never
// wrote, which the runtime must discard. On the frozen process it hears nothing until the end
// of the seed; then it stores its result file and tries to finish, and a fenced write tells it
// it was superseded.
func (w *rmWork) crash(ctx context.Context, d *rmDelivery) (jobs.Result, error) {
	d.parked.Store(true)
	defer d.parked.Store(false)
	select {
	case <-ctx.Done():
		d.parked.Store(false)
		if errors.Is(context.Cause(ctx), store.ErrFenced) {
			// A zombie's "result": it never finished the rows.
			return w.result(context.WithoutCancel(ctx), true)
		}
		return jobs.Result{}, ctx.Err()
	case <-w.m.release:
		d.parked.Store(false)
		res, err := w.result(ctx, true)
		if err != nil {
			return jobs.Result{}, err
		}
		if err := w.commitAll(ctx); err != nil {
			if errors.Is(err, store.ErrFenced) {
				return res, err // superseded: the runtime deletes what it made
			}
			w.m.w.files.Delete(context.WithoutCancel(ctx), res.Files[0]) //nolint:errcheck // its own scratch
			return jobs.Result{}, err
		}
		return res, nil
	}
}

// --- invariants -----------------------------------------------------------------------------

type rmRow struct {
	store.Task
	Written      string   `bun:"written"`
	RejectedRows string   `bun:"rejected_rows"`
	Events       string   `bun:"events"`
	Runs         string   `bun:"runs"`
	RetryDelayMS *float64 `bun:"retry_delay_ms"`
}

type rmEvent struct {
	Event   string       `json:"e"`
	Status  store.Status `json:"s"`
	Attempt int          `json:"a"`
}

type rmRun struct {
	Attempt int    `json:"a"`
	Status  string `json:"s"`
	Open    bool   `json:"o"`
}

// rows reads every task with its events, runs, written customers and failed rows in one
// statement: one snapshot, consistent whatever the deliveries are doing.
func (m *rmModel) rows() []rmRow {
	var rows []rmRow
	err := m.w.db.NewRaw(`SELECT t.*,
		(SELECT COALESCE(json_agg(code ORDER BY code), '[]') FROM customers WHERE last_import_task_id = t.id)::text AS written,
		(SELECT COALESCE(json_agg(row_no ORDER BY row_no), '[]') FROM task_items WHERE task_id = t.id)::text AS rejected_rows,
		(SELECT COALESCE(json_agg(json_build_object('e', event, 's', status, 'a', attempt) ORDER BY id), '[]')
		   FROM task_events WHERE task_id = t.id)::text AS events,
		(SELECT COALESCE(json_agg(json_build_object('a', attempt, 's', status, 'o', finished_at IS NULL) ORDER BY attempt, id), '[]')
		   FROM task_runs WHERE task_id = t.id)::text AS runs,
		(SELECT EXTRACT(EPOCH FROM t.next_retry_at - r.finished_at)::float8 * 1000 FROM task_runs r
		   WHERE r.task_id = t.id AND r.attempt = t.attempt ORDER BY r.id DESC LIMIT 1) AS retry_delay_ms
		FROM tasks t ORDER BY t.id`).Scan(m.ctx, &rows)
	if err != nil {
		m.fail(-1, "read the tasks: %v", err)
	}
	return rows
}

func (m *rmModel) row(id int64) *store.Task {
	t, err := m.w.st.GetByID(m.ctx, id)
	if err != nil {
		m.fail(-1, "read task %d: %v", id, err)
	}
	return t
}

// check verifies every invariant on one snapshot. final adds what holds once everything
// has ended and the alerts are due.
func (m *rmModel) check(step int, final bool) {
	m.failOnBugs(step)
	// The attempts handlers ran, read before the snapshot: each one's claim committed before
	// its handler ran, so the snapshot shows it.
	invoked := map[int64][]int{}
	m.mu.Lock()
	for l := range m.invoked {
		invoked[l.TaskID] = append(invoked[l.TaskID], l.Attempt)
	}
	m.mu.Unlock()
	rows := m.rows()
	m.mu.Lock()
	n := len(m.tasks)
	m.mu.Unlock()
	if len(rows) != n {
		m.fail(step, "%d task rows, the model submitted %d", len(rows), n)
	}
	for i := range rows {
		m.mu.Lock()
		mt := m.byID[rows[i].ID]
		m.mu.Unlock()
		if mt == nil {
			m.fail(step, "task %d is not one the model submitted", rows[i].ID)
		}
		if msg := m.checkTask(mt, &rows[i], invoked[mt.id], final); msg != "" {
			m.fail(step, "%s (%s, %s, attempt %d, retry_count %d of %d): %s", mt.no, mt.typ.name, rows[i].Status, rows[i].Attempt,
				rows[i].RetryCount, rows[i].MaxRetry, msg)
		}
	}
}

func (m *rmModel) checkTask(mt *rmTask, c *rmRow, invoked []int, final bool) string {
	row := &c.Task
	var (
		events   []rmEvent
		runs     []rmRun
		written  []string
		rejected []int
	)
	for _, j := range []struct {
		s string
		v any
	}{{c.Events, &events}, {c.Runs, &runs}, {c.Written, &written}, {c.RejectedRows, &rejected}} {
		if err := json.Unmarshal([]byte(j.s), j.v); err != nil {
			return fmt.Sprintf("decode %q: %v", j.s, err)
		}
	}
	m.mu.Lock()
	retries := mt.retries
	m.mu.Unlock()

	// The policy is the one fixed at submit, whatever the runtimes are configured with.
	sp := mt.typ.submit
	if row.MaxRetry != sp.MaxRetry || row.TimeoutSeconds != sp.TimeoutSeconds || row.RetryBaseMS == nil || *row.RetryBaseMS != sp.RetryBase.Milliseconds() ||
		row.MaxRuntimeMS == nil || *row.MaxRuntimeMS != sp.MaxRuntime.Milliseconds() || row.StallAfterMS == nil || *row.StallAfterMS != 0 {
		return fmt.Sprintf("the row's policy is not the one submitted: max_retry %d, timeout %d, retry_base %v, max_runtime %v, stall_after %v",
			row.MaxRetry, row.TimeoutSeconds, rmMS(row.RetryBaseMS), rmMS(row.MaxRuntimeMS), rmMS(row.StallAfterMS))
	}

	// Every event is a committed transition of the state machine, in order, and the newest
	// one is the row as it is.
	genStart, msg := rmCheckEvents(events, retries)
	if msg != "" {
		return msg
	}
	if last := events[len(events)-1]; last.Status != row.Status || last.Attempt != row.Attempt {
		return fmt.Sprintf("the newest event says %s at attempt %d", last.Status, last.Attempt)
	}

	// One run per attempt; at most one open, and only the row's own while it is RUNNING.
	open, ownOpen := 0, false
	runOf := map[int]rmRun{}
	for _, r := range runs {
		if _, dup := runOf[r.Attempt]; dup {
			return fmt.Sprintf("two runs of attempt %d", r.Attempt)
		}
		runOf[r.Attempt] = r
		if r.Attempt > row.Attempt {
			return fmt.Sprintf("a run of attempt %d, past the row's attempt", r.Attempt)
		}
		if r.Open {
			open++
			ownOpen = ownOpen || r.Attempt == row.Attempt
		}
	}
	if (row.Status == store.StatusRunning && (open != 1 || !ownOpen)) || (row.Status != store.StatusRunning && open != 0) {
		return fmt.Sprintf("%d open runs (the row's own open: %v): %s", open, ownOpen, c.Runs)
	}
	started := map[int]bool{}
	for _, e := range events {
		if e.Event == store.EventStarted {
			started[e.Attempt] = true
			if _, ok := runOf[e.Attempt]; !ok {
				return fmt.Sprintf("attempt %d started with no run", e.Attempt)
			}
		}
	}
	for _, a := range invoked {
		if !started[a] {
			return fmt.Sprintf("the handler ran attempt %d, which no committed claim started: events %s", a, c.Events)
		}
	}

	// Retries follow the row's policy: never past max_retry; each one spent is a transient
	// failure or a takeover of this generation; the task gives up exactly when they run out;
	// the back-off is the row's.
	if row.RetryCount > row.MaxRetry {
		return fmt.Sprintf("retry_count %d > the row's max_retry %d (%s runs %s)", row.RetryCount, row.MaxRetry, mt.typ.name, c.Runs)
	}
	spent := 0
	for _, r := range runs {
		if r.Attempt > genStart && (r.Status == string(store.StatusRetryWait) || r.Status == "SUPERSEDED") {
			spent++
		}
	}
	if spent != row.RetryCount {
		return fmt.Sprintf("retry_count %d, but this generation (after attempt %d) spent %d: runs %s", row.RetryCount, genStart, spent, c.Runs)
	}
	if row.Status == store.StatusFailed && row.ErrorCode == "retries_exhausted" && row.RetryCount != row.MaxRetry {
		return fmt.Sprintf("gave up after %d retries, the row allows %d: runs %s", row.RetryCount, row.MaxRetry, c.Runs)
	}
	if row.Status == store.StatusRetryWait && row.ErrorCode == "transient" {
		base := float64(*row.RetryBaseMS)
		lo := base * float64(int64(1)<<(row.RetryCount-1))
		if c.RetryDelayMS == nil || *c.RetryDelayMS < lo-1 || *c.RetryDelayMS > lo+base+1 {
			return fmt.Sprintf("retry %d is due %v ms after the attempt ended; the row's retry_base %v ms gives [%v, %v)", row.RetryCount,
				rmF(c.RetryDelayMS), base, lo, lo+base)
		}
	}
	// The rows carry no stall check and an hour's max runtime: only the cleanup times out.
	if row.Status == store.StatusTimeout && !strings.HasPrefix(row.ErrorMessage, "the worker stopped reporting") {
		return fmt.Sprintf("TIMEOUT by the runtime (%q), though the row's policy has no stall check and a %s max runtime", row.ErrorMessage, rmMaxRuntime)
	}

	// The side effects are exactly the rows up to the checkpoint, each once.
	cp := rmCheckpoint(row.Checkpoint)
	var wantWritten []string
	var wantRejected []int
	for r := 1; r <= cp; r++ {
		if mt.bad[r] {
			wantRejected = append(wantRejected, r)
		} else {
			wantWritten = append(wantWritten, rmCode(mt.no, r))
		}
	}
	slices.Sort(wantWritten)
	slices.Sort(written)
	if !slices.Equal(written, wantWritten) || !slices.Equal(rejected, wantRejected) {
		return fmt.Sprintf("checkpoint row %d, but customers %v and failed rows %v", cp, written, rejected)
	}
	if row.TotalCount != int64(cp) || row.SuccessCount != int64(len(written)) || row.FailedCount != int64(len(rejected)) {
		return fmt.Sprintf("checkpoint row %d, customers %d, failed rows %d, counts %d/%d/%d", cp, len(written), len(rejected),
			row.TotalCount, row.SuccessCount, row.FailedCount)
	}
	// Counts never go backwards within an attempt.
	now := rmCounts{attempt: row.Attempt, total: row.TotalCount, success: row.SuccessCount, failed: row.FailedCount, progress: row.ProgressCurrent}
	if s := mt.seen; s.attempt == now.attempt && (now.total < s.total || now.success < s.success || now.failed < s.failed || now.progress < s.progress) {
		return fmt.Sprintf("counts went backwards within attempt %d: %+v -> %+v", now.attempt, s, now)
	}
	mt.seen = now

	// A success is the work of the attempt that owns the row, over every row.
	if row.Status.Succeeded() {
		var res struct {
			Attempt int    `json:"attempt"`
			File    string `json:"file"`
		}
		json.Unmarshal(row.Result, &res) //nolint:errcheck // checked below
		if cp != mt.rows || res.Attempt != row.Attempt {
			return fmt.Sprintf("succeeded after %d of %d rows with the result of attempt %d: %s", cp, mt.rows, res.Attempt, row.Result)
		}
	}

	// Terminal rows change only through the retry API.
	if row.Status.Terminal() {
		s := &rmSnap{status: row.Status, attempt: row.Attempt, retryCount: row.RetryCount, total: row.TotalCount, success: row.SuccessCount,
			failed: row.FailedCount, checkpoint: string(row.Checkpoint), errorCode: row.ErrorCode, result: string(row.Result)}
		if mt.terminal != nil && mt.terminalRetries == retries && *mt.terminal != *s {
			return fmt.Sprintf("a terminal row changed without a retry: %+v -> %+v", *mt.terminal, *s)
		}
		mt.terminal, mt.terminalRetries = s, retries
	} else if mt.terminal != nil {
		if mt.terminalRetries == retries {
			return fmt.Sprintf("was %s, is %s without a retry", mt.terminal.status, row.Status)
		}
		mt.terminal = nil
	}

	// One alert per exhausted generation, none for anything else.
	alerts := m.alerts.count(mt.no, row.Attempt)
	if alerts == 1 && row.AlertDueAt == nil && row.Status == store.StatusFailed {
		return "alerted, but no alert is due"
	}
	if final && row.AlertDueAt != nil && alerts != 1 {
		return fmt.Sprintf("ran out of retries and was alerted %d times", alerts)
	}
	return ""
}

// rmCheckEvents checks a task's events against the state machine (docs/design.md) and returns the
// attempt the current generation started after (that of the last manual retry).
func rmCheckEvents(evs []rmEvent, retries int) (genStart int, msg string) {
	bad := func(i int, why string) (int, string) {
		var s []string
		for _, e := range evs {
			s = append(s, fmt.Sprintf("%s/%s@%d", e.Event, e.Status, e.Attempt))
		}
		return 0, fmt.Sprintf("event %d: %s; events %s", i, why, strings.Join(s, " "))
	}
	if len(evs) == 0 || evs[0].Event != store.EventSubmitted || evs[0].Status != store.StatusPending || evs[0].Attempt != 0 {
		return bad(0, "the first event is not the submit")
	}
	cancelled, retried := false, 0
	for i := 1; i < len(evs); i++ {
		p, n := evs[i-1], evs[i]
		if !n.Status.Valid() {
			return bad(i, "not a status")
		}
		switch {
		case n.Event == store.EventRetried:
			if !p.Status.Retryable() || n.Status != store.StatusPending || n.Attempt != p.Attempt {
				return bad(i, "a retry of a task that was not FAILED, TIMEOUT or CANCELLED")
			}
			cancelled, genStart = false, n.Attempt
			retried++
		case p.Status.Terminal():
			return bad(i, "a terminal status changed other than by a manual retry")
		case n.Event == store.EventStarted:
			if n.Status != store.StatusRunning || n.Attempt != p.Attempt+1 || !(p.Status.Waiting() || p.Status == store.StatusRunning) {
				return bad(i, "a start that is not a claim or a takeover")
			}
			if cancelled {
				return bad(i, "a task whose cancel was acknowledged was run again")
			}
		case n.Event == store.EventCancelRequested:
			if p.Status != store.StatusRunning || n.Attempt != p.Attempt {
				return bad(i, "a cancel request of a task that was not RUNNING")
			}
			cancelled = true
		case p.Status.Waiting():
			if n.Status != store.StatusCancelled || n.Attempt != p.Attempt {
				return bad(i, "a waiting task changed other than by a claim or a cancel")
			}
			cancelled = true
		case p.Status == store.StatusRunning:
			if n.Attempt != p.Attempt || !(n.Status.Terminal() || n.Status == store.StatusRetryWait) {
				return bad(i, "an attempt ended into a status an ending cannot write")
			}
			if cancelled && !(n.Status == store.StatusCancelled || n.Status.Succeeded()) {
				return bad(i, "a requested cancel lost to "+string(n.Status))
			}
			cancelled = cancelled || n.Status == store.StatusCancelled
		default:
			return bad(i, "no such transition")
		}
	}
	if retried != retries {
		return bad(len(evs)-1, fmt.Sprintf("%d manual retries recorded, the API accepted %d", retried, retries))
	}
	return genStart, ""
}

func rmMS(v *int64) any {
	if v == nil {
		return nil
	}
	return *v
}

func rmF(v *float64) any {
	if v == nil {
		return nil
	}
	return *v
}

// --- the end of a seed ----------------------------------------------------------------------

// finish lets every delivery return, checks that nothing is left unscheduled, delivers until
// every task has ended, and checks what holds at the very end.
func (m *rmModel) finish(step int) {
	m.ending = true
	m.logf("end: parked handlers finish")
	m.final.Store(true)
	m.releaseOnce.Do(func() { close(m.release) })
	m.waitAll(step)
	for _, r := range m.rts {
		if !r.rt.Wait(10 * time.Second) {
			m.fail(step, "%s: attempts had not recorded how they ended after their deliveries returned", r.name)
		}
	}
	m.check(step, false)
	// Every attempt whose delivery returned recorded how it ended.
	for _, c := range m.rows() {
		if c.Status == store.StatusRunning {
			m.fail(step, "%s is RUNNING at attempt %d though every delivery has returned", c.TaskNo, c.Attempt)
		}
	}
	// Liveness: with every delivery returned and a cleanup round run, every waiting task has a
	// job asynq will deliver.
	m.logf("end: a cleanup round, then every waiting task must have a job")
	m.cleanupRace()
	m.failOnBugs(step)
	m.checkScheduled(step, "after every delivery returned and a cleanup round ran", false)
	m.drain(step)
	// Alerts ripen; the round sends those nobody sent.
	m.age(120)
	m.cleanupRace()
	m.check(step, true)
	m.checkFiles(step)
}

// checkScheduled fails when a task waits with no job in asynq to deliver it. flagged excuses a
// task whose enqueue failed and was flagged for the rescuer (enqueued_at NULL): the next
// cleanup round enqueues it at once.
func (m *rmModel) checkScheduled(step int, when string, flagged bool) {
	held := map[int64][]string{}
	for _, j := range m.listJobs() {
		held[j.taskID] = append(held[j.taskID], j.id)
	}
	for _, c := range m.rows() {
		if c.Status.Waiting() && len(held[c.ID]) == 0 && !(flagged && c.EnqueuedAt == nil) {
			m.fail(step, "%s is %s at attempt %d with no job in asynq %s (enqueued_at %v, next_retry_at %v); asynq holds: %s; events %s%s",
				c.TaskNo, c.Status, c.Attempt, when, c.EnqueuedAt, c.NextRetryAt, m.describeJobs(&c.Task), c.Events, rmWithdrawHint(c.TaskNo, c.Events))
		}
	}
}

// rmWithdrawHint names the likely cause when a task waits with no job right after a cancel
// of the waiting task and a retry: the retry keeps the attempt number, so the retried task's
// job id is the one the cancel withdraws (httpapi's cancel calls Submitter.Withdraw after the
// store's cancel). When the retry's enqueue found the old job still waiting it kept it, and a
// withdrawal that runs after that deletes it unless it enqueues the waiting task again.
func rmWithdrawHint(taskNo, events string) string {
	var evs []rmEvent
	if json.Unmarshal([]byte(events), &evs) != nil || len(evs) < 2 {
		return ""
	}
	if p, n := evs[len(evs)-2], evs[len(evs)-1]; p.Event == store.EventCancelled && n.Event == store.EventRetried && p.Attempt == n.Attempt {
		return fmt.Sprintf("\nlikely cause: the cancel's withdrawal of job %s ran after the retry's enqueue had kept that same job",
			jobs.JobID(taskNo, n.Attempt))
	}
	return ""
}

// describeJobs says what asynq holds under the task's job ids, in any state.
func (m *rmModel) describeJobs(t *store.Task) string {
	var out []string
	for _, lane := range jobs.Lanes(t.Queue) {
		for a := 0; a <= t.Attempt; a++ {
			if info, err := m.w.insp.GetTaskInfo(lane, jobs.JobID(t.TaskNo, a)); err == nil {
				out = append(out, fmt.Sprintf("%s in %s: %s", info.ID, lane, info.State))
			}
		}
		for _, list := range []func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error){m.w.insp.ListArchivedTasks, m.w.insp.ListActiveTasks} {
			infos, _ := list(lane, asynq.PageSize(1000))
			for _, in := range infos {
				if id, _, _ := jobs.ModelJobTask(in.Payload); id == t.ID && !strings.HasPrefix(in.ID, t.TaskNo+"-a") {
					out = append(out, fmt.Sprintf("%s in %s: %s", in.ID, lane, in.State))
				}
			}
		}
	}
	if len(out) == 0 {
		return "nothing"
	}
	return strings.Join(out, ", ")
}

// drain delivers every waiting job, wave after wave, until every task has ended. Each wave
// starts with the clock moved on so that every back-off is due.
func (m *rmModel) drain(step int) {
	deadline := time.Now().Add(2 * rmSettle)
	for wave := 1; ; wave++ {
		open := 0
		for _, c := range m.rows() {
			if !c.Status.Terminal() {
				open++
			}
		}
		if open == 0 {
			return
		}
		if wave > 40 || time.Now().After(deadline) {
			m.fail(step, "%d tasks had not ended after %d waves of deliveries", open, wave-1)
		}
		m.age(3600)
		all := m.listJobs()
		if len(all) == 0 {
			m.cleanupRace() // hands over the tasks flagged for the rescuer
			m.failOnBugs(step)
			all = m.listJobs()
		}
		m.logf("end: wave %d delivers %d jobs for %d open tasks", wave, len(all), open)
		if len(all) == 0 {
			m.fail(step, "%d tasks are open and asynq holds no job, even after a cleanup round", open)
		}
		for _, j := range all {
			if m.take(j) {
				m.dispatch(j, m.pickRuntime())
			}
		}
		m.waitAll(step)
		m.check(step, false)
		m.checkScheduled(step, fmt.Sprintf("after wave %d of deliveries", wave), true)
	}
}

// checkFiles: every result file belongs to the success that records it; a superseded
// attempt's files were deleted. The runtime deletes an abandoned handler's files when the
// handler returns, so this waits for that with a deadline.
func (m *rmModel) checkFiles(step int) {
	deadline := time.Now().Add(rmSettle)
	for {
		msg := m.filesProblem()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			m.fail(step, "%s", msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (m *rmModel) filesProblem() string {
	refs := map[string]bool{}
	for _, c := range m.rows() {
		for _, f := range jobs.ResultFiles(&c.Task) {
			refs[f] = true
			if _, err := os.Stat(filepath.Join(m.w.root, filepath.FromSlash(f))); err != nil {
				return fmt.Sprintf("%s records %s, which is gone: %v", c.TaskNo, f, err)
			}
		}
	}
	entries, _ := os.ReadDir(filepath.Join(m.w.root, storage.Results))
	for _, e := range entries {
		if key := storage.Results + "/" + e.Name(); !refs[key] {
			return fmt.Sprintf("%s belongs to no task: a superseded attempt's result was not discarded", key)
		}
	}
	return ""
}

// --- reporting ------------------------------------------------------------------------------

func (m *rmModel) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if !strings.HasPrefix(line, " ") {
		line = fmt.Sprintf("[%5dms] %s", time.Since(m.started).Milliseconds(), line)
	}
	m.mu.Lock()
	m.trace = append(m.trace, line)
	m.mu.Unlock()
}

// bugf records a violation seen on any goroutine; the main goroutine fails on it.
func (m *rmModel) bugf(format string, args ...any) {
	m.mu.Lock()
	m.bugs = append(m.bugs, fmt.Sprintf(format, args...))
	m.mu.Unlock()
}

func (m *rmModel) failOnBugs(step int) {
	m.mu.Lock()
	bugs := slices.Clone(m.bugs)
	m.mu.Unlock()
	if len(bugs) > 0 {
		m.fail(step, "%s", strings.Join(bugs, "\n"))
	}
}

// fail stops the seed on the main goroutine with the seed, how to replay it, and the last
// steps that led there.
func (m *rmModel) fail(step int, format string, args ...any) {
	m.t.Helper()
	if step < 0 {
		step = m.at
	}
	m.mu.Lock()
	trace := slices.Clone(m.trace)
	m.mu.Unlock()
	tail := trace
	if len(tail) > 80 {
		tail = tail[len(tail)-80:]
	}
	// The whole trace goes to a file: a violation may rest on steps long before it.
	full := "(not written)"
	if f, err := os.CreateTemp("", fmt.Sprintf("runtime-model-seed-%d-*.txt", m.seed)); err == nil {
		f.WriteString(strings.Join(trace, "\n") + "\n") //nolint:errcheck // best effort
		f.Close()
		full = f.Name()
	}
	at := fmt.Sprintf("step %d", step)
	if m.ending {
		at = "the end of the run"
	}
	m.t.Fatalf("seed %d, %s: %s\nreplay: TASKCENTER_MODEL_SEED=%d go test -race -run TestRuntimeModel -v ./jobs/\nwhole trace: %s\nlast steps:\n  %s",
		m.seed, at, fmt.Sprintf(format, args...), m.seed, full, strings.Join(tail, "\n  "))
}
