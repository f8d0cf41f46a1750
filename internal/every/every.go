// Package every runs a function now and then at a fixed interval until its context ends: the
// loop of the process's background chores (the scratch sweep, dependency probes, keeping
// asynq's queue list).
package every

import (
	"context"
	"time"
)

// Run calls fn now and then every interval until ctx ends. A call that runs long delays the
// next one (ticks do not pile up).
func Run(ctx context.Context, interval time.Duration, fn func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		fn(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
