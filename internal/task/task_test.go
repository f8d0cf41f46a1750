package task

import (
	"strings"
	"testing"
)

func TestOutcomeFollowsTheCounts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		counts   Counts
		cutShort bool
		status   Status
		code     string
	}{
		{"every row accepted", Counts{Total: 20000, Success: 20000}, false, StatusSuccess, ""},
		{"some rows rejected", Counts{Total: 15, Success: 14, Failed: 1}, false, StatusPartialSuccess, ""},
		{"every row rejected", Counts{Total: 15, Failed: 15}, false, StatusFailed, CodeAllRowsRejected},
		{"every row rejected, file cut short", Counts{Total: 15, Failed: 15}, true, StatusFailed, CodeAllRowsRejected},
		{"accepted rows but cut short", Counts{Total: 10, Success: 10}, true, StatusPartialSuccess, ""},
		{"a task that counts no rows", Counts{}, false, StatusSuccess, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if st, code := Outcome(tt.counts, tt.cutShort); st != tt.status || code != tt.code {
				t.Fatalf("Outcome(%+v, %v) = %s %q, want %s %q", tt.counts, tt.cutShort, st, code, tt.status, tt.code)
			}
		})
	}
}

func TestOnlyATaskARetryCanChangeIsOfferedOne(t *testing.T) {
	t.Parallel()
	// Failed on its input: the same input would fail the same way.
	for _, code := range []string{CodeAllRowsRejected, "missing_columns", "no_rows", "bad_params", ""} {
		if CanRetry(StatusFailed, code) {
			t.Fatalf("a task that failed with %q may be retried; the same input would fail again", code)
		}
	}
	// Failed on faults, timed out, cancelled: a retry can change the outcome.
	if !CanRetry(StatusFailed, CodeRetriesExhausted) {
		t.Fatal("a task whose retries ran out on faults cannot be retried")
	}
	for _, st := range []Status{StatusTimeout, StatusCancelled} {
		if !CanRetry(st, "timeout") || !CanRetry(st, "") {
			t.Fatalf("%s cannot be retried", st)
		}
	}
	for _, st := range []Status{StatusPending, StatusRunning, StatusRetryWait, StatusSuccess, StatusPartialSuccess} {
		if CanRetry(st, "") {
			t.Fatalf("%s can be retried", st)
		}
	}
}

func TestEveryStatusHasOneEventName(t *testing.T) {
	t.Parallel()
	seen := map[string]Status{}
	for _, st := range AllStatuses {
		name := EventName(st, false)
		if name == "" {
			t.Fatalf("%s has no event name", st)
		}
		if other, dup := seen[name]; dup {
			t.Fatalf("%s and %s share the event name %s", st, other, name)
		}
		seen[name] = st
	}
	if EventName(StatusRunning, true) != EventCancelRequested || EventName(StatusCancelled, true) != EventCancelled {
		t.Fatal("a cancel requested of a running task is task.cancel_requested; an ended one keeps its name")
	}
}

func TestTerminalSQLListsTheTerminalStatuses(t *testing.T) {
	t.Parallel()
	var want []string
	for _, st := range AllStatuses {
		if st.Terminal() {
			want = append(want, "'"+string(st)+"'")
		}
	}
	if got := "(" + strings.Join(want, ", ") + ")"; TerminalSQL != got {
		t.Fatalf("TerminalSQL = %s, want %s", TerminalSQL, got)
	}
}

func TestCauseNamesWhoseTurnItIs(t *testing.T) {
	for _, c := range []struct {
		status Status
		code   string
		want   Cause
	}{
		{StatusSuccess, "", CauseNone},
		{StatusPartialSuccess, "", CauseNone},
		{StatusFailed, CodeRetriesExhausted, CauseFault},
		{StatusFailed, CodeAllRowsRejected, CauseBadInput},
		{StatusFailed, "missing_columns", CauseBadInput},
		{StatusFailed, "bad_params", CauseBadInput},
		{StatusTimeout, "timeout", CauseTimeout},
		{StatusCancelled, "", CauseCancelled},
	} {
		if got := CauseOf(c.status, c.code); got != c.want {
			t.Errorf("CauseOf(%s, %q) = %s, want %s", c.status, c.code, got, c.want)
		}
	}
}
