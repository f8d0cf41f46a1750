package task_test

import (
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/task"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func TestSpeedIsTheRateBetweenTwoSamplesAndTheTimeLeftAtIt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		from, to task.Sample
		total    int64
		rate     float64
		eta      *time.Time
	}{
		{"moving with a known total", task.Sample{Current: 100, At: t0}, task.Sample{Current: 300, At: t0.Add(10 * time.Second)}, 1300,
			20, ptr(t0.Add(60 * time.Second))},
		{"unknown total has a rate and no ETA", task.Sample{At: t0}, task.Sample{Current: 50, At: t0.Add(5 * time.Second)}, 0, 10, nil},
		{"total reached has no ETA", task.Sample{At: t0}, task.Sample{Current: 50, At: t0.Add(5 * time.Second)}, 50, 10, nil},
		{"no time between samples", task.Sample{Current: 1, At: t0}, task.Sample{Current: 9, At: t0}, 100, 0, nil},
		{"no movement", task.Sample{Current: 9, At: t0}, task.Sample{Current: 9, At: t0.Add(time.Minute)}, 100, 0, nil},
		{"samples out of order", task.Sample{Current: 9, At: t0.Add(time.Minute)}, task.Sample{Current: 1, At: t0}, 100, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rate, eta := task.Speed(tc.from, tc.to, tc.total)
			if rate != tc.rate || !sameTime(eta, tc.eta) {
				t.Errorf("Speed = %v, %v; want %v, %v", rate, eta, tc.rate, tc.eta)
			}
		})
	}
}

func TestWaitOfStartsATaskAfterItsPlaceAtTheQueuesPace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		ahead    int64
		finished int64
		retryAt  *time.Time
		start    *time.Time
	}{
		// 20 tasks in 10 minutes: one every 30 s; third in line starts after three more finish.
		{"third in line", 2, 20, nil, ptr(t0.Add(90 * time.Second))},
		{"first in line", 0, 20, nil, ptr(t0.Add(30 * time.Second))},
		{"nothing finished lately: unknown", 5, 0, nil, nil},
		{"a retry waits for its time", 0, 20, ptr(t0.Add(5 * time.Minute)), ptr(t0.Add(5 * time.Minute))},
		{"a retry already due waits for its place", 1, 20, ptr(t0.Add(-time.Minute)), ptr(t0.Add(60 * time.Second))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := task.WaitOf(tc.ahead, tc.finished, 10*time.Minute, tc.retryAt, t0)
			if w.Position != tc.ahead+1 || w.Ahead != tc.ahead || !sameTime(w.ExpectedStart, tc.start) {
				t.Errorf("WaitOf = %+v (start %v); want position %d, start %v", w, w.ExpectedStart, tc.ahead+1, tc.start)
			}
		})
	}
	if w := task.WaitOf(3, 7, 0, nil, t0); w.ExpectedStart != nil {
		t.Errorf("an empty window gives a start: %v", w.ExpectedStart)
	}
}

func ptr(t time.Time) *time.Time { return &t }

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}
