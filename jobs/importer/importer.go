// Package importer is the import:customers task type: a spreadsheet (.xlsx or UTF-8 .csv) of
// customers streamed row by row, validated, and written in batches of about a thousand rows.
// Each batch commits in one transaction with its checkpoint, counts and rejected rows, fenced
// by the attempt, so an import resumes exactly where its last batch ended: no row is written
// twice and none is skipped.
package importer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/files"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/store"
)

// Type is the task type of the customer import.
const Type = "import:customers"

// Modes of an import.
const (
	ModeUpsert = "upsert" // insert new codes, update existing ones
	ModeInsert = "insert" // insert new codes; an existing code is a row error
)

// Params are the task parameters of an import, set at submit.
type Params struct {
	Upload   string `json:"upload"` // data-dir path of the stored upload
	Format   Format `json:"format"`
	Mode     string `json:"mode"`
	Sheet    string `json:"sheet,omitempty"`
	Filename string `json:"filename"` // as uploaded, for display only
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
	Rows     int    `json:"rows"` // rows in the sheet, header included, as submit counted them
}

// Config tunes imports.
type Config struct {
	Limits    Limits
	BatchSize int
	// ReportTTL is how long the error report can be downloaded.
	ReportTTL time.Duration
}

// Importer is the import:customers handler.
type Importer struct {
	store *store.Store
	files *files.Store
	cfg   Config
}

// New returns the import handler.
func New(st *store.Store, fs *files.Store, cfg Config) *Importer {
	return &Importer{store: st, files: fs, cfg: cfg}
}

// Type implements jobs.Handler.
func (im *Importer) Type() string { return Type }

// checkpoint is where a resumed attempt starts: after row Row, with the header already read.
type checkpoint struct {
	Row       int      `json:"row"`
	HeaderRow int      `json:"header_row"`
	Header    []string `json:"header"`
}

// batch is up to BatchSize consecutive rows, validated.
type batch struct {
	customers []store.CustomerRow
	raw       [][]string // original cells of each customer, by index, for a later rejection
	rejected  []store.Item
	rows      int // data rows (not blank) in the batch
	last      int // the last row number read
}

// Summary is the outcome an import reports.
type Summary struct {
	Total   int64 `json:"total"`
	Success int64 `json:"success"`
	Failed  int64 `json:"failed"`
}

// ResultData is the task result of an import.
type ResultData struct {
	Summary         Summary  `json:"summary"`
	ErrorReport     string   `json:"error_report,omitempty"`      // data-dir path
	ErrorReportName string   `json:"error_report_name,omitempty"` // download name
	FirstErrors     []string `json:"first_errors,omitempty"`      // "row 128, phone: must be …"
}

// Run implements jobs.Handler.
func (im *Importer) Run(ctx context.Context, run *jobs.Run) (jobs.Result, error) {
	var p Params
	if err := run.Params(&p); err != nil {
		return jobs.Result{}, err
	}
	abs, err := im.files.Path(p.Upload)
	if err != nil {
		return jobs.Result{}, jobs.BadInput("bad_params", "the task has no usable upload")
	}
	if _, err := os.Stat(abs); errors.Is(err, os.ErrNotExist) {
		return jobs.Result{}, jobs.BadInput("upload_missing", "the uploaded file is no longer available; upload it again")
	}
	lim := im.cfg.Limits
	lim.SkipRowCount = p.Rows > 0
	ins, err := Inspect(abs, p.Format, p.Sheet, lim)
	if err != nil {
		return jobs.Result{}, badFile(err)
	}
	ins.Rows = max(ins.Rows, p.Rows)
	src, err := openSource(abs, ins, im.cfg.Limits, filepath.Join(im.files.Root(), files.Temp))
	if err != nil {
		return jobs.Result{}, badFile(err)
	}
	defer src.Close()

	var cp checkpoint
	if len(run.Task.Checkpoint) > 0 {
		if err := json.Unmarshal(run.Task.Checkpoint, &cp); err != nil {
			return jobs.Result{}, fmt.Errorf("read checkpoint: %w", err)
		}
	}
	cols, err := readHeader(src, &cp)
	if err != nil {
		return jobs.Result{}, badFile(err)
	}
	if cp.Row > cp.HeaderRow {
		run.Log(ctx, slog.LevelInfo, fmt.Sprintf("resuming after row %d", cp.Row))
	}
	estimate := int64(max(ins.Rows-cp.HeaderRow, 0))

	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	batches := make(chan batch, 2)
	readErr := make(chan error, 1)
	go func() {
		defer close(batches)
		readErr <- im.read(readCtx, src, &cols, cp, batches)
	}()
	for b := range batches {
		cp.Row = b.last
		if err := run.CommitBatch(ctx, im.write(run.Task.ID, p.Mode == ModeInsert, b, cp, estimate)); err != nil {
			stopReading()
			for range batches { //nolint:revive // let the reader finish
			}
			return jobs.Result{}, err
		}
	}
	if err := <-readErr; err != nil {
		return jobs.Result{}, badFile(err)
	}
	return im.finish(ctx, run)
}

