package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/taskcenter/taskcenter/internal/every"
)

// Workers is the set of asynq servers of a worker process: one per queue, each with its own
// concurrency, so a flood of imports cannot starve exports.
type Workers struct {
	servers map[string]*asynq.Server
	logger  *slog.Logger
	rdb     redis.UniversalClient
	lanes   []string
	// listEvery is how often the lanes are written into asynq's queue list (see keepListed).
	listEvery  time.Duration
	stopListed context.CancelFunc // ends keepListed
	listed     sync.WaitGroup
}

// asynqQueueList is the Redis set in which asynq lists its queues (asynq's internal
// base.AllQueues): the inspector, the console and the queue metrics only see queues named
// there. TestWorkersKeepTheirQueuesListedAfterRedisLosesThem fails if asynq renames it.
const asynqQueueList = "asynq:queues"

// queueListEvery is how often a worker process writes its lanes into asynq's queue list.
const queueListEvery = 10 * time.Second

// QueueConfig is one queue's worker pool.
type QueueConfig struct {
	// Concurrency is how many of the queue's tasks this process runs at once.
	Concurrency int
	// StrictPriority serves a lane only when the lanes before it are empty (see Lanes);
	// otherwise lanes are weighted (see LaneWeights).
	StrictPriority bool
}

// NewWorkers builds one asynq server per queue on the shared Redis client, all dispatching
// to rt.
// redis, when not nil, holds back asynq's complaints while a Redis outage is already reported.
func NewWorkers(rdb redis.UniversalClient, queues map[string]QueueConfig, shutdownTimeout, pollInterval time.Duration, logger *slog.Logger, redis Dependency) *Workers {
	w := &Workers{servers: map[string]*asynq.Server{}, logger: logger, rdb: rdb, listEvery: queueListEvery, stopListed: func() {}}
	for name, q := range queues {
		w.lanes = append(w.lanes, Lanes(name)...)
		qlog := logger.With("queue", name)
		alog := AsynqLogger(qlog, redis)
		w.servers[name] = asynq.NewServerFromRedisClient(rdb, asynq.Config{
			Concurrency:              q.Concurrency,
			Queues:                   LaneWeights(name),
			StrictPriority:           q.StrictPriority,
			RetryDelayFunc:           RetryDelay,
			IsFailure:                IsFailure,
			ShutdownTimeout:          shutdownTimeout,
			DelayedTaskCheckInterval: time.Second,
			TaskCheckInterval:        pollInterval,
			Logger:                   alog,
			LogLevel:                 asynq.WarnLevel,
			ErrorHandler: asynq.ErrorHandlerFunc(func(ctx context.Context, t *asynq.Task, err error) {
				if IsFailure(err) {
					qlog.Debug("job ended with an error", "type", t.Type(), "err", err)
				}
			}),
		})
	}
	return w
}

