// Command taskcenter runs the async task center: the REST API, the workers and the scheduler,
// in any combination per process.
//
//	taskcenter serve [--config FILE] [--roles api,worker,scheduler|all]
//	taskcenter migrate [--config FILE]
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"
)

func main() {
	// go-redis reports pool trouble through a package-level logger, once per failed dial; the
	// same outage reaches our own logs through the errors our code handles, so keep it quiet.
	redis.SetLogger(quietRedisLogger{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "taskcenter:", err)
		os.Exit(1)
	}
}

type quietRedisLogger struct{}

func (quietRedisLogger) Printf(ctx context.Context, format string, v ...any) {
	slog.DebugContext(ctx, fmt.Sprintf(format, v...), "component", "go-redis")
}
