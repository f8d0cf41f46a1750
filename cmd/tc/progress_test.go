package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/client"
	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/task"
)

func TestOrdinalsReadAsEnglish(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{1: "1st", 2: "2nd", 3: "3rd", 4: "4th", 11: "11th", 12: "12th", 13: "13th", 21: "21st", 102: "102nd", 111: "111th"} {
		if got := ordinal(n); got != want {
			t.Errorf("ordinal(%d) = %q, want %q", n, got, want)
		}
	}
}

// tc prints the figures the server served, not figures of its own: the line shows the rate
// and ETA of the view even when the rows did not move between two updates of tc's.
func TestLineProgressShowsTheServersFigures(t *testing.T) {
	t.Parallel()
	now := time.Now()
	eta := now.Add(90 * time.Second)
	start := now.Add(2 * time.Minute)
	var out bytes.Buffer
	l := newLineProgress(&out, msg.EN)
	l.update(&client.Task{View: task.View{ID: "tsk_1", Status: client.StatusPending,
		Wait: &task.Wait{Position: 3, Ahead: 2, ExpectedStart: &start}}})
	l.update(&client.Task{View: task.View{ID: "tsk_1", Status: client.StatusRunning,
		Progress: task.Progress{Current: 100, Total: 1000, Percent: 10, RatePerS: 10, ETA: &eta}}})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines: %q", lines)
	}
	if !strings.HasPrefix(lines[0], "tsk_1 PENDING 3rd in line, starts in ~1m5") && !strings.HasPrefix(lines[0], "tsk_1 PENDING 3rd in line, starts in ~2m0s") {
		t.Errorf("waiting line: %q", lines[0])
	}
	if !strings.HasPrefix(lines[1], "tsk_1 RUNNING 10% 100/1000 rows, 10 rows/s, ETA 1m") {
		t.Errorf("running line: %q", lines[1])
	}
	if got := inLine(msg.EN, &client.Task{View: task.View{Wait: &task.Wait{Position: 1}}}, now); got != "1st in line, start unknown (no recent work in the queue)" {
		t.Errorf("no pace: %q", got)
	}
	if got := speed(msg.EN, &client.Task{View: task.View{Progress: task.Progress{Current: 5}}}, now); got != "" {
		t.Errorf("no rate served, yet tc shows %q", got)
	}
}

// tc show prints a waiting task's place and a running task's speed from the view.
func TestShowPrintsThePlaceInLineAndTheSpeed(t *testing.T) {
	t.Parallel()
	start := time.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339)
	eta := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch strings.TrimPrefix(r.URL.Path, "/api/v1/tasks/") {
		case "tsk_wait":
			fmt.Fprintf(w, `{"id":"tsk_wait","type":"import:customers","status":"PENDING","wait":{"position":2,"ahead":1,"expected_start":%q}}`, start)
		default:
			fmt.Fprintf(w, `{"id":"tsk_run","type":"import:customers","status":"RUNNING","progress":{"current":50,"total":100,"percent":50,"rate_per_s":2.5,"eta":%q}}`, eta)
		}
	}))
	t.Cleanup(srv.Close)
	code, out, errs := runTC(t, srv.URL, "good-token-0123456789", "show", "tsk_wait")
	if code != 0 || !strings.Contains(out, "queue 2nd in line, starts in ~9m5") && !strings.Contains(out, "queue 2nd in line, starts in ~10m0s") {
		t.Errorf("show waiting: %d %q %q", code, out, errs)
	}
	code, out, errs = runTC(t, srv.URL, "good-token-0123456789", "show", "tsk_run")
	if code != 0 || !strings.Contains(out, "speed 2 rows/s, ETA 59m5") && !strings.Contains(out, "speed 2 rows/s, ETA 1h0m0s") {
		t.Errorf("show running: %d %q %q", code, out, errs)
	}
}
