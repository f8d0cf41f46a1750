package config

import (
	"time"
)

// Worker tunes the runtime shared by every job type.
type Worker struct {
	// ID names this worker in task rows and logs. Default hostname-pid.
	ID string `yaml:"id"`
	// HeartbeatInterval is how often a running task proves it is alive. Default 5s.
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval"`
	// TakeoverAfter is how old a RUNNING task's heartbeat must be before another worker may
	// take it over. Must be several heartbeat intervals. Default 30s.
	TakeoverAfter time.Duration `yaml:"takeover_after"`
	// ProgressInterval throttles progress writes to Redis. Default 500ms.
	ProgressInterval time.Duration `yaml:"progress_interval"`
	// ShutdownTimeout is how long in-flight batches may run after SIGTERM before the rest is
	// left to resume from its checkpoint. Default 25s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// PollInterval is how often an idle queue asks Redis for work: the pick-up latency of a
	// new task. Default 100ms.
	PollInterval time.Duration `yaml:"poll_interval"`
	// BatchMax caps how many claims, how many endings, and how many single submits one
	// statement writes: concurrent attempts (and concurrent submits to an API process) share
	// one transaction and one fsync. 1 writes each on its own. Default 128.
	BatchMax int `yaml:"batch_max"`
	// BatchWait is how long a claim or an ending may wait for company, counted from when it
	// was queued (one queued behind a flush in progress that long goes in the next flush at
	// once); submits never wait: they go with what is queued. 0 takes what is already queued
	// and goes. Default 2ms: on 2 cores it cut Postgres CPU per no-op task by about 40 %
	// (docs/benchmarks.md) for at most 2 ms more per claim and per ending.
	BatchWait time.Duration `yaml:"batch_wait"`
}

func defaultWorker() Worker {
	return Worker{
		HeartbeatInterval: 5 * time.Second,
		TakeoverAfter:     30 * time.Second,
		ProgressInterval:  500 * time.Millisecond,
		ShutdownTimeout:   25 * time.Second,
		PollInterval:      100 * time.Millisecond,
		BatchMax:          128,
		BatchWait:         2 * time.Millisecond,
	}
}

// validate checks the intervals, the takeover window against the heartbeat, and batching.
func (w Worker) validate(bad func(string, ...any)) {
	if w.HeartbeatInterval <= 0 {
		bad("worker.heartbeat_interval must be positive")
	} else if w.TakeoverAfter < 3*w.HeartbeatInterval {
		bad("worker.takeover_after (%s) must be at least 3× worker.heartbeat_interval (%s), or live tasks get taken over", w.TakeoverAfter, w.HeartbeatInterval)
	}
	if w.ProgressInterval <= 0 {
		bad("worker.progress_interval must be positive")
	}
	if w.ShutdownTimeout <= 0 {
		bad("worker.shutdown_timeout must be positive")
	}
	if w.BatchMax < 1 || w.BatchWait < 0 || w.BatchWait > time.Second {
		bad("worker.batch_max must be at least 1 and worker.batch_wait between 0 and 1s")
	}
	if w.PollInterval < 10*time.Millisecond {
		bad("worker.poll_interval must be at least 10ms, got %s", w.PollInterval)
	}
}
