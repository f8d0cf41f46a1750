// Package export holds the report export task types, export:customers and export:tasks. Both
// read one consistent snapshot in keyset pages, stream rows into an .xlsx with excelize's
// StreamWriter in a temp file, and move it into place atomically.
package export

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"time"

	"github.com/uptrace/bun"
	"github.com/xuri/excelize/v2"

	"github.com/taskcenter/taskcenter/internal/files"
	"github.com/taskcenter/taskcenter/internal/xlsxsafe"
	"github.com/taskcenter/taskcenter/jobs"
)

// Config tunes exports.
type Config struct {
	// PageSize is the number of rows read per query.
	PageSize int
	// ResultTTL is how long the file can be downloaded.
	ResultTTL time.Duration
	// MaxRows caps one export.
	MaxRows int
}

// ResultData is the task result of an export.
type ResultData struct {
	File        string `json:"file"`         // relative to the data dir
	Name        string `json:"name"`         // download file name
	Rows        int64  `json:"rows"`         // data rows, without the header
	Size        int64  `json:"size"`         // bytes
	ContentType string `json:"content_type"` // of the file
}

// ContentTypeXLSX is the media type of the files exports write.
const ContentTypeXLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"

// source is what an export reads: its columns, its size, and its rows in id order.
type source interface {
	header() []string
	count(ctx context.Context, tx bun.Tx) (int64, error)
	// page returns up to limit rows with id > after, and the id of the last one.
	page(ctx context.Context, tx bun.Tx, after int64, limit int) (rows [][]any, last int64, err error)
}

// exporter is the machinery both export types share.
type exporter struct {
	db    *bun.DB
	files *files.Store
	cfg   Config
}

type page struct {
	rows [][]any
	err  error
}

// export writes src to a result file for run.
func (e *exporter) export(ctx context.Context, run *jobs.Run, src source, downloadName string) (jobs.Result, error) {
	// One read-only snapshot: the count, and every page, see the same rows.
	tx, err := e.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return jobs.Result{}, fmt.Errorf("begin export snapshot: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only

	total, err := src.count(ctx, tx)
	if err != nil {
		return jobs.Result{}, fmt.Errorf("count rows: %w", err)
	}
	if total > int64(e.cfg.MaxRows) {
		return jobs.Result{}, jobs.BadInput("too_many_rows",
			"the export would contain %d rows, more than the limit of %d; narrow the filter", total, e.cfg.MaxRows)
	}
	if err := run.Progress(ctx, 0, total); err != nil {
		return jobs.Result{}, err
	}

	tmp, err := e.files.CreateTemp(run.Task.TaskNo, ".xlsx")
	if err != nil {
		return jobs.Result{}, err
	}
	committed := false
	defer func() {
		if !committed {
			files.Discard(tmp)
		}
	}()
	book := excelize.NewFile(excelize.Options{TmpDir: filepath.Dir(tmp.Name())})
	defer book.Close()
	sw, err := book.NewStreamWriter("Sheet1")
	if err != nil {
		return jobs.Result{}, fmt.Errorf("start sheet: %w", err)
	}
	if err := sw.SetPanes(&excelize.Panes{Freeze: true, YSplit: 1, TopLeftCell: "A2", ActivePane: "bottomLeft"}); err != nil {
		return jobs.Result{}, fmt.Errorf("freeze header: %w", err)
	}
	header := src.header()
	cells := make([]any, len(header))
	for i, h := range header {
		cells[i] = h
	}
	if err := sw.SetRow("A1", cells); err != nil {
		return jobs.Result{}, fmt.Errorf("write header: %w", err)
	}

	// Read the next page while this one is written.
	fetchCtx, stopFetch := context.WithCancel(ctx)
	pages := make(chan page, 1)
	go func() {
		defer close(pages)
		var after int64
		for {
			rows, last, err := src.page(fetchCtx, tx, after, e.cfg.PageSize)
			select {
			case pages <- page{rows: rows, err: err}:
			case <-fetchCtx.Done():
				return
			}
			if err != nil || len(rows) < e.cfg.PageSize {
				return
			}
			after = last
		}
	}()
	defer func() {
		stopFetch()
		for range pages { //nolint:revive // drain so the reader is gone before the snapshot closes
		}
	}()

	var written int64
	for p := range pages {
		if p.err != nil {
			return jobs.Result{}, fmt.Errorf("read rows: %w", p.err)
		}
		for _, row := range p.rows {
			for i, v := range row {
				if s, ok := v.(string); ok {
					row[i] = xlsxsafe.Neutralize(s)
				}
			}
			cell, _ := excelize.CoordinatesToCellName(1, int(written)+2)
			if err := sw.SetRow(cell, row); err != nil {
				return jobs.Result{}, fmt.Errorf("write row: %w", err)
			}
			written++
		}
		if err := run.Progress(ctx, written, max(total, written)); err != nil {
			return jobs.Result{}, err
		}
	}
	if err := sw.Flush(); err != nil {
		return jobs.Result{}, fmt.Errorf("finish sheet: %w", err)
	}
	if _, err := book.WriteTo(tmp); err != nil {
		return jobs.Result{}, fmt.Errorf("write workbook: %w", err)
	}
	info, err := tmp.Stat()
	if err != nil {
		return jobs.Result{}, err
	}
	rel := filepath.ToSlash(filepath.Join(files.Results, fmt.Sprintf("%s-a%d.xlsx", run.Task.TaskNo, run.Lease.Attempt)))
	if err := e.files.Commit(tmp, rel); err != nil {
		return jobs.Result{}, err
	}
	committed = true
	expires := time.Now().Add(e.cfg.ResultTTL).UTC()
	return jobs.Result{
		Data:      ResultData{File: rel, Name: downloadName, Rows: written, Size: info.Size(), ContentType: ContentTypeXLSX},
		ExpiresAt: &expires,
		Message:   fmt.Sprintf("exported %d rows", written),
		Files:     []string{rel},
	}, nil
}

// downloadName is "<what>-<date>-<task_no>.xlsx".
func downloadName(what, taskNo string) string {
	return fmt.Sprintf("%s-%s-%s.xlsx", what, time.Now().UTC().Format("20060102"), taskNo)
}

func timeCell(t *time.Time) any {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
