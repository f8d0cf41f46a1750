// Command taskcenter runs the async task center: the REST API, the workers and the scheduler,
// in any combination per process.
//
//	taskcenter serve [--config FILE] [--roles api,worker,scheduler|all]
//	taskcenter migrate [--config FILE]
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "taskcenter:", err)
		os.Exit(1)
	}
}
