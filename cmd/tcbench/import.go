package main

import (
	"bufio"
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
	"strings"
	"time"

	"github.com/xuri/excelize/v2"
)

// importFlavour is one way of importing the benchmark file, one row of the table: the form
// fields sent with the upload (beside the file), what the table holds before it, and what
// the import must leave behind.
type importFlavour struct {
	name string
	// form holds the multipart fields sent with the file, e.g. {"mode": "replace"} or
	// {"dry_run": "true"}.
	form map[string]string
	// over, when set, is the form of an import of the same file run first, not measured,
	// so that the measured one finds every customer of the file already in the table. It
	// must differ from form in mode or dry_run: the same file with the same choices is the
	// same task (200 duplicate), not a second import.
	over map[string]string
	// then, when set, is an action posted to the finished import's task (say "undo":
	// POST /api/v1/tasks/{id}/undo); the task it answers with is followed to its end, and
	// the action alone is measured: from the POST to that task's end, its phases from its
	// own row. The import before it is not measured (the note gives its time).
	then string
	// customers is how many customers the table holds at the end, given the file's rows;
	// nil: every row.
	customers func(rows int) int
	// summary is what the measured task's result.summary must say (the keys given), given
	// the file's rows: that the import did what its row is named for (every row unchanged,
	// nothing removed, an undo that restored every row).
	summary func(rows int) map[string]int64
	// dryRun is what the measured task's result.dry_run must be.
	dryRun bool
}

// importFlavours are the imports measured beside the ceiling, in this order in each round.
// Another flavour is one more entry.
func importFlavours() []importFlavour {
	none := func(int) int { return 0 }
	return []importFlavour{
		{name: "upsert", summary: func(n int) map[string]int64 { return map[string]int64{"inserted": int64(n)} }},
		// The same file again: every row read, checked, compared and left as it is.
		{name: "upsert (exists)", over: map[string]string{"mode": "insert"},
			summary: func(n int) map[string]int64 {
				return map[string]int64{"unchanged": int64(n), "inserted": 0, "updated": 0}
			}},
		// The same file as the whole list: as above, every row stamped, and the last step
		// finds no customer outside the file to remove.
		{name: "mode=replace (exists)", form: map[string]string{"mode": "replace"}, over: map[string]string{"mode": "insert"},
			summary: func(n int) map[string]int64 { return map[string]int64{"unchanged": int64(n), "removed": 0} }},
		// Every check of the upsert into the empty table, its codes kept in import_codes, no
		// customer written.
		{name: "dry_run=true", form: map[string]string{"dry_run": "true"}, customers: none, dryRun: true,
			summary: func(n int) map[string]int64 { return map[string]int64{"inserted": int64(n)} }},
		// The undo of the finished upsert: every customer it inserted deleted again.
		{name: "undo of the upsert", then: "undo", customers: none,
			summary: func(n int) map[string]int64 { return map[string]int64{"success": int64(n), "failed": 0} }},
	}
}

// benchImport: import an N-row customer file end to end (upload → terminal) in each flavour,
// beside the ceiling no import can beat on this host: the project's own reader parsing the
// same file while its rows are copied (COPY FROM STDIN) into an UNLOGGED staging table, in a
// bare process; and beside the table's floor, the ceiling followed by one INSERT … ON
// CONFLICT of all the rows into customers. Rounds run the ceiling, the flavours, then the
// floor; medians are compared. rows 0 is -import-rows.
func benchImport(rows int) func(ctx context.Context, b *bench) ([]Figure, error) {
	return func(ctx context.Context, b *bench) ([]Figure, error) {
		rows := cmp.Or(rows, b.importRows, 300_000)
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
				r, err := b.importOnce(ctx, file, rows, fl, fmt.Sprintf("import-%d-%s-%d", rows, fileName(fl.name), round))
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
			var took, before, upload, wait, run []float64
			rss := 0.0
			for _, r := range runs[i] {
				took, before = append(took, r.took.Seconds()), append(before, r.before.Seconds())
				upload, wait, run = append(upload, r.phases.Upload), append(wait, r.phases.Wait), append(run, r.phases.Run)
				rss = max(rss, r.rss)
			}
			t := median(took)
			ratio := t / base
			what := "import"
			if fl.then != "" {
				what = fmt.Sprintf("%s (after the import, %s s, not counted)", fl.then, seconds(before))
			}
			figures = append(figures, Figure{
				Name:     fmt.Sprintf("import %d rows, %s", rows, fl.name),
				Measure:  map[string]float64{"seconds": t, "peak_rss_mb": rss, "per_second": float64(rows) / t},
				Baseline: map[string]float64{"seconds": base, "peak_rss_mb": slices.Max(ceilingRSS), "per_second": float64(rows) / base},
				Ratio:    ratio,
				Target:   "≤1.5× ceiling (own reader + COPY), ≤200 MB",
				Met:      ratio <= 1.5 && rss <= 200,
				Note: fmt.Sprintf("medians of %d alternating rounds: ceiling %s s, the table's floor (the ceiling, then one INSERT … ON CONFLICT into customers) %s s, "+
					"%s %s s (upload+checks %.2fs, queue wait %.2fs, run %.2fs); %s / floor %.2f×",
					b.rounds, seconds(ceiling), seconds(floor), what, seconds(took), median(upload), median(wait), median(run), fl.name, t/median(floor)),
			})
		}
		return figures, nil
	}
}

