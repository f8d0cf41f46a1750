package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// binary is the taskcenter command built once for the tests that kill real processes.
var binary string

func TestMain(m *testing.M) {
	// These tests spend most of their time waiting on what they watch (processes, Chromium,
	// servers, a task's next status), not computing: at go test's default, as many at once
	// as there are CPUs, the CPUs sat half idle. Twice as many, unless -parallel says.
	flag.Parse()
	parallel := false
	flag.Visit(func(f *flag.Flag) { parallel = parallel || f.Name == "test.parallel" })
	if !parallel {
		flag.Set("test.parallel", strconv.Itoa(2*runtime.GOMAXPROCS(0))) //nolint:errcheck // a valid number
	}
	dir, err := os.MkdirTemp("", "taskcenter-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "taskcenter")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build taskcenter for the process tests:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// A port that is taken is a configuration error: the real binary says which address and
// why, exits non-zero, and starts nothing first — the listeners are bound before the
// database wait and before any worker or scheduler, so a start with an unreachable database
// still ends at once instead of waiting for it, and no half-started asynq server is left to
// panic on a closed Redis client.
func TestServeOnATakenPortExitsAtOnceSayingWhy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for _, c := range []struct{ name, roles, key string }{
		{"api address", "all", "TASKCENTER_HTTP_ADDR"},
		{"metrics address of a worker", "worker", "TASKCENTER_METRICS_ADDR"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			taken, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer taken.Close()
			addr := taken.Addr().String()
			vars := map[string]string{c.key: addr}
			if c.name == "api address" {
				// Nothing listens here: were the database awaited first, the process would wait.
				closed, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				closed.Close()
				vars["TASKCENTER_DATABASE_URL"] = "postgres://taskcenter:taskcenter@" + closed.Addr().String() + "/taskcenter?sslmode=disable"
			}
			out, err := e.withVars(vars).runBinary(t, 60*time.Second, "serve", "--roles", c.roles)
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("serve on a taken port: %v, want a non-zero exit\n%s", err, out)
			}
			want := "listen tcp " + addr + ": bind: address already in use"
			if !strings.Contains(out, want) || !strings.Contains(out, c.key) {
				t.Fatalf("the error does not say %q and name %s:\n%s", want, c.key, out)
			}
			for _, started := range []string{"panic", "workers started", "scheduler started", "waiting for Postgres", "listening"} {
				if strings.Contains(out, started) {
					t.Fatalf("%q before refusing the taken port:\n%s", started, out)
				}
			}
		})
	}
}

// runBinary runs the built taskcenter with the env's variables until it exits (killed after
// limit) and returns what it wrote to stdout and stderr.
func (e *env) runBinary(t *testing.T, limit time.Duration, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	for k, v := range e.vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "PATH="+os.Getenv("PATH"), "HOME="+os.Getenv("HOME"))
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("taskcenter %s did not exit within %s:\n%s", strings.Join(args, " "), limit, out)
	}
	return string(out), err
}
