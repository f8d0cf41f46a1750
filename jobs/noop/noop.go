// Package noop is the bench:noop task type: it does nothing, so a run of them measures the
// task pipeline itself (submit, enqueue, claim, terminal write). It exists for benchmarks
// and is disabled unless the config enables it.
package noop

import (
	"context"

	"github.com/taskcenter/taskcenter/jobs"
)

// Type is the bench-only no-op task type.
const Type = "bench:noop"

// Handler does nothing and succeeds.
type Handler struct{}

// Type implements jobs.Handler.
func (Handler) Type() string { return Type }

// Run implements jobs.Handler.
func (Handler) Run(context.Context, *jobs.Run) (jobs.Result, error) { return jobs.Result{}, nil }
