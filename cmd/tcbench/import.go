package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/xuri/excelize/v2"
)

// benchImport: import an N-row customer file end to end (upload → terminal) beside a bare
// process reading the same file with excelize's streaming reader.
func benchImport(rows int) func(ctx context.Context, b *bench) (Figure, error) {
	return func(ctx context.Context, b *bench) (Figure, error) {
		file, err := b.importFile(rows)
		if err != nil {
			return Figure{}, err
		}
		raw, rawRSS, err := b.child("raw-read", "-file", file)
		if err != nil {
			return Figure{}, err
		}
		run, err := b.importOnce(ctx, file, rows, fmt.Sprintf("import-%d", rows))
		if err != nil {
			return Figure{}, err
		}
		took, rss, phases := run.took, run.rss, run.phases
		ratio := took.Seconds() / raw["seconds"]
		return Figure{
			Note:     fmt.Sprintf("upload+checks %.2fs, queue wait %.2fs, run %.2fs", phases.Upload, phases.Wait, phases.Run),
			Name:     fmt.Sprintf("import %d rows", rows),
			Measure:  map[string]float64{"seconds": took.Seconds(), "peak_rss_mb": rss, "per_second": float64(rows) / took.Seconds()},
			Baseline: map[string]float64{"seconds": raw["seconds"], "peak_rss_mb": rawRSS, "per_second": float64(rows) / raw["seconds"]},
			Ratio:    ratio,
			Target:   "≤1.5× raw read, ≤200 MB",
			Met:      ratio <= 1.5 && rss <= 200,
		}, nil
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
// an empty customers table, checks every row landed and stops the service.
func (b *bench) importOnce(ctx context.Context, file string, rows int, profile string, extra ...string) (importRun, error) {
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
	id, err := svc.upload(file)
	if err != nil {
		svc.stop()
		return r, err
	}
	final, err := svc.waitTerminal(id, 30*time.Minute)
	r.took = time.Since(start)
	r.rss, _ = svc.stop()
	if err != nil {
		return r, err
	}
	if final.Status != "SUCCESS" {
		return r, fmt.Errorf("import ended %s: %+v\n%s", final.Status, final.Error, svc.logs)
	}
	var n int
	if err := b.db.NewRaw("SELECT count(*) FROM customers").Scan(ctx, &n); err != nil || n != rows {
		return r, fmt.Errorf("imported %d customers, want %d (%v)", n, rows, err)
	}
	b.db.NewRaw(`SELECT extract(epoch FROM created_at - ?::timestamptz) AS upload, extract(epoch FROM started_at - created_at) AS wait,
		extract(epoch FROM finished_at - started_at) AS run FROM tasks WHERE task_no = ?`, start, id).Scan(ctx, &r.phases.Upload, &r.phases.Wait, &r.phases.Run) //nolint:errcheck
	return r, nil
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

// upload submits an import of the file and returns the task id.
func (s *service) upload(path string) (string, error) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		fw, err := mw.CreateFormFile("file", filepath.Base(path))
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
		return "", err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusAccepted {
		return "", fmt.Errorf("upload: %d %s", res.StatusCode, body)
	}
	var out struct{ Task taskState }
	if err := json.Unmarshal(body, &out); err != nil {
		return "", err
	}
	return out.Task.ID, nil
}

// rawRead is the baseline: excelize's streaming reader over every row, raw cell values.
func rawRead(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("raw-read", flag.ContinueOnError)
	path := fs.String("file", "", "the .xlsx to read")
	if err := fs.Parse(args); err != nil {
		return err
	}
	start := time.Now()
	f, err := excelize.OpenFile(*path)
	if err != nil {
		return err
	}
	defer f.Close()
	rows, err := f.Rows(f.GetSheetList()[0])
	if err != nil {
		return err
	}
	n, cells := 0, 0
	for rows.Next() {
		cols, err := rows.Columns(excelize.Options{RawCellValue: true})
		if err != nil {
			return err
		}
		n++
		cells += len(cols)
	}
	if err := rows.Close(); err != nil {
		return err
	}
	var sink bytes.Buffer
	fmt.Fprint(&sink, cells)
	return json.NewEncoder(stdout).Encode(map[string]float64{"seconds": time.Since(start).Seconds(), "rows": float64(n), "peak_rss_mb": vmHWM(os.Getpid())})
}
