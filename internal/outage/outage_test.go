package outage

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// An outage of any length is two log lines: its start and its end with a summary.
func TestAnOutageIsOneWarningAndOneSummary(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	tr := New("redis", slog.New(slog.NewJSONHandler(&buf, nil)), nil)
	for range 200 {
		tr.Fail(errors.New("dial tcp 127.0.0.1:6379: connection refused"))
		if !tr.Suppress() {
			t.Fatal("lines about a known outage must be held back")
		}
	}
	tr.OK()
	tr.OK()
	out := buf.String()
	if n := strings.Count(out, "\n"); n != 2 {
		t.Fatalf("%d log lines, want 2:\n%s", n, out)
	}
	if !strings.Contains(out, `"level":"WARN","msg":"redis is unreachable`) || !strings.Contains(out, `"failed_operations":200`) ||
		!strings.Contains(out, `"log_lines_held_back":200`) {
		t.Fatalf("log:\n%s", out)
	}
	if tr.Down() || tr.Suppress() {
		t.Fatal("still down after recovery")
	}
}

func TestProbeNoticesOutageAndRecovery(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	tr := New("postgres", slog.New(slog.NewJSONHandler(&buf, nil)), nil)
	var broken atomic.Bool
	broken.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go tr.Probe(ctx, 10*time.Millisecond, func(context.Context) error {
		if broken.Load() {
			return errors.New("connection refused")
		}
		return nil
	})
	waitFor(t, tr.Down)
	broken.Store(false)
	waitFor(t, func() bool { return !tr.Down() })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
