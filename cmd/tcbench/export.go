package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// benchExport: export N customers through the service (submit → SUCCESS) beside excelize's
// StreamWriter writing the same rows in a bare process.
func benchExport(ctx context.Context, b *bench) (Figure, error) {
	n := b.exportRows
	// A run that began with the submit benchmark leaves its tasks waiting, over the queue's
	// backlog limit: start from an empty queue, as the other benchmarks do.
	if err := b.emptyQueueAnd(ctx, "customers, tasks"); err != nil {
		return Figure{}, err
	}
	if _, err := b.db.ExecContext(ctx, `
		INSERT INTO customers (code, name, phone, email, city, level, created_at, updated_at)
		SELECT 'C' || lpad(g::text, 7, '0'), 'Customer ' || g, '138' || lpad(g::text, 8, '0'), 'c' || g || '@example.com',
		       'Shanghai', 'gold', timestamptz '2026-01-01' + g * interval '1 second', timestamptz '2026-01-01' + g * interval '1 second'
		FROM generate_series(1, ?) g`, n); err != nil {
		return Figure{}, err
	}
	if _, err := b.db.ExecContext(ctx, "VACUUM ANALYZE customers"); err != nil {
		return Figure{}, err
	}

	// Rounds alternate the bare write and the export (raw, export, raw, export, …) against
	// one service, so both see the same host; the medians are compared.
	svc, err := b.startService()
	if err != nil {
		return Figure{}, err
	}
	var raws, exports, rawRSS, waits, runs, rawCPU, cpu []float64
	for i := range b.rounds {
		raw, rss, err := b.child("raw-write", "-rows", fmt.Sprint(n))
		if err != nil {
			svc.stop()
			return Figure{}, err
		}
		raws, rawRSS, rawCPU = append(raws, raw["seconds"]), append(rawRSS, rss), append(rawCPU, raw["cpu_seconds"])
		cpu0 := procCPU(svc.cmd.Process.Pid)
		took, wait, run, err := b.exportOnce(ctx, svc, fmt.Sprintf("export-%d", i))
		cpu = append(cpu, float64(procCPU(svc.cmd.Process.Pid)-cpu0)/100) // clock ticks of 10 ms
		if err != nil {
			svc.stop()
			return Figure{}, err
		}
		exports, waits, runs = append(exports, took.Seconds()), append(waits, wait), append(runs, run)
	}
	rss, _ := svc.stop()
	raw, took := median(raws), median(exports)
	ratio := took / raw
	return Figure{
		Name:     fmt.Sprintf("export %d rows", n),
		Measure:  map[string]float64{"seconds": took, "peak_rss_mb": rss, "cpu_seconds": median(cpu)},
		Baseline: map[string]float64{"seconds": raw, "peak_rss_mb": slices.Max(rawRSS), "cpu_seconds": median(rawCPU)},
		Ratio:    ratio,
		Target:   "≤1.0× raw write, ≤150 MB",
		Met:      ratio <= 1.0 && rss <= 150,
		Note: fmt.Sprintf("medians of %d alternating rounds: raw write %s s, export %s s (queue wait %s s, run %s s); CPU: raw write %s s, the service %s s",
			b.rounds, seconds(raws), seconds(exports), seconds(waits), seconds(runs), seconds(rawCPU), seconds(cpu)),
	}, nil
}

// exportOnce exports every customer through svc (submit → SUCCESS) and returns the time, and
// the task's wait in the queue and its run as its row records them (seconds).
func (b *bench) exportOnce(ctx context.Context, svc *service, profile string) (took time.Duration, wait, run float64, err error) {
	var sub struct{ Task taskState }
	start := time.Now()
	b.profile(svc, profile, 2*time.Second)
	if code, err := svc.call("POST", "/api/v1/exports", map[string]any{"type": "customers"}, &sub); err != nil || code != 202 {
		return 0, 0, 0, fmt.Errorf("submit: %d %v", code, err)
	}
	// Polled every 100 ms: the end is read from the task's row, and fewer polls take less
	// of the service's CPU from the export.
	final, err := svc.pollTerminal(sub.Task.ID, 10*time.Minute, 100*time.Millisecond)
	if err != nil {
		return 0, 0, 0, err
	}
	if final.Status != "SUCCESS" {
		return 0, 0, 0, fmt.Errorf("export ended %s: %+v\n%s", final.Status, final.Error, svc.logs)
	}
	// The end is the task's finished_at (one clock: the database runs on this host), not
	// when a poll saw it.
	var end time.Time
	if err := b.db.NewRaw(`SELECT finished_at, extract(epoch FROM started_at - created_at), extract(epoch FROM finished_at - started_at) FROM tasks WHERE task_no = ?`,
		sub.Task.ID).Scan(ctx, &end, &wait, &run); err != nil {
		return 0, 0, 0, err
	}
	return end.Sub(start), wait, run, nil
}

// median is the middle of xs (the mean of the two middle ones for an even count).
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// seconds lists times for a note: "1.12 1.08 1.15".
func seconds(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, " ")
}
