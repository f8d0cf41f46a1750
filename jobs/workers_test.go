package jobs

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestAsynqLoggerHoldsBackRepeats(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := AsynqLogger(slog.New(slog.NewJSONHandler(&buf, nil)), nil)
	for range 50 {
		l.Error("Failed to forward scheduled tasks: connection refused")
	}
	l.Error("another problem")
	l.Info("shutting down")
	l.Info("shutting down")
	out := buf.String()
	if n := strings.Count(out, "Failed to forward"); n != 1 {
		t.Fatalf("a repeated error was logged %d times in the window, want once:\n%s", n, out)
	}
	if !strings.Contains(out, "another problem") || strings.Count(out, "shutting down") != 2 {
		t.Fatalf("distinct errors and info lines must all pass:\n%s", out)
	}
	// Past the window the message gets through again, with how many copies were held back.
	r := l.(asynqLogger).seen
	r.mu.Lock()
	for k, v := range r.last {
		v.at = v.at.Add(-repeatWindow - time.Second)
		r.last[k] = v
	}
	r.mu.Unlock()
	buf.Reset()
	l.Error("Failed to forward scheduled tasks: connection refused")
	if !strings.Contains(buf.String(), `"repeated":49`) {
		t.Fatalf("after the window: %s", buf.String())
	}
}
