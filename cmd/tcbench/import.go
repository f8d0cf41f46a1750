package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/xuri/excelize/v2"
)

// importFlavour is one way of importing the benchmark file, one row of the table: the form
// fields sent with the upload (beside the file), and what the import must leave behind.
type importFlavour struct {
	name string
	// form holds the multipart fields sent with the file, e.g. {"mode": "insert"} or
	// {"dry_run": "true"}.
	form map[string]string
	// then, when set, is an action posted to the finished import's task (say "undo":
	// POST /api/v1/tasks/{id}/undo); the task it answers with is waited for, and the time
	// measured runs to its end.
	then string
	// customers is how many customers the table holds at the end, given the file's rows;
	// nil: every row.
	customers func(rows int) int
}

// importFlavours are the imports measured beside the ceiling, in this order in each round.
// Another flavour is one more entry.
func importFlavours() []importFlavour {
	return []importFlavour{
		{name: "upsert"},
	}
}

// benchImport: import an N-row customer file end to end (upload → terminal) in each flavour,
// beside the ceiling no import can beat on this host: the project's own reader parsing the
// same file while its rows are copied (COPY FROM STDIN) into an UNLOGGED staging table, in a
// bare process; and beside the table's floor, the ceiling followed by one INSERT … ON
// CONFLICT of all the rows into customers. Rounds run the ceiling, the flavours, then the
// floor; medians are compared.
func benchImport(rows int) func(ctx context.Context, b *bench) ([]Figure, error) {
	return func(ctx context.Context, b *bench) ([]Figure, error) {
		file, err := b.importFile(rows)
		if err != nil {
			return nil, err
		}
		var ceiling, ceilingRSS, floor []float64
		flavours := importFlavours()
		runs := make([][]importRun, len(flavours))
		for round := range b.rounds {
			c, rss, err := b.child("raw-ceiling", "-file", file, "-pg", b.schemaURL)
			if err != nil {
				return nil, err
			}
			if int(c["rows"]) != rows {
				return nil, fmt.Errorf("the ceiling copied %v rows, want %d", c["rows"], rows)
			}
			ceiling, ceilingRSS = append(ceiling, c["seconds"]), append(ceilingRSS, rss)
			for i, fl := range flavours {
				r, err := b.importOnce(ctx, file, rows, fl, fmt.Sprintf("import-%d-%s-%d", rows, fl.name, round))
				if err != nil {
					return nil, fmt.Errorf("%s: %w", fl.name, err)
				}
				runs[i] = append(runs[i], r)
			}
			// The floor runs last in its round: the WAL and dirty pages of its 300,000-row
			// insert weigh on whatever runs next, and the ceiling (an unlogged table) feels
			// that least.
			if _, err := b.db.ExecContext(ctx, "TRUNCATE customers"); err != nil {
				return nil, err
			}
			f, _, err := b.child("raw-ceiling", "-file", file, "-pg", b.schemaURL, "-into-customers")
			if err != nil {
				return nil, err
			}
			floor = append(floor, f["seconds"])
		}
		base := median(ceiling)
		var figures []Figure
		for i, fl := range flavours {
			var took, upload, wait, run []float64
			rss := 0.0
			for _, r := range runs[i] {
				took = append(took, r.took.Seconds())
				upload, wait, run = append(upload, r.phases.Upload), append(wait, r.phases.Wait), append(run, r.phases.Run)
				rss = max(rss, r.rss)
			}
			t := median(took)
			ratio := t / base
			figures = append(figures, Figure{
				Name:     fmt.Sprintf("import %d rows, %s", rows, fl.name),
				Measure:  map[string]float64{"seconds": t, "peak_rss_mb": rss, "per_second": float64(rows) / t},
				Baseline: map[string]float64{"seconds": base, "peak_rss_mb": slices.Max(ceilingRSS), "per_second": float64(rows) / base},
				Ratio:    ratio,
				Target:   "≤1.5× ceiling (own reader + COPY), ≤200 MB",
				Met:      ratio <= 1.5 && rss <= 200,
				Note: fmt.Sprintf("medians of %d alternating rounds: ceiling %s s, the table's floor (the ceiling, then one INSERT … ON CONFLICT into customers) %s s, "+
					"import %s s (upload+checks %.2fs, queue wait %.2fs, run %.2fs); import / floor %.2f×",
					b.rounds, seconds(ceiling), seconds(floor), seconds(took), median(upload), median(wait), median(run), t/median(floor)),
			})
		}
		return figures, nil
	}
}

// importRun is one measured import: wall time from upload to terminal, the service's peak
// RSS, and the phases as the task row records them.
type importRun struct {
	took   time.Duration
	rss    float64
	phases struct{ Upload, Wait, Run float64 }
}