// importRun is one measured import: wall time from upload to terminal (or of the then
// action alone), the service's peak RSS, and the phases as the measured task's row records
// them.
type importRun struct {
	took   time.Duration
	before time.Duration // the import a then action acts on, not measured
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
	r, err = svc.measure(b, file, rows, fl, profile)
	rss, _ := svc.stop()
	r.rss = rss
	if err != nil {
		return r, err
	}
	want := rows
	if fl.customers != nil {
		want = fl.customers(rows)
	}
	var n int
	if err := b.db.NewRaw("SELECT count(*) FROM customers").Scan(ctx, &n); err != nil || n != want {
		return r, fmt.Errorf("the customers table holds %d rows, want %d (%v)", n, want, err)
	}
	return r, nil
}

// measure runs fl's import of file on the running service: the import it goes over (not
// measured), then the measured import, or the import and then the measured action on it.
// It checks the measured task's result and reads its phases.
func (s *service) measure(b *bench, file string, rows int, fl importFlavour, profile string) (importRun, error) {
	var r importRun
	if fl.over != nil {
		id, err := s.upload(file, fl.over)
		if err != nil {
			return r, fmt.Errorf("the import it goes over: %w", err)
		}
		if final, err := s.waitTerminal(id, 30*time.Minute); err != nil || final.Status != "SUCCESS" {
			return r, fmt.Errorf("the import it goes over ended %s (%v)\n%s", final.Status, err, s.logs)
		}
	}
	start := time.Now()
	b.profile(s, profile, time.Duration(rows/60_000+1)*time.Second)
	id, err := s.upload(file, fl.form)
	if err != nil {
		return r, err
	}
	final, err := s.waitTerminal(id, 30*time.Minute)
	if err == nil && final.Status == "SUCCESS" && fl.then != "" {
		r.before = time.Since(start)
		start = time.Now()
		final, err = s.follow(id, fl.then)
		id = final.ID
	}
	r.took = time.Since(start)
	if err != nil {
		return r, err
	}
	if final.Status != "SUCCESS" {
		return r, fmt.Errorf("%s ended %s: %+v\n%s", cmp.Or(fl.then, "import"), final.Status, final.Error, s.logs)
	}
	if err := fl.check(rows, final); err != nil {
		return r, fmt.Errorf("task %s: %w", id, err)
	}
	b.db.NewRaw(`SELECT extract(epoch FROM created_at - ?::timestamptz) AS upload, extract(epoch FROM started_at - created_at) AS wait,
		extract(epoch FROM finished_at - started_at) AS run FROM tasks WHERE task_no = ?`, start, id).Scan(b.ctx, &r.phases.Upload, &r.phases.Wait, &r.phases.Run) //nolint:errcheck
	return r, nil
}

// check tells whether the measured task's result says what fl's row is named for.
func (fl importFlavour) check(rows int, final taskState) error {
	if final.Result == nil {
		return fmt.Errorf("no result")
	}
	if final.Result.DryRun != fl.dryRun {
		return fmt.Errorf("result.dry_run %t, want %t", final.Result.DryRun, fl.dryRun)
	}
	if fl.summary == nil {
		return nil
	}
	for k, want := range fl.summary(rows) {
		if got := final.Result.Summary[k]; got != want {
			return fmt.Errorf("result.summary.%s %d, want %d (summary %v)", k, got, want, final.Result.Summary)
		}
	}
	return nil
}

// follow posts action to task id and waits for the task it answers with (the same task
// when the answer names none): POST /api/v1/tasks/{id}/undo answers 202 with the undo's
// own task, which is the one waited for.
func (s *service) follow(id, action string) (taskState, error) {
	var res struct {
		Task taskState `json:"task"`
	}
	code, err := s.call("POST", "/api/v1/tasks/"+id+"/"+action, nil, &res)
	if err != nil || code/100 != 2 {
		return taskState{}, fmt.Errorf("%s: %d %v", action, code, err)
	}
	next := cmp.Or(res.Task.ID, id)
	final, err := s.waitTerminal(next, 30*time.Minute)
	final.ID = next
	return final, err
}

// importFile writes the import of rows customers into the data dir and returns its path.
func (b *bench) importFile(rows int) (string, error) {
	file := filepath.Join(b.dataDir, fmt.Sprintf("import-%d.xlsx", rows))
	return file, writeImportFile(file, rows)
}

// writeImportFile writes rows customers (six columns, all valid) with excelize's stream writer.
func writeImportFile(path string, rows int) error {
	return writeOnce(path, func(w *bufio.Writer) error {
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
		return f.Write(w)
	})
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

// fileName is name with what a file name should not hold (spaces, =, parentheses) as '-'.
func fileName(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '-'
	}, name)
}
