package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/xuri/excelize/v2"
)

// benchExport: export N customers through the service (submit → SUCCESS) beside excelize's
// StreamWriter writing the same rows in a bare process.
func benchExport(ctx context.Context, b *bench) (Figure, error) {
	n := b.exportRows
	// A run that began with the submit benchmark leaves its tasks waiting, over the queue's
	// backlog limit: start from an empty queue, as the other benchmarks do.
	if err := b.flushRedis(); err != nil {
		return Figure{}, err
	}
	if _, err := b.db.ExecContext(ctx, "TRUNCATE customers; TRUNCATE tasks CASCADE"); err != nil {
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
	var raws, exports, rawRSS []float64
	for i := range b.rounds {
		raw, rss, err := b.child("raw-write", "-rows", fmt.Sprint(n))
		if err != nil {
			svc.stop()
			return Figure{}, err
		}
		raws, rawRSS = append(raws, raw["seconds"]), append(rawRSS, rss)
		took, err := b.exportOnce(svc, fmt.Sprintf("export-%d", i))
		if err != nil {
			svc.stop()
			return Figure{}, err
		}
		exports = append(exports, took.Seconds())
	}
	rss, _ := svc.stop()
	raw, took := median(raws), median(exports)
	ratio := took / raw
	return Figure{
		Name:     fmt.Sprintf("export %d rows", n),
		Measure:  map[string]float64{"seconds": took, "peak_rss_mb": rss},
		Baseline: map[string]float64{"seconds": raw, "peak_rss_mb": slices.Max(rawRSS)},
		Ratio:    ratio,
		Target:   "≤1.0× raw write, ≤150 MB",
		Met:      ratio <= 1.0 && rss <= 150,
		Note:     fmt.Sprintf("medians of %d alternating rounds: raw write %s s, export %s s", b.rounds, seconds(raws), seconds(exports)),
	}, nil
}

// exportOnce exports every customer through svc (submit → SUCCESS) and returns the time.
func (b *bench) exportOnce(svc *service, profile string) (time.Duration, error) {
	var sub struct{ Task taskState }
	start := time.Now()
	b.profile(svc, profile, time.Second)
	if code, err := svc.call("POST", "/api/v1/exports", map[string]any{"type": "customers"}, &sub); err != nil || code != 202 {
		return 0, fmt.Errorf("submit: %d %v", code, err)
	}
	final, err := svc.waitTerminal(sub.Task.ID, 10*time.Minute)
	took := time.Since(start)
	if err != nil {
		return 0, err
	}
	if final.Status != "SUCCESS" {
		return 0, fmt.Errorf("export ended %s: %+v\n%s", final.Status, final.Error, svc.logs)
	}
	return took, nil
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

// rawWrite is the baseline: excelize's StreamWriter writing n rows shaped like the customer
// export to a temp file, nothing else.
func rawWrite(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("raw-write", flag.ContinueOnError)
	rows := fs.Int("rows", 100_000, "rows to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	tmp, err := os.CreateTemp("", "raw-write-*.xlsx")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	start := time.Now()
	f := excelize.NewFile()
	sw, err := f.NewStreamWriter("Sheet1")
	if err != nil {
		return err
	}
	header := []any{"code", "name", "phone", "email", "city", "level", "created_at", "updated_at"}
	if err := sw.SetRow("A1", header); err != nil {
		return err
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 1; i <= *rows; i++ {
		ts := base.Add(time.Duration(i) * time.Second).Format(time.RFC3339)
		row := []any{fmt.Sprintf("C%07d", i), fmt.Sprintf("Customer %d", i), fmt.Sprintf("138%08d", i),
			fmt.Sprintf("c%d@example.com", i), "Shanghai", "gold", ts, ts}
		cell, _ := excelize.CoordinatesToCellName(1, i+1)
		if err := sw.SetRow(cell, row); err != nil {
			return err
		}
	}
	if err := sw.Flush(); err != nil {
		return err
	}
	if _, err := f.WriteTo(tmp); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	tmp.Close()
	f.Close()
	return json.NewEncoder(stdout).Encode(map[string]float64{"seconds": time.Since(start).Seconds(), "peak_rss_mb": vmHWM(os.Getpid())})
}

func runRaw(ctx context.Context, mode string, args []string, stdout io.Writer) error {
	switch mode {
	case "raw-write":
		return rawWrite(args, stdout)
	case "raw-ceiling":
		return rawCeiling(ctx, args, stdout)
	case "raw-asynq":
		return rawAsynq(args, stdout)
	}
	return fmt.Errorf("unknown raw mode %s", mode)
}
