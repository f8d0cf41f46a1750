package jobs

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/webhooks"
)

// SubmitPolicy is what submit needs to know about a task type.
type SubmitPolicy struct {
	Queue          string
	MaxRetry       int
	TimeoutSeconds int
	// RetryBase, MaxRuntime and StallAfter complete the policy fixed on each task's row at
	// submit: the worker that runs it reads them there, not from its own config.
	RetryBase, MaxRuntime, StallAfter time.Duration
	// Priority is the type's default priority (1 first … 9 last).
	Priority int
	// MaxWaitingPerOwner caps one owner's waiting tasks in the type's queue: a submit over it
	// is refused with a *BusyError naming the owner. Zero: no cap.
	MaxWaitingPerOwner int
}

// ErrUnknownType is returned for a task type that is not configured or is disabled.
var ErrUnknownType = errors.New("unknown task type")

// BusyError is returned when a queue's backlog is over its limit: the submit is refused and
// no task is created.
type BusyError struct {
	Queue string
	// Owner is set when the owner's own waiting cap was hit, not the queue's backlog limit.
	Owner      string
	Limit      int
	RetryAfter time.Duration
}

func (e *BusyError) Error() string {
	if e.Owner != "" {
		return fmt.Sprintf("%s already has %d tasks waiting in queue %s, the most one user may have; try again when some have run", e.Owner, e.Limit, e.Queue)
	}
	return fmt.Sprintf("queue %s has %d or more tasks waiting; try again later", e.Queue, e.Limit)
}

// KeyReusedError refuses a submit whose caller's own idempotency key (CallerKey) already
// named a request with other parameters: answering it with that task would do something
// else than asked.
type KeyReusedError struct{ TaskNo string }

func (e *KeyReusedError) Error() string {
	return "this idempotency key was already used for a submit with different parameters (task " + e.TaskNo + ")"
}

// CallerKey is the BizKey of a submit that carries its caller's idempotency key ("" for
// none): the owner's same key names one request.
func CallerKey(key string) string {
	if key == "" {
		return ""
	}
	return callerKeyPrefix + key
}

const callerKeyPrefix = "idem:"

// replayOf answers sub with t, the task its BizKey already names: refused with a
// *KeyReusedError when the key is the caller's and the parameters differ.
func replayOf(sub Submission, t *store.Task) SubmitResult {
	if strings.HasPrefix(sub.BizKey, callerKeyPrefix) && !jsonEqual(t.Params, sub.Params) {
		return SubmitResult{Task: t, Err: &KeyReusedError{TaskNo: t.TaskNo}}
	}
	return SubmitResult{Task: t}
}

// jsonEqual compares two JSON documents by value (Postgres jsonb reorders keys).
func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// Submission is one submit.
type Submission struct {
	Type      string
	Owner     string
	BizKey    string // idempotency key; empty for none
	Params    json.RawMessage
	RequestID string
	// Priority is 1 (runs first) … 9 (runs last); 0 takes the type's default.
	Priority int
	// Title names the task in lists, in English (the type's title, or the submitter's own).
	Title string
	// TitleMessage is Title as a catalogue message when the type made it (Type.TitleOf,
	// NewTitle); nil for the submitter's own.
	TitleMessage *msg.Message
	// Notify, when set, is a webhook subscription created with the task, in the same
	// transaction: both exist, or neither. When the submit is answered with an existing
	// task, the subscription is bound to that task (WithNotifyPayload), once per URL.
	Notify *webhooks.NewSubscription
}

// Submitter creates tasks: admission control, insert (the source of truth), then enqueue.
type Submitter struct {
	store    *store.Store
	payload  store.PayloadFunc // builds the deliveries of a notification bound to an existing task
	board    *ProgressBoard    // optional: announces new tasks to live streams
	creator  *Creator          // optional: groups the inserts of concurrent single submits
	retry    *Reenqueuer       // optional: tries a failed enqueue again every second
	enqueuer *Enqueuer
	types    map[string]SubmitPolicy
	waiting  *waitingCounts // the queues' backlogs and the owners' waiting tasks
	limits   map[string]int // queue → backlog limit
	observer Observer
	logger   *slog.Logger
	redis    Dependency
}

// NewSubmitter returns a Submitter. limits maps a queue to its backlog limit (0: none);
// observer may be nil; redis, when not nil, lets a submit skip Redis during an outage.
func NewSubmitter(s *store.Store, e *Enqueuer, types map[string]SubmitPolicy, limits map[string]int, observer Observer, logger *slog.Logger, redis Dependency) *Submitter {
	return &Submitter{store: s, enqueuer: e, types: types, observer: observer, logger: logger, redis: redis,
		waiting: newWaitingCounts(), limits: limits}
}