// Start starts every server with rt as the handler of the task types, plus extra handlers
// for jobs that are not task rows (the periodic cleanup).
func (w *Workers) Start(rt *Runtime, extra map[string]asynq.Handler) error {
	mux := asynq.NewServeMux()
	for _, t := range rt.Types() {
		mux.Handle(t, rt)
	}
	for t, h := range extra {
		mux.Handle(t, h)
	}
	names := make([]string, 0, len(w.servers))
	for name := range w.servers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := w.servers[name].Start(mux); err != nil {
			return fmt.Errorf("start worker for queue %s: %w", name, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.stopListed = cancel
	w.listed.Go(func() { every.Run(ctx, w.listEvery, w.keepListed) })
	w.logger.Info("workers started", "queues", names, "types", rt.Types())
	return nil
}

// keepListed writes the process's lanes into asynq's queue list; the workers do it every
// listEvery from Start until Stop or Shutdown. asynq adds a queue to that list only on a
// client's first enqueue to it and remembers having done so, so after Redis loses its data
// (FLUSHALL, a restart without persistence) the queues would stay off the list — missing from
// the console, their metrics failing — until every process restarted, though their jobs are
// rebuilt and run.
func (w *Workers) keepListed(ctx context.Context) {
	lanes := make([]any, len(w.lanes))
	for i, l := range w.lanes {
		lanes[i] = l
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := w.rdb.SAdd(sctx, asynqQueueList, lanes...).Err(); err != nil && ctx.Err() == nil {
		w.logger.Debug("could not write the queues into asynq's queue list; trying again", "err", err)
	}
}

// stopListing ends keepListed's rounds and waits for the one under way.
func (w *Workers) stopListing() {
	w.stopListed()
	w.listed.Wait()
}

// Stop stops fetching new jobs on every queue; running jobs continue.
func (w *Workers) Stop() {
	w.stopListing()
	for _, s := range w.servers {
		s.Stop()
	}
}

// Shutdown waits for running jobs up to the shutdown timeout, then returns; jobs still
// running are pushed back to their queue by asynq and resume from their checkpoint.
func (w *Workers) Shutdown() {
	w.stopListing()
	var wg sync.WaitGroup
	for _, s := range w.servers {
		wg.Go(s.Shutdown)
	}
	wg.Wait()
}

// Dependency is what the worker knows of a dependency's availability (internal/outage's
// Tracker): whether an outage is under way and already reported.
type Dependency interface {
	// Down reports whether the dependency is in an outage.
	Down() bool
	// Fail records a failed operation.
	Fail(err error)
	// Suppress reports (and counts) whether a line about the dependency should be held back.
	Suppress() bool
}

// AsynqLogger routes asynq's own logging into slog. During an outage asynq's loops repeat
// errors every second on every queue: while redis (when not nil) reports an outage, its
// warnings and errors are held back and counted in the outage's summary line; otherwise a
// message already logged in the last 30 seconds is counted and reported with its repeat
// count when it next gets through.
func AsynqLogger(l *slog.Logger, redis Dependency) asynq.Logger {
	return asynqLogger{l: l, seen: &repeats{last: map[string]repeat{}}, redis: redis}
}

type asynqLogger struct {
	l     *slog.Logger
	seen  *repeats
	redis Dependency
}

type repeats struct {
	mu   sync.Mutex
	last map[string]repeat
}

type repeat struct {
	at         time.Time
	suppressed int
}

const repeatWindow = 30 * time.Second

// admit reports whether msg should be logged now, and how many copies were held back.
func (r *repeats) admit(msg string) (bool, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	prev, ok := r.last[msg]
	if ok && now.Sub(prev.at) < repeatWindow {
		prev.suppressed++
		r.last[msg] = prev
		return false, 0
	}
	if len(r.last) > 1000 {
		clear(r.last)
	}
	r.last[msg] = repeat{at: now}
	return true, prev.suppressed
}

func (a asynqLogger) log(level slog.Level, args ...any) {
	msg := fmt.Sprint(args...)
	if level < slog.LevelWarn {
		a.l.Log(context.Background(), level, msg, "source", "asynq")
		return
	}
	if a.redis != nil && a.redis.Suppress() {
		a.l.Log(context.Background(), slog.LevelDebug, msg, "source", "asynq", "during_outage", true)
		return
	}
	if ok, held := a.seen.admit(msg); ok {
		if held > 0 {
			a.l.Log(context.Background(), level, msg, "source", "asynq", "repeated", held)
		} else {
			a.l.Log(context.Background(), level, msg, "source", "asynq")
		}
	}
}

func (a asynqLogger) Debug(args ...any) { a.log(slog.LevelDebug, args...) }
func (a asynqLogger) Info(args ...any)  { a.log(slog.LevelInfo, args...) }
func (a asynqLogger) Warn(args ...any)  { a.log(slog.LevelWarn, args...) }
func (a asynqLogger) Error(args ...any) { a.log(slog.LevelError, args...) }
func (a asynqLogger) Fatal(args ...any) { a.log(slog.LevelError, append(args, " (fatal)")...) }