// importOnce starts the service (with extra env), imports file (rows valid customers) into
// an empty customers table as fl says, checks what landed and stops the service.
func (b *bench) importOnce(ctx context.Context, file string, rows int, fl importFlavour, profile string, extra ...string) (importRun, error) {
	var r importRun
	if _, err := b.db.ExecContext(ctx, "TRUNCATE customers; TRUNCATE tasks CASCADE"); err != nil {
		return r, err
	}
	svc, err := b.startService(extra...)
	if err != nil {
		return r, err
	}
	start := time.Now()
	b.profile(svc, profile, time.Duration(rows/60_000+1)*time.Second)
	id, err := svc.upload(file, fl.form)
	if err != nil {
		svc.stop()
		return r, err
	}
	final, err := svc.waitTerminal(id, 30*time.Minute)
	if err == nil && final.Status == "SUCCESS" && fl.then != "" {
		final, err = svc.follow(id, fl.then)
	}
	r.took = time.Since(start)
	r.rss, _ = svc.stop()
	if err != nil {
		return r, err
	}
	if final.Status != "SUCCESS" {
		return r, fmt.Errorf("import ended %s: %+v\n%s", final.Status, final.Error, svc.logs)
	}
	want := rows
	if fl.customers != nil {
		want = fl.customers(rows)
	}
	var n int
	if err := b.db.NewRaw("SELECT count(*) FROM customers").Scan(ctx, &n); err != nil || n != want {
		return r, fmt.Errorf("the customers table holds %d rows, want %d (%v)", n, want, err)
	}
	b.db.NewRaw(`SELECT extract(epoch FROM created_at - ?::timestamptz) AS upload, extract(epoch FROM started_at - created_at) AS wait,
		extract(epoch FROM finished_at - started_at) AS run FROM tasks WHERE task_no = ?`, start, id).Scan(ctx, &r.phases.Upload, &r.phases.Wait, &r.phases.Run) //nolint:errcheck
	return r, nil
}

// follow posts action to task id and waits for the task it answers with (the same task
// when the answer names none).
func (s *service) follow(id, action string) (taskState, error) {
	var res struct{ Task taskState }
	code, err := s.call("POST", "/api/v1/tasks/"+id+"/"+action, nil, &res)
	if err != nil || code/100 != 2 {
		return taskState{}, fmt.Errorf("%s: %d %v", action, code, err)
	}
	return s.waitTerminal(cmp.Or(res.Task.ID, id), 30*time.Minute)
}

// importFile writes the import of rows customers into the data dir and returns its path.
func (b *bench) importFile(rows int) (string, error) {
	file := filepath.Join(b.dataDir, fmt.Sprintf("import-%d.xlsx", rows))
	return file, writeImportFile(file, rows)
}

// writeImportFile writes rows customers (six columns, all valid) with excelize's stream writer.
func writeImportFile(path string, rows int) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	f := excelize.NewFile()
	defer f.Close()
	sw, err := f.NewStreamWriter("Sheet1")
	if err != nil {
		return err
	}
	if err := sw.SetRow("A1", []any{"code", "name", "phone", "email", "city", "level"}); err != nil {
		return err
	}
	cities := []string{"上海", "北京", "广州", "深圳", "杭州"}
	levels := []string{"normal", "silver", "gold", "platinum", "diamond"}
	for i := 1; i <= rows; i++ {
		cell, _ := excelize.CoordinatesToCellName(1, i+1)
		if err := sw.SetRow(cell, []any{fmt.Sprintf("B%07d", i), fmt.Sprintf("客户 %d", i), 13000000000 + i,
			fmt.Sprintf("b%d@example.com", i), cities[i%5], levels[i%5]}); err != nil {
			return err
		}
	}
	if err := sw.Flush(); err != nil {
		return err
	}
	return f.SaveAs(path)
}

// upload submits an import of the file with the form fields and returns the task id.
func (s *service) upload(path string, form map[string]string) (string, error) {
	code, body, err := s.submitFile(path, form)
	if err != nil {
		return "", err
	}
	if code != http.StatusAccepted {
		return "", fmt.Errorf("upload: %d %s", code, body)
	}
	var out struct{ Task taskState }
	if err := json.Unmarshal(body, &out); err != nil {
		return "", err
	}
	return out.Task.ID, nil
}

// submitFile posts the file and the form fields to POST /api/v1/imports and returns the
// answer's status and body.
func (s *service) submitFile(path string, form map[string]string) (int, []byte, error) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		var err error
		for _, k := range slices.Sorted(maps.Keys(form)) {
			if err = mw.WriteField(k, form[k]); err != nil {
				break
			}
		}
		var fw io.Writer
		if err == nil {
			fw, err = mw.CreateFormFile("file", filepath.Base(path))
		}
		if err == nil {
			var f *os.File
			if f, err = os.Open(path); err == nil {
				_, err = io.Copy(fw, f)
				f.Close()
			}
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	req, _ := http.NewRequest("POST", s.base+"/api/v1/imports", pr)
	req.Header.Set("Authorization", "Bearer "+benchToken)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return res.StatusCode, body, err
}