// Submit creates the task and hands it to asynq. It returns the existing task and
// created=false when the owner already submitted the same type with the same key. If Redis
// is unreachable the task is still created: it is committed, and enqueued once Redis answers.
func (s *Submitter) Submit(ctx context.Context, sub Submission) (task *store.Task, created bool, err error) {
	res, err := s.SubmitMany(ctx, []Submission{sub})
	if err != nil {
		return nil, false, err
	}
	return res[0].Task, res[0].Created, res[0].Err
}

// SubmitResult is one submission's answer from SubmitMany.
type SubmitResult struct {
	Task    *store.Task
	Created bool
	// Subscription is the submission's Notify subscription: created with the task, bound to
	// the existing task, or the one that task already had for the URL (SubscriptionCreated
	// false: its secret is not the caller's to see again).
	Subscription        *webhooks.Subscription
	SubscriptionCreated bool
	// Err refuses this submission alone (unknown type, queue busy, owner's cap, the
	// caller's key reused with other parameters).
	Err error
}

// SubmitMany creates many tasks in one transaction and hands them to asynq: the batch submit.
// Each submission is admitted on its own (a replay answered with its task, a busy queue or an
// owner over their cap refused); the admitted ones are inserted in one statement and enqueued
// concurrently. An error return means nothing was created, but for a notification that could
// not be bound to an existing task (bindNotify): the same submit again is answered with the
// same task and binds it.
func (s *Submitter) SubmitMany(ctx context.Context, subs []Submission) ([]SubmitResult, error) {
	res := make([]SubmitResult, len(subs))
	var (
		admitted []int
		nts      []store.NewTask
	)
	for i, sub := range subs {
		p, ok := s.types[sub.Type]
		if !ok {
			res[i].Err = fmt.Errorf("%w %q", ErrUnknownType, sub.Type)
			continue
		}
		if sub.BizKey != "" {
			// A replay of an earlier submit is answered even when the queue is full.
			if t, err := s.store.FindByKey(ctx, sub.Owner, sub.Type, sub.BizKey); err == nil {
				res[i] = replayOf(sub, t)
				continue
			} else if !errors.Is(err, store.ErrNotFound) {
				return nil, err
			}
		}
		if err := s.admit(ctx, p, sub.Owner); err != nil {
			var busy *BusyError
			if !errors.As(err, &busy) {
				return nil, err
			}
			res[i].Err = err
			continue
		}
		admitted = append(admitted, i)
		nts = append(nts, store.NewTask{TaskNo: NewTaskNo(), Type: sub.Type, Owner: sub.Owner, Queue: p.Queue, BizKey: sub.BizKey,
			Priority: cmp.Or(sub.Priority, p.Priority, PriorityDefault), Title: sub.Title, TitleMessage: sub.TitleMessage, Params: sub.Params,
			RequestID: sub.RequestID,
			MaxRetry:  p.MaxRetry, TimeoutSeconds: p.TimeoutSeconds, RetryBase: p.RetryBase, MaxRuntime: p.MaxRuntime, StallAfter: p.StallAfter,
			Notify: sub.Notify})
	}
	if len(nts) > 0 {
		if err := s.create(ctx, subs, nts, admitted, res); err != nil {
			return nil, err
		}
	}
	return res, s.bindNotify(ctx, subs, res)
}

// create inserts the admitted submissions' tasks (nts, for subs[admitted[k]]), records their
// results and hands the new ones to asynq.
func (s *Submitter) create(ctx context.Context, subs []Submission, nts []store.NewTask, admitted []int, res []SubmitResult) error {
	create := s.store.CreateMany
	if s.creator != nil && len(nts) == 1 {
		create = s.creator.Create
	}
	created, err := create(ctx, nts)
	if err != nil {
		return err
	}
	var fresh []*store.Task
	for k, c := range created {
		if !c.Created {
			res[admitted[k]] = replayOf(subs[admitted[k]], c.Task)
			continue
		}
		res[admitted[k]] = SubmitResult{Task: c.Task, Created: true, Subscription: c.Subscription, SubscriptionCreated: c.Subscription != nil}
		fresh = append(fresh, c.Task)
		if s.observer != nil {
			s.observer.TaskSubmitted(c.Task.Type)
		}
	}
	s.announceAndEnqueue(ctx, fresh)
	return nil
}

// bindNotify binds each notification whose submit was answered with an existing task to that
// task (store.CreateTaskSubscription: the events it already has are delivered too). It runs
// whatever becomes of the request: the task exists, and a caller that tries again binds the
// same subscription.
func (s *Submitter) bindNotify(ctx context.Context, subs []Submission, res []SubmitResult) error {
	for i, sub := range subs {
		r := &res[i]
		if sub.Notify == nil || r.Task == nil || r.Created || r.Err != nil {
			continue
		}
		if s.payload == nil {
			return errors.New("jobs: the submitter cannot bind a notification to an existing task without WithNotifyPayload")
		}
		ns := *sub.Notify
		ns.Owner = r.Task.Owner
		var err error
		if r.Subscription, r.SubscriptionCreated, err = s.store.CreateTaskSubscription(context.WithoutCancel(ctx), r.Task.ID, ns, s.payload); err != nil {
			return err
		}
	}
	return nil
}

