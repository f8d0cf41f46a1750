// Package export holds the report export task types, export:customers and export:tasks. Both
// read one consistent snapshot in keyset pages, stream rows into an .xlsx with excelize's
// StreamWriter in a temp file, and move it into place atomically.
package export

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/internal/xlsxsafe"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/store"
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
	// language is the file's language: its headers, sheet name and enum values.
	language() msg.Lang
	header() []string
	count(ctx context.Context, tx bun.Tx) (int64, error)
	// page returns up to limit rows with id > after, and the id of the last one.
	page(ctx context.Context, tx bun.Tx, after int64, limit int) (rows [][]any, last int64, err error)
}

// exporter is the machinery both export types share.
type exporter struct {
	db    *bun.DB
	files storage.Store
	cfg   Config
}

// handler is an export's jobs.Handler: it reads the task's params P, which check themselves
// and say the source they select (selected), and exports that source to a file named
// after what it holds (file).
type handler[P any] struct {
	exporter
	name     string
	file     string
	selected func(p P, db *bun.DB) (source, error)
}

// Type implements jobs.Handler.
func (h *handler[P]) Type() string { return h.name }

// Run implements jobs.Handler.
func (h *handler[P]) Run(ctx context.Context, run *jobs.Run) (jobs.Result, error) {
	var p P
	if err := run.Params(&p); err != nil {
		return jobs.Result{}, err
	}
	src, err := h.selected(p, h.db)
	if err != nil {
		return jobs.Result{}, err
	}
	return h.export(ctx, run, src, downloadName(h.file, run.Task.TaskNo))
}

type page struct {
	rows [][]any
	err  error
}

// export writes src to a result file for run.
func (e *exporter) export(ctx context.Context, run *jobs.Run, src source, downloadName string) (jobs.Result, error) {
	// One read-only snapshot: the count, and every page, see the same rows.
	tx, err := store.BeginSnapshot(ctx, e.db)
	if err != nil {
		return jobs.Result{}, fmt.Errorf("begin export snapshot: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only

	total, err := src.count(ctx, tx)
	if err != nil {
		return jobs.Result{}, fmt.Errorf("count rows: %w", err)
	}
	if total > int64(e.cfg.MaxRows) {
		return jobs.Result{}, jobs.BadInputSaid("too_many_rows",
			msg.Params{"total": strconv.FormatInt(total, 10), "limit": strconv.Itoa(e.cfg.MaxRows)})
	}
	if err := run.Progress(ctx, 0, total); err != nil {
		return jobs.Result{}, err
	}

	out, err := xlsxsafe.NewWriter(e.files, run.TempPrefix(), msg.Render(src.language(), "export.sheet", nil), src.header())
	if err != nil {
		return jobs.Result{}, err
	}
	defer out.Close()

	// Read the next page while this one is written.
	pages, stop := e.prefetch(ctx, tx, src)
	defer stop()
	for p := range pages {
		if p.err != nil {
			return jobs.Result{}, fmt.Errorf("read rows: %w", p.err)
		}
		for _, row := range p.rows {
			if err := out.Row(row); err != nil {
				return jobs.Result{}, err
			}
		}
		written := int64(out.Rows())
		if err := run.Progress(ctx, written, max(total, written)); err != nil {
			if errors.Is(err, jobs.ErrCancelRequested) && written >= total {
				// Every row is written: the cancel came too late to save any work, so the
				// export finishes (the runtime logs that the cancel came after the work).
				continue
			}
			return jobs.Result{}, err
		}
	}
	rel := storage.ResultKey(run.Task.TaskNo, run.Lease.Attempt, "", ".xlsx")
	size, err := out.Commit(ctx, rel)
	if err != nil {
		return jobs.Result{}, err
	}
	written := int64(out.Rows())
	expires := time.Now().Add(e.cfg.ResultTTL).UTC()
	return jobs.Result{
		Counts:    &task.Counts{Total: written, Success: written},
		Data:      ResultData{File: rel, Name: downloadName, Rows: written, Size: size, ContentType: ContentTypeXLSX},
		ExpiresAt: &expires,
		Log:       msg.New("log.exported", "rows", strconv.FormatInt(written, 10)),
		Files:     []string{rel},
	}, nil
}

// prefetch reads the snapshot's pages in a goroutine, one page ahead of the writer. stop
// ends the reader and waits for it, so it is gone before the snapshot closes.
func (e *exporter) prefetch(ctx context.Context, tx bun.Tx, src source) (<-chan page, func()) {
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
	return pages, func() {
		stopFetch()
		for range pages { //nolint:revive // drain so the reader is gone before the snapshot closes
		}
	}
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

// headers are an export's column titles in lang (the catalogue's "export.col.<name>"; in
// English, the column names).
func headers(lang msg.Lang, names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = msg.Render(lang, "export.col."+n, nil)
	}
	return out
}

// enum is an enum value (a status, a type, a level) as a reader of lang reads it: in
// English the value itself, which programs match; in Chinese the catalogue's word for it.
func enum(lang msg.Lang, kind, value string) string {
	if lang == msg.EN || !msg.Known(kind+"."+value) {
		return value
	}
	return msg.Render(lang, kind+"."+value, nil)
}

// errorText is a task's error in lang: in English its stored text; in Chinese its code's
// message.
func errorText(lang msg.Lang, code string, params map[string]string, english string) string {
	for _, kind := range []string{"error.", "problem."} { // a file the import refused: the refusal's words
		if lang != msg.EN && msg.Known(kind+code) {
			return msg.Render(lang, kind+code, params)
		}
	}
	return english
}
