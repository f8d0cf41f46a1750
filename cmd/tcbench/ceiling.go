package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	"github.com/xuri/excelize/v2"

	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/internal/sheet"
)

// runRaw runs one raw baseline in this child process (tcbench raw-write|raw-ceiling|raw-asynq
// ...): the ceiling a dependency sets (excelize's stream writer, the reader and COPY, asynq's
// own drain) that a benchmark compares taskcenter with. Each prints its report as JSON; its
// peak RSS is its own.
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

// rawCeiling is the import's ceiling: the project's own reader (internal/sheet) parsing the
// file while its rows stream, through pgx's COPY FROM STDIN, into an UNLOGGED staging table
// with no index. No validation, no upsert, no bookkeeping: no import of the file can be
// faster on this host. Creating the table is not timed. With -into-customers it is the
// table's floor instead: the same, then one INSERT … ON CONFLICT of every row into the
// customers table (its indexes, its WAL), the least any import into that table costs.
func rawCeiling(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("raw-ceiling", flag.ContinueOnError)
	path := fs.String("file", "", "the .xlsx or .csv to read")
	url := fs.String("pg", "", "Postgres URL (its search_path is where the staging table goes)")
	into := fs.Bool("into-customers", false, "then move the rows into the (empty) customers table with one INSERT … ON CONFLICT, timed too: "+
		"the least the real table costs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, *url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `DROP TABLE IF EXISTS import_ceiling;
		CREATE UNLOGGED TABLE import_ceiling (code text, name text, phone text, email text, city text, level text)`); err != nil {
		return fmt.Errorf("create the staging table: %w", err)
	}

	start := time.Now()
	f, err := os.Open(*path)
	if err != nil {
		return err
	}
	file := &localFile{f}
	info, err := f.Stat()
	if err != nil {
		return err
	}
	format, err := sheet.FormatOf(*path)
	if err != nil {
		return err
	}
	// The declared size is trusted: counting the rows is a check of the import's, not part
	// of the least work of reading them.
	ins, err := sheet.Inspect(file, info.Size(), sheet.Choice{Format: format}, sheet.Options{Count: sheet.CountNever})
	if err != nil {
		return err
	}
	rd, err := sheet.Open(file, ins, sheet.Limits{}, os.TempDir())
	if err != nil {
		f.Close()
		return err
	}
	defer rd.Close()
	columns := []string{"code", "name", "phone", "email", "city", "level"} // the file's six, as text
	n, err := conn.CopyFrom(ctx, pgx.Identifier{"import_ceiling"}, columns, &ceilingRows{rd: rd, vals: make([]any, len(columns))})
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	if *into {
		if _, err := conn.Exec(ctx, `INSERT INTO customers (code, name, phone, email, city, level, last_import_task_id, last_import_row)
			SELECT code, name, phone, email, city, level, 0, 0 FROM import_ceiling
			ON CONFLICT (code) DO UPDATE SET name = EXCLUDED.name, phone = EXCLUDED.phone, email = EXCLUDED.email, city = EXCLUDED.city,
			       level = EXCLUDED.level, last_import_task_id = EXCLUDED.last_import_task_id, last_import_row = EXCLUDED.last_import_row, updated_at = now()
			WHERE customers.last_import_task_id IS DISTINCT FROM EXCLUDED.last_import_task_id`); err != nil {
			return fmt.Errorf("move into customers: %w", err)
		}
	}
	return json.NewEncoder(stdout).Encode(map[string]float64{"seconds": time.Since(start).Seconds(), "rows": float64(n), "peak_rss_mb": vmHWM(os.Getpid())})
}

// ceilingRows feeds the sheet's data rows (below row 1, the header) to CopyFrom.
type ceilingRows struct {
	rd   *sheet.Reader
	vals []any
}

func (c *ceilingRows) Next() bool {
	for c.rd.Next() {
		n, cells := c.rd.Row()
		if n == 1 || sheet.Blank(cells) {
			continue
		}
		for i := range c.vals {
			v := ""
			if i < len(cells) {
				v = cells[i]
			}
			c.vals[i] = v
		}
		return true
	}
	return false
}

func (c *ceilingRows) Values() ([]any, error) { return c.vals, nil }

func (c *ceilingRows) Err() error { return c.rd.Err() }

// localFile is a local file as sheet.Open reads an upload.
type localFile struct{ *os.File }

func (f *localFile) Size() int64 {
	info, err := f.Stat()
	if err != nil {
		return 0
	}
	return info.Size()
}

var _ sheet.File = (*localFile)(nil)

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
	return json.NewEncoder(stdout).Encode(map[string]float64{"seconds": time.Since(start).Seconds(), "peak_rss_mb": vmHWM(os.Getpid()),
		"cpu_seconds": float64(procCPU(os.Getpid())) / 100})
}

// rawAsynq is the baseline, run as asynq's users run it: a client enqueues n no-op jobs from
// 16 goroutines; then a server with the given concurrency drains them on the same Redis. It
// reports both rates; the processed rate is the baseline.
func rawAsynq(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("raw-asynq", flag.ContinueOnError)
	n := fs.Int("n", 20000, "jobs")
	concurrency := fs.Int("concurrency", 32, "server concurrency")
	addr := fs.String("redis", config.Default().Redis.Addr, "redis address")
	db := fs.Int("db", 15, "redis database")
	pgURL := fs.String("pg", "", "with a database url: each job claims and ends its row there (the lease floor, leasefloor.go)")
	floorKind := fs.String("floor", floorLean, "with -pg: lean (a six-column row), runs (and a run row per attempt) or model (taskcenter's own tables, migrated)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opt := asynq.RedisClientOpt{Addr: *addr, DB: *db}
	client := asynq.NewClient(opt)
	defer client.Close()
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		errs atomic.Int64
	)
	start := time.Now()
	for range 16 {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(*n); i = next.Add(1) {
				if _, err := client.Enqueue(asynq.NewTask("noop", []byte(`{}`)), asynq.Queue("bare"), asynq.TaskID(fmt.Sprint("noop-", i))); err != nil {
					errs.Add(1)
				}
			}
		})
	}
	wg.Wait()
	enqueued := time.Since(start)
	if errs.Load() > 0 {
		return fmt.Errorf("%d enqueues failed", errs.Load())
	}
	var floor *leaseFloor
	if *pgURL != "" {
		f, closeFloor, err := openLeaseFloor(context.Background(), *pgURL, *n, *floorKind)
		if err != nil {
			return err
		}
		defer closeFloor()
		floor = f
	}
	var processed atomic.Int64
	done := make(chan struct{})
	srv := asynq.NewServer(opt, asynq.Config{Concurrency: *concurrency, Queues: map[string]int{"bare": 1}, LogLevel: asynq.WarnLevel})
	mux := asynq.NewServeMux()
	mux.HandleFunc("noop", func(ctx context.Context, _ *asynq.Task) error {
		if floor != nil {
			if err := floor.run(ctx); err != nil {
				return err
			}
		}
		if processed.Add(1) == int64(*n) {
			close(done)
		}
		return nil
	})
	cpu0 := sampleCPU(os.Getpid())
	drainStart := time.Now()
	if err := srv.Start(mux); err != nil {
		return err
	}
	defer srv.Shutdown()
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		return fmt.Errorf("only %d of %d jobs processed", processed.Load(), *n)
	}
	drained := time.Since(drainStart)
	cpu := sampleCPU(os.Getpid()).since(cpu0, *n)
	return json.NewEncoder(stdout).Encode(map[string]float64{"enqueue_per_second": float64(*n) / enqueued.Seconds(),
		"processed_per_second": float64(*n) / drained.Seconds(), "peak_rss_mb": vmHWM(os.Getpid()),
		"cpu_ms_per_task_process": cpu.taskcenter, "cpu_ms_per_task_postgres": cpu.postgres, "cpu_ms_per_task_redis": cpu.redis})
}