// admit checks a submission against its queue's backlog limit and its owner's waiting cap,
// and counts it against both: nil, a *BusyError, or the error of counting.
func (s *Submitter) admit(ctx context.Context, p SubmitPolicy, owner string) error {
	caps := [...]struct {
		key   string
		limit int
		count func(context.Context) (int, error)
		busy  BusyError
	}{
		{"q\x00" + p.Queue, s.limits[p.Queue], func(ctx context.Context) (int, error) {
			return s.store.Waiting(ctx, p.Queue, s.limits[p.Queue])
		}, BusyError{Queue: p.Queue, Limit: s.limits[p.Queue], RetryAfter: 5 * time.Second}},
		{"o\x00" + p.Queue + "\x00" + owner, p.MaxWaitingPerOwner, func(ctx context.Context) (int, error) {
			return s.store.OwnerWaiting(ctx, p.Queue, owner, p.MaxWaitingPerOwner)
		}, BusyError{Queue: p.Queue, Owner: owner, Limit: p.MaxWaitingPerOwner, RetryAfter: 10 * time.Second}},
	}
	for _, c := range caps {
		if c.limit <= 0 {
			continue
		}
		ok, err := s.waiting.below(ctx, c.key, c.limit, c.count)
		if err != nil {
			return err
		}
		if !ok {
			return &c.busy
		}
	}
	for _, c := range caps {
		if c.limit > 0 {
			s.waiting.added(c.key)
		}
	}
	return nil
}

// announceAndEnqueue tells live streams of new tasks and hands them to asynq, a few at a time.
func (s *Submitter) announceAndEnqueue(ctx context.Context, tasks []*store.Task) {
	if len(tasks) == 1 { // the single submit: no goroutines
		s.announce(ctx, tasks[0])
		s.Enqueue(ctx, tasks[0])
		return
	}
	var wg sync.WaitGroup
	next := make(chan *store.Task)
	for range min(128, len(tasks)) { // concurrent enqueues share pipelines (see ScriptPipeliner)
		wg.Go(func() {
			for t := range next {
				s.announce(ctx, t)
				s.Enqueue(ctx, t)
			}
		})
	}
	for _, t := range tasks {
		next <- t
	}
	close(next)
	wg.Wait()
}

func (s *Submitter) announce(ctx context.Context, t *store.Task) {
	if s.board != nil && (s.redis == nil || !s.redis.Down()) {
		s.board.Changed(ctx, t.TaskNo, t.Owner) //nolint:errcheck // live streams also poll
	}
}

// enqueueTimeout bounds the hand-off to asynq inside a submit. Redis answers in a millisecond
// when it is up; a submit must answer within its budget when it is not.
const enqueueTimeout = 300 * time.Millisecond

// Enqueue hands a waiting task to asynq. When that fails the task is committed all the same:
// the Reenqueuer (when set) tries again every second and hands it over as soon as Redis
// answers, and the task is flagged for the cleanup round's rescuer, which covers a process
// that dies first. During a Redis outage it does not try at all, so a submit answers in
// milliseconds instead of waiting on a dead connection.
func (s *Submitter) Enqueue(ctx context.Context, task *store.Task) {
	var err error
	if s.redis != nil && s.redis.Down() {
		err = errRedisDown
	} else {
		ectx, cancel := context.WithTimeout(ctx, enqueueTimeout)
		err = s.enqueuer.Enqueue(ectx, task)
		cancel()
		if err != nil && s.redis != nil {
			s.redis.Fail(err)
		}
	}
	if err == nil {
		return
	}
	if s.redis == nil || !s.redis.Suppress() {
		s.logger.Warn("task committed but not enqueued; it is handed over when Redis answers again", "task_no", task.TaskNo, "err", err)
	}
	if s.retry != nil {
		s.retry.Add(task)
	}
	if err := s.store.MarkEnqueueFailed(context.WithoutCancel(ctx), task.ID, task.Attempt); err != nil {
		s.logger.Warn("could not flag task for the rescuer", "task_no", task.TaskNo, "err", err)
	}
}

var errRedisDown = errors.New("redis is unreachable; skipped")

