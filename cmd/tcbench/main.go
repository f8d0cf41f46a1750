// Command tcbench measures taskcenter against the ceilings its dependencies set, in one run on
// one machine, and prints a table (and JSON) of ratios:
//
//	tcbench [-only export,...] [-json bench-results/latest.json]
//
// Each measured side runs in its own child process, so wall time and peak RSS (getrusage
// maxrss of the child) are measured the same way for taskcenter and for the raw baseline.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "tcbench:", err)
		os.Exit(1)
	}
}

// Figure is one measured row of the report.
type Figure struct {
	Name     string             `json:"name"`
	Measure  map[string]float64 `json:"measure"`
	Baseline map[string]float64 `json:"baseline,omitempty"`
	Ratio    float64            `json:"ratio,omitempty"` // taskcenter time / baseline time
	Target   string             `json:"target"`
	Met      bool               `json:"met"`
	Note     string             `json:"note,omitempty"`
}

type benchmark struct {
	name string
	run  func(ctx context.Context, b *bench) ([]Figure, error) // one row of the table each
}

// one makes a benchmark that reports a single row.
func one(run func(ctx context.Context, b *bench) (Figure, error)) func(ctx context.Context, b *bench) ([]Figure, error) {
	return func(ctx context.Context, b *bench) ([]Figure, error) {
		f, err := run(ctx, b)
		if err != nil {
			return nil, err
		}
		return []Figure{f}, nil
	}
}

// sized makes a benchmark that reports a single row from run over n rows or tasks.
func sized(run func(ctx context.Context, b *bench, n int) (Figure, error), n int) func(ctx context.Context, b *bench) ([]Figure, error) {
	return one(func(ctx context.Context, b *bench) (Figure, error) { return run(ctx, b, n) })
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	// Child modes: the raw baselines, run in their own process.
	if len(args) > 0 && strings.HasPrefix(args[0], "raw-") {
		return runRaw(ctx, args[0], args[1:], stdout)
	}
	fs := flag.NewFlagSet("tcbench", flag.ContinueOnError)
	only := fs.String("only", "", "comma-separated benchmarks to run (default all): "+strings.Join(names(), ","))
	jsonOut := fs.String("json", "bench-results/latest.json", "where to write the figures as JSON")
	exportRows := fs.Int("export-rows", 100_000, "rows in the export benchmark")
	importRows := fs.Int("import-rows", 300_000, "rows in the import benchmark (import-1m keeps its 1,000,000)")
	rounds := fs.Int("rounds", 3, "rounds of the export and import benchmarks: each round runs the baseline and then taskcenter, and the medians are compared")
	bin := fs.String("taskcenter", "bin/taskcenter", "the taskcenter binary to measure")
	profileDir := fs.String("profile", "", "save CPU profiles of the measured service in this directory")
	var settings []string
	fs.Func("set", "KEY=VALUE given to every measured taskcenter process, after the benchmark's own (repeatable), "+
		"e.g. -set TASKCENTER_WORKER_BATCH_WAIT=2ms", func(v string) error {
		if !strings.Contains(v, "=") {
			return fmt.Errorf("-set %q: want KEY=VALUE", v)
		}
		settings = append(settings, v)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	b, err := newBench(ctx, getenv, *bin, stdout)
	if err != nil {
		return err
	}
	defer b.close()
	b.exportRows = *exportRows
	b.importRows = *importRows
	b.rounds = max(*rounds, 1)
	b.profileDir = *profileDir
	b.serviceEnv = settings

	var figures []Figure
	for _, bm := range benchmarks() {
		if *only != "" && !strings.Contains(","+*only+",", ","+bm.name+",") {
			continue
		}
		fmt.Fprintf(stdout, "== %s\n", bm.name)
		fs, err := bm.run(ctx, b)
		if err != nil {
			return fmt.Errorf("%s: %w", bm.name, err)
		}
		figures = append(figures, fs...)
	}
	printTable(stdout, figures)
	if *jsonOut != "" {
		if err := os.MkdirAll(filepath.Dir(*jsonOut), 0o755); err != nil {
			return err
		}
		out, _ := json.MarshalIndent(map[string]any{"at": time.Now().UTC(), "machine": machine(), "figures": figures}, "", "  ")
		if err := os.WriteFile(*jsonOut, out, 0o644); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "figures written to", *jsonOut)
	}
	return nil
}

func benchmarks() []benchmark {
	return []benchmark{
		{"submit", one(benchSubmit)},
		{"pipeline", sized(benchPipeline, 20_000)},
		{"export", one(benchExport)},
		{"import", benchImport(0)}, // -import-rows
		{"import-1m", benchImport(1_000_000)},
		{"import-s3", sized(benchImportS3, 300_000)},
		{"import-gbk", sized(benchCSVEncodings, 300_000)},
		{"import-wide", one(benchWideImport(3_000, 16_000))},
		{"submit-big", sized(benchBigSubmit, 30_000_000)},
		{"cleanup", sized(benchCleanup, 1_000_000)},
		{"sse", one(benchSSE)},
	}
}

func names() []string {
	var out []string
	for _, b := range benchmarks() {
		out = append(out, b.name)
	}
	return out
}

func printTable(w io.Writer, figures []Figure) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nbenchmark\ttaskcenter\tbaseline\tratio\ttarget\tmet")
	for _, f := range figures {
		ratio := "—"
		if f.Ratio > 0 {
			ratio = fmt.Sprintf("%.2f×", f.Ratio)
		}
		met := "yes"
		if !f.Met {
			met = "NO"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", f.Name, formatMeasure(f.Measure), formatMeasure(f.Baseline), ratio, f.Target, met)
	}
	tw.Flush()
	for _, f := range figures {
		if f.Note != "" {
			fmt.Fprintf(w, "  %s: %s\n", f.Name, f.Note)
		}
	}
}

func formatMeasure(m map[string]float64) string {
	if len(m) == 0 {
		return "—"
	}
	var parts []string
	for _, k := range []string{"seconds", "peak_rss_mb", "per_second", "p50_ms", "p99_ms", "ms", "median_ms", "cpu_seconds"} {
		if v, ok := m[k]; ok {
			parts = append(parts, fmt.Sprintf("%s=%.3g", k, v))
		}
	}
	return strings.Join(parts, " ")
}

func machine() map[string]any {
	host, _ := os.Hostname()
	cpu := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				cpu = strings.TrimSpace(strings.SplitN(line, ":", 2)[1])
				break
			}
		}
	}
	return map[string]any{"host": host, "cpu": cpu, "cpus": numCPU()}
}
