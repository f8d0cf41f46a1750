// Command tc is taskcenter's command line: submit imports and exports, follow them with a
// progress bar, list, inspect, cancel, retry and download, from a terminal or a script. It
// talks to the REST API only (through the client package), so it needs no access to
// Postgres or Redis and carries none of the server. Run `tc help` for the commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], env{
		getenv: os.Getenv, stdout: os.Stdout, stderr: os.Stderr,
		tty: term.IsTerminal(int(os.Stderr.Fd())),
	})
	stop()
	os.Exit(code)
}