// badFile turns a file problem into bad input; anything else stays transient.
func badFile(err error) error {
	var fp *FileProblem
	if errors.As(err, &fp) {
		return jobs.BadInput(fp.Code, "%s", fp.Message)
	}
	return err
}

// readHeader finds the header row (or re-reads it on resume) and maps its columns.
func readHeader(src source, cp *checkpoint) (columns, error) {
	const searchRows = 10
	for src.Next() {
		n, cells := src.Row()
		if cp.HeaderRow > 0 {
			if n < cp.HeaderRow {
				continue
			}
			cols, _, err := mapHeader(cells)
			return cols, err
		}
		if n > searchRows {
			break
		}
		if blank(cells) {
			continue
		}
		cols, known, err := mapHeader(cells)
		if known >= 2 { // a title row above the header names at most one column
			if err != nil {
				return cols, problem(Invalid, "missing_columns", "row %d: %v", n, err)
			}
			cp.HeaderRow = n
			cp.Row = n
			cp.Header = append([]string(nil), cells...)
			return cols, nil
		}
	}
	if err := src.Err(); err != nil {
		return columns{}, err
	}
	if cp.HeaderRow > 0 {
		return columns{}, problem(Invalid, "damaged_file", "the file changed since the import started")
	}
	return columns{}, problem(Invalid, "missing_header",
		"no header row found in the first %d rows; the first row should name the columns, e.g. code (客户编号), name (客户名称), phone (手机号)", searchRows)
}

// read streams rows after the checkpoint, validates them and sends batches.
func (im *Importer) read(ctx context.Context, src source, cols *columns, cp checkpoint, out chan<- batch) error {
	b := batch{}
	send := func() bool {
		select {
		case out <- b:
			b = batch{}
			return true
		case <-ctx.Done():
			return false
		}
	}
	for src.Next() {
		n, cells := src.Row()
		if n <= cp.Row {
			continue // committed by an earlier attempt
		}
		if lim := im.cfg.Limits.MaxRows; lim > 0 && n-cp.HeaderRow > lim {
			return problem(Invalid, "too_many_rows", "the sheet has more than %d data rows; split it", lim)
		}
		b.last = n
		if blank(cells) {
			continue
		}
		b.rows++
		c, errs := cols.validate(n, cells)
		if len(errs) > 0 {
			fields, msg := rowMessage(errs)
			b.rejected = append(b.rejected, item(n, fields, msg, cells))
		} else {
			b.customers = append(b.customers, c)
			b.raw = append(b.raw, cells)
		}
		if b.rows >= im.cfg.BatchSize && !send() {
			return nil
		}
	}
	if err := src.Err(); err != nil {
		return err
	}
	if b.last > 0 {
		send()
	}
	return nil
}

