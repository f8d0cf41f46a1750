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
)

// Workers is the set of asynq servers of a worker process: one per queue, each with its own
// concurrency, so a flood of imports cannot starve exports.
type Workers struct {
	servers map[string]*asynq.Server
	logger  *slog.Logger
}

// NewWorkers builds one asynq server per queue (name → concurrency) on the shared Redis
// client, all dispatching to rt.
func NewWorkers(rdb redis.UniversalClient, queues map[string]int, shutdownTimeout, pollInterval time.Duration, logger *slog.Logger) *Workers {
	w := &Workers{servers: map[string]*asynq.Server{}, logger: logger}
	for name, concurrency := range queues {
		qlog := logger.With("queue", name)
		w.servers[name] = asynq.NewServerFromRedisClient(rdb, asynq.Config{
			Concurrency:              concurrency,
			Queues:                   map[string]int{name: 1},
			RetryDelayFunc:           RetryDelay,
			IsFailure:                IsFailure,
			ShutdownTimeout:          shutdownTimeout,
			DelayedTaskCheckInterval: time.Second,
			TaskCheckInterval:        pollInterval,
			Logger:                   AsynqLogger(qlog),
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
	w.logger.Info("workers started", "queues", names, "types", rt.Types())
	return nil
}

// Stop stops fetching new jobs on every queue; running jobs continue.
func (w *Workers) Stop() {
	for _, s := range w.servers {
		s.Stop()
	}
}

// Shutdown waits for running jobs up to the shutdown timeout, then returns; jobs still
// running are pushed back to their queue by asynq and resume from their checkpoint.
func (w *Workers) Shutdown() {
	var wg sync.WaitGroup
	for _, s := range w.servers {
		wg.Go(s.Shutdown)
	}
	wg.Wait()
}

// AsynqLogger routes asynq's own logging into slog.
func AsynqLogger(l *slog.Logger) asynq.Logger { return asynqLogger{l} }

type asynqLogger struct{ l *slog.Logger }

func (a asynqLogger) Debug(args ...any) { a.l.Debug(fmt.Sprint(args...), "source", "asynq") }
func (a asynqLogger) Info(args ...any)  { a.l.Info(fmt.Sprint(args...), "source", "asynq") }
func (a asynqLogger) Warn(args ...any)  { a.l.Warn(fmt.Sprint(args...), "source", "asynq") }
func (a asynqLogger) Error(args ...any) { a.l.Error(fmt.Sprint(args...), "source", "asynq") }
func (a asynqLogger) Fatal(args ...any) {
	a.l.Error(fmt.Sprint(args...), "source", "asynq", "fatal", true)
}
