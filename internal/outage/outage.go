// Package outage follows the availability of the service's dependencies (Postgres, Redis, the
// identity provider, the object store, webhook receivers) so an outage is reported the way an
// operator wants to read it at 3 a.m.: one WARN line when it starts, one summary line when it
// ends (how long, how many operations failed), and metrics for everything in between, instead
// of an ERROR line per failed call. Each dependency has a tracker of its own: its own lines,
// its own dependency label.
package outage

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/taskcenter/taskcenter/internal/every"
)

// Observer is told about state changes and failures (metrics).
type Observer interface {
	DependencyUp(name string, up bool)
	DependencyError(name string)
}

// Tracker is one dependency's availability. The zero value is not usable; use New.
type Tracker struct {
	name     string
	what     string // how the log lines name it: the name, or the name and the target
	logger   *slog.Logger
	observer Observer
	target   bool // one target of a dependency with many: no up/down series of its own

	mu         sync.Mutex
	down       bool
	since      time.Time
	failures   int
	suppressed int
	lastErr    string
}

// New returns a tracker for the dependency name (its dependency label); observer may be nil.
func New(name string, logger *slog.Logger, observer Observer) *Tracker {
	t := &Tracker{name: name, what: name, logger: logger, observer: observer}
	if observer != nil {
		observer.DependencyUp(name, true)
	}
	return t
}

// NewTarget returns a tracker for one target of a dependency that has many (a webhook
// receiver, by host): its lines name the target, its failed operations count against the
// dependency's name, and it reports no up or down of its own — one receiver being down is
// its owner's outage, not the service's.
func NewTarget(name, target string, logger *slog.Logger, observer Observer) *Tracker {
	return &Tracker{name: name, what: name + " " + target, logger: logger.With("target", target), observer: observer, target: true}
}

// Name is the dependency's name.
func (t *Tracker) Name() string { return t.name }

// Fail records a failed operation. The first failure of an outage logs one WARN line.
func (t *Tracker) Fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.observer != nil {
		t.observer.DependencyError(t.name)
	}
	t.failures++
	if err != nil {
		t.lastErr = err.Error()
	}
	if t.down {
		return
	}
	t.down, t.since, t.failures, t.suppressed = true, time.Now(), 1, 0
	if t.observer != nil && !t.target {
		t.observer.DependencyUp(t.name, false)
	}
	t.logger.Warn(t.what+" is unreachable; failures are counted until it is back", "dependency", t.name, "err", t.lastErr)
}

// OK records a successful operation. The first success after an outage logs its summary.
func (t *Tracker) OK() { t.okSince(time.Time{}) }

// okSince records the success of an operation that began at start (zero: just now). One that
// began before the outage's first failure ends nothing: a probe in flight when the
// dependency went away can still be answered (a server shutting down finishes its requests),
// and the failure is the newer news.
func (t *Tracker) okSince(start time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.down || !start.IsZero() && start.Before(t.since) {
		return
	}
	t.down = false
	if t.observer != nil && !t.target {
		t.observer.DependencyUp(t.name, true)
	}
	t.logger.Info(t.what+" is reachable again", "dependency", t.name, "outage", time.Since(t.since).Round(time.Millisecond),
		"failed_operations", t.failures, "log_lines_held_back", t.suppressed, "last_error", t.lastErr)
}

// Down reports whether the dependency is in an outage.
func (t *Tracker) Down() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.down
}

// Suppress reports whether a log line about the dependency should be held back because an
// outage is already reported; held-back lines are counted in the summary.
func (t *Tracker) Suppress() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.down {
		t.suppressed++
	}
	return t.down
}

// Probe checks the dependency with ping every interval until ctx ends, feeding the tracker.
// A probe is what notices an outage (and its end) when nothing else is calling.
func (t *Tracker) Probe(ctx context.Context, interval time.Duration, ping func(context.Context) error) {
	every.Run(ctx, interval, func(ctx context.Context) {
		pctx, cancel := context.WithTimeout(ctx, interval)
		start := time.Now()
		err := ping(pctx)
		cancel()
		switch {
		case ctx.Err() != nil:
		case err != nil:
			t.Fail(err)
		default:
			t.okSince(start)
		}
	})
}
