package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
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

	raw, rawRSS, err := b.child("raw-write", "-rows", fmt.Sprint(n))
	if err != nil {
		return Figure{}, err
	}

	svc, err := b.startService()
	if err != nil {
		return Figure{}, err
	}
	var sub struct{ Task taskState }
	start := time.Now()
	b.profile(svc, "export", time.Second)
	if code, err := svc.call("POST", "/api/v1/exports", map[string]any{"type": "customers"}, &sub); err != nil || code != 202 {
		svc.stop()
		return Figure{}, fmt.Errorf("submit: %d %v", code, err)
	}
	final, err := svc.waitTerminal(sub.Task.ID, 10*time.Minute)
	took := time.Since(start)
	rss, _ := svc.stop()
	if err != nil {
		return Figure{}, err
	}
	if final.Status != "SUCCESS" {
		return Figure{}, fmt.Errorf("export ended %s: %+v\n%s", final.Status, final.Error, svc.logs)
	}
	ratio := took.Seconds() / raw["seconds"]
	return Figure{
		Name:     fmt.Sprintf("export %d rows", n),
		Measure:  map[string]float64{"seconds": took.Seconds(), "peak_rss_mb": rss},
		Baseline: map[string]float64{"seconds": raw["seconds"], "peak_rss_mb": rawRSS},
		Ratio:    ratio,
		Target:   "≤1.5× raw write, ≤150 MB",
		Met:      ratio <= 1.5 && rss <= 150,
	}, nil
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

func runRaw(_ context.Context, mode string, args []string, stdout io.Writer) error {
	switch mode {
	case "raw-write":
		return rawWrite(args, stdout)
	case "raw-read":
		return rawRead(args, stdout)
	case "raw-asynq":
		return rawAsynq(args, stdout)
	}
	return fmt.Errorf("unknown raw mode %s", mode)
}