// Withdraw deletes the waiting job of a task the cancel API has just cancelled from PENDING
// or RETRY_WAIT (prevAttempt is the attempt its job was enqueued under), so it does not sit in
// the queue. A manual retry keeps the attempt number, and with it the job's id: a retry that
// committed after the cancel may have found this very job waiting and kept it. So once the
// job is gone, a task that is waiting again is enqueued anew (a retry's own enqueue still to
// come is then a no-op).
func (s *Submitter) Withdraw(ctx context.Context, t *store.Task, prevAttempt int) error {
	if err := s.enqueuer.Withdraw(t.Queue, t.TaskNo, prevAttempt); err != nil {
		return err
	}
	now, err := s.store.GetByID(ctx, t.ID)
	if err != nil {
		return err
	}
	if now.Status.Waiting() {
		s.Enqueue(ctx, now)
	}
	return nil
}

// Enabled reports whether tasks of a type can be submitted (configured and not disabled).
func (s *Submitter) Enabled(taskType string) bool {
	_, ok := s.types[taskType]
	return ok
}

// QueueOf is the queue a type's tasks run on.
func (s *Submitter) QueueOf(taskType string) string { return s.types[taskType].Queue }

// PriorityOf is a type's default priority.
func (s *Submitter) PriorityOf(taskType string) int {
	return cmp.Or(s.types[taskType].Priority, PriorityDefault)
}

// WithBoard makes the submitter announce new tasks to live streams on b.
func (s *Submitter) WithBoard(b *ProgressBoard) *Submitter {
	s.board = b
	return s
}

// WithReenqueuer hands the tasks whose enqueue failed to r, which tries them again every
// second until Redis answers; without it they wait for the cleanup round.
func (s *Submitter) WithReenqueuer(r *Reenqueuer) *Submitter {
	s.retry = r
	return s
}

// WithNotifyPayload lets the submitter bind a submit's notification to the existing task it
// is answered with, building the deliveries of the events that task already has with
// payload (jobs/webhook's BuildPayload).
func (s *Submitter) WithNotifyPayload(payload store.PayloadFunc) *Submitter {
	s.payload = payload
	return s
}

// WithCreator makes single submits share their insert with the submits arriving together.
func (s *Submitter) WithCreator(c *Creator) *Submitter {
	s.creator = c
	return s
}

// NewTaskNo returns a public task number: "tsk_" and 128 random bits, unguessable.
func NewTaskNo() string { return "tsk_" + rand.Text() }

// waitingCounts caches counts of waiting tasks (per queue for the backlog limit, per queue and
// owner for the fair-share cap), so admission control costs one bounded count per key per
// ttl instead of one per submit. Admissions are added to the cached figure until the next
// count. A refusal always rests on a count no older than recheck, so a key whose tasks have
// started is admitted again promptly. The figure is per process: with several API replicas
// an owner can go over the cap by what the other replicas admit within one ttl.
type waitingCounts struct {
	ttl, recheck time.Duration

	mu         sync.Mutex
	counts     map[string]waitingCount
	refreshing map[string]bool // a count of this key is under way
}

type waitingCount struct {
	n  int
	at time.Time
}

// maxWaitingKeys bounds the cache: beyond it, entries older than ttl are dropped.
const maxWaitingKeys = 4096

func newWaitingCounts() *waitingCounts {
	return &waitingCounts{ttl: time.Second, recheck: 100 * time.Millisecond,
		counts: map[string]waitingCount{}, refreshing: map[string]bool{}}
}

// below reports whether key's waiting tasks are fewer than limit, counting them with count
// when the cached figure is too old to decide on. One caller counts at a time per key; the
// others meanwhile decide on the figure they have, so a busy key does not send a burst of
// identical counts to the database every ttl.
func (w *waitingCounts) below(ctx context.Context, key string, limit int, count func(context.Context) (int, error)) (bool, error) {
	w.mu.Lock()
	c, ok := w.counts[key]
	age := time.Since(c.at)
	stale := !ok || age > w.ttl || (c.n >= limit && age > w.recheck)
	if stale && ok && w.refreshing[key] {
		stale = false // someone is counting; decide on the figure at hand
	}
	if stale {
		w.refreshing[key] = true
	}
	w.mu.Unlock()
	if stale {
		n, err := count(ctx)
		w.mu.Lock()
		delete(w.refreshing, key)
		if err != nil {
			w.mu.Unlock()
			return false, err
		}
		if len(w.counts) >= maxWaitingKeys {
			for k, old := range w.counts {
				if time.Since(old.at) > w.ttl {
					delete(w.counts, k)
				}
			}
		}
		c = waitingCount{n: n, at: time.Now()}
		w.counts[key] = c
		w.mu.Unlock()
	}
	return c.n < limit, nil
}

// added counts a new task against key's cached figure until the next count.
func (w *waitingCounts) added(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c, ok := w.counts[key]; ok {
		c.n++
		w.counts[key] = c
	}
}