func item(row int, fields, message string, cells []string) store.Item {
	raw, _ := json.Marshal(cells)
	return store.Item{Row: row, Field: fields, Message: message, Raw: raw}
}

// write is one batch's transaction: customers, rejected rows, and the batch's bookkeeping.
func (im *Importer) write(taskID int64, insertOnly bool, b batch, cp checkpoint, estimate int64) func(context.Context, bun.Tx) (store.Batch, error) {
	return func(ctx context.Context, tx bun.Tx) (store.Batch, error) {
		rejected := append([]store.Item(nil), b.rejected...)
		// A code twice in one batch: the first row wins, later ones are rejected.
		first := make(map[string]int, len(b.customers))
		unique := make([]store.CustomerRow, 0, len(b.customers))
		uniqueRaw := make([][]string, 0, len(b.customers))
		for i, c := range b.customers {
			if row, dup := first[c.Code]; dup {
				rejected = append(rejected, item(c.Row, "code", fmt.Sprintf("code: %s already appears in row %d", c.Code, row), b.raw[i]))
				continue
			}
			first[c.Code] = c.Row
			unique = append(unique, c)
			uniqueRaw = append(uniqueRaw, b.raw[i])
		}
		conflicts, err := store.WriteCustomers(ctx, tx, taskID, unique, insertOnly)
		if err != nil {
			return store.Batch{}, err
		}
		for i, c := range unique {
			switch conflict, ok := conflicts[c.Code]; {
			case !ok:
			case conflict.EarlierRow > 0:
				rejected = append(rejected, item(c.Row, "code", fmt.Sprintf("code: %s already appears in row %d", c.Code, conflict.EarlierRow), uniqueRaw[i]))
			default:
				rejected = append(rejected, item(c.Row, "code", fmt.Sprintf("code: %s already exists", c.Code), uniqueRaw[i]))
			}
		}
		for i := range rejected {
			rejected[i].TaskID = taskID
		}
		if err := store.InsertItems(ctx, tx, rejected); err != nil {
			return store.Batch{}, err
		}
		cpJSON, _ := json.Marshal(cp)
		done := int64(b.last - cp.HeaderRow)
		return store.Batch{
			Checkpoint: cpJSON, TotalDelta: int64(b.rows),
			SuccessDelta: int64(len(unique) - len(conflicts)), FailedDelta: int64(len(rejected)),
			ProgressCurrent: done, ProgressTotal: max(estimate, done),
		}, nil
	}
}

// finish reads the final counts, writes the error report, and decides the status.
func (im *Importer) finish(ctx context.Context, run *jobs.Run) (jobs.Result, error) {
	task, err := im.store.GetByID(ctx, run.Task.ID)
	if err != nil {
		return jobs.Result{}, err
	}
	if task.TotalCount == 0 {
		return jobs.Result{}, jobs.BadInput("no_rows", "the sheet has a header row but no data rows below it")
	}
	data := ResultData{Summary: Summary{Total: task.TotalCount, Success: task.SuccessCount, Failed: task.FailedCount}}
	res := jobs.Result{Status: store.StatusSuccess, Data: &data,
		Message: fmt.Sprintf("imported %d of %d rows; %d failed", task.SuccessCount, task.TotalCount, task.FailedCount)}
	if task.FailedCount == 0 {
		return res, nil
	}
	res.Status = store.StatusPartialSuccess
	var cp checkpoint
	json.Unmarshal(task.Checkpoint, &cp) //nolint:errcheck // written by this package
	rel, first, err := writeErrorReport(ctx, im.store, im.files, task, cp.Header)
	if err != nil {
		return jobs.Result{}, err
	}
	data.ErrorReport = rel
	data.ErrorReportName = "errors-" + task.TaskNo + ".xlsx"
	data.FirstErrors = first
	expires := time.Now().Add(im.cfg.ReportTTL).UTC()
	res.ExpiresAt = &expires
	res.Files = []string{rel}
	return res, nil
}
