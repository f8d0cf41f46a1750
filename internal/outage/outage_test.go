package outage

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/testenv"
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

// Each dependency is its own: an identity provider's outage is logged and counted as the
// identity provider's, and Postgres stays up. A webhook receiver's outage names its host,
// counts against the webhook targets and leaves no up/down series: one customer's dead
// receiver is not the service's outage.
func TestEachDependencyIsItsOwn(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	obs := &testenv.Dependencies{}
	pg := New("postgres", logger, obs)
	idp := New("identity_provider", logger, obs)
	hook := NewTarget("webhook_target", "hooks.example.com:443", logger, obs)

	for range 3 {
		idp.Fail(errors.New("dial tcp 127.0.0.1:18500: connect: connection refused"))
		hook.Fail(errors.New("HTTP 503"))
	}
	pg.OK()
	if pg.Down() || !idp.Down() || !hook.Down() {
		t.Fatalf("down: postgres %v, identity provider %v, webhook target %v", pg.Down(), idp.Down(), hook.Down())
	}
	up, errs := obs.Seen()
	if !maps.Equal(up, map[string]bool{"postgres": true, "identity_provider": false}) {
		t.Fatalf("dependency_up: %v", up)
	}
	if !maps.Equal(errs, map[string]int{"identity_provider": 3, "webhook_target": 3}) {
		t.Fatalf("dependency_errors_total: %v", errs)
	}
	out := buf.String()
	for _, want := range []string{
		`"msg":"identity_provider is unreachable; failures are counted until it is back","dependency":"identity_provider"`,
		`"msg":"webhook_target hooks.example.com:443 is unreachable; failures are counted until it is back","target":"hooks.example.com:443","dependency":"webhook_target"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "postgres is unreachable") || strings.Count(out, "\n") != 2 {
		t.Fatalf("want exactly the two outages' first lines:\n%s", out)
	}
	hook.OK()
	if !strings.Contains(buf.String(), `"msg":"webhook_target hooks.example.com:443 is reachable again"`) {
		t.Fatalf("no summary for the receiver:\n%s", buf.String())
	}
}

// A probe answered after the dependency failed, for a ping sent before it did (a server
// shutting down finishes the requests it has), does not end the outage; one sent after does.
func TestAProbeSentBeforeTheFailureEndsNoOutage(t *testing.T) {
	t.Parallel()
	tr := New("identity_provider", slog.New(slog.DiscardHandler), nil)
	sent := time.Now()
	time.Sleep(time.Millisecond)
	tr.Fail(errors.New("connection refused"))
	tr.okSince(sent)
	if !tr.Down() {
		t.Fatal("a ping sent before the failure ended the outage")
	}
	tr.okSince(time.Now())
	if tr.Down() {
		t.Fatal("a ping sent after the failure did not end the outage")
	}
}
