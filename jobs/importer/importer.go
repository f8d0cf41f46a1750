// Package importer is the import:customers task type: a spreadsheet (.xlsx, .xls or .csv,
// read by internal/sheet) of customers streamed row by row, validated, and written in batches
// of about a thousand rows.
// Each batch commits in one transaction with its checkpoint, counts and rejected rows, fenced
// by the attempt, so an import resumes exactly where its last batch ended: no row is written
// twice and none is skipped.
package importer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/sheet"
	"github.com/taskcenter/taskcenter/internal/sheet/sheettype"
	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/customers"
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
	Upload   string       `json:"upload"` // storage key of the stored upload
	Format   sheet.Format `json:"format"`
	Mode     string       `json:"mode"`
	Sheet    string       `json:"sheet,omitempty"`
	Filename string       `json:"filename"` // as uploaded, for display only
	Size     int64        `json:"size"`
	SHA256   string       `json:"sha256"`
	Rows     int          `json:"rows"` // data rows (below the header) as submit counted or read them
	// Encoding is a CSV's text encoding as submit resolved it; empty is UTF-8 (tasks made
	// before GB18030 was read).
	Encoding sheet.Encoding `json:"encoding,omitempty"`
	// Lang is the language of the error report and of first_errors: "zh" or "en" (empty),
	// from the uploader's Accept-Language.
	Lang string `json:"lang,omitempty"`
}

// Config tunes imports.
type Config struct {
	// Limits bound the file and what the import holds of it; zero fields take their defaults.
	Limits sheet.Limits
	// BatchSize is the rows written per transaction.
	BatchSize int
	// ReportTTL is how long the error report can be downloaded.
	ReportTTL time.Duration
}

// Importer is the import:customers handler.
type Importer struct {
	store *store.Store
	files storage.Store
	cfg   Config

	// afterCommit, when set (by tests), runs after each batch has committed.
	afterCommit func(ctx context.Context, run *jobs.Run, batch int)
}

// New returns the import handler.
func New(st *store.Store, fs storage.Store, cfg Config) *Importer {
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
	customers []customers.Row
	raw       [][]string // original cells of each customer (see rawCells), for a later rejection
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
	FirstErrors     []string `json:"first_errors,omitempty"`      // "row 128, phone: must be …", always English (see messages.go)
	ErrorReportLang Lang     `json:"error_report_lang,omitempty"` // the language the stored report is in
	// NotImported says which rows were left out when the sheet turned out, while it was
	// being imported, to hold more rows than the limit (PARTIAL_SUCCESS).
	NotImported string `json:"not_imported,omitempty"`
}

// Run implements jobs.Handler.
func (im *Importer) Run(ctx context.Context, run *jobs.Run) (jobs.Result, error) {
	var p Params
	if err := run.Params(&p); err != nil {
		return jobs.Result{}, err
	}
	obj, err := im.openUpload(ctx, p.Upload)
	if err != nil {
		return jobs.Result{}, err
	}
	cp, err := readCheckpoint(run.Task.Checkpoint)
	if err != nil {
		obj.Close()
		return jobs.Result{}, err
	}
	// A checkpoint is only ever written with a committed batch.
	resumed := cp.HeaderRow > 0
	lim := im.cfg.Limits.WithDefaults()
	src, ins, err := im.openSheet(obj, p, resumed, lim)
	if err != nil {
		return jobs.Result{}, err
	}
	defer src.Close()

	cols, err := readHeader(src, &cp)
	if err != nil {
		return jobs.Result{}, obj.badFile(err)
	}
	if resumed {
		run.Log(ctx, slog.LevelInfo, msg.New("log.resuming", "row", strconv.Itoa(cp.Row)))
	}
	// Data rows below the header (ins.Rows counts from row 2).
	estimate := int64(max(ins.Rows+1-cp.HeaderRow, 0))

	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	batches := make(chan batch, 2)
	readErr := make(chan error, 1)
	go func() {
		defer close(batches)
		readErr <- im.read(readCtx, src, &cols, cp, resumed, lim, batches)
	}()
	abandon := func(err error) (jobs.Result, error) {
		stopReading()
		for range batches { //nolint:revive // let the reader finish
		}
		return jobs.Result{}, err
	}
	committed := 0
	for b := range batches {
		cp.Row = b.last
		err := run.CommitBatch(ctx, im.write(run.Task.ID, p.Mode == ModeInsert, b, cp, estimate))
		committed++
		if im.afterCommit != nil && (err == nil || errors.Is(err, jobs.ErrCancelRequested)) {
			im.afterCommit(ctx, run, committed)
		}
		if errors.Is(err, jobs.ErrCancelRequested) {
			// The batch is committed. If it was the last one the import is complete: a
			// cancel that comes after the work is done does not undo it.
			if _, more := <-batches; more {
				return abandon(err)
			}
			rerr := <-readErr
			if rerr != nil && !isRowLimit(rerr) {
				return jobs.Result{}, err
			}
			run.Log(ctx, slog.LevelWarn, msg.New("log.cancel_too_late"))
			return im.finish(ctx, run, rerr)
		}
		if err != nil {
			return abandon(err)
		}
	}
	rerr := <-readErr
	if rerr != nil && !isRowLimit(rerr) {
		return jobs.Result{}, obj.badFile(rerr)
	}
	return im.finish(ctx, run, rerr)
}

// openUpload opens the task's upload where it is stored: random access for a workbook (a
// zip), one sequential read for a CSV. On s3 that is ranged GETs, so RSS stays flat.
func (im *Importer) openUpload(ctx context.Context, key string) (*watchedObject, error) {
	stored, err := im.files.Open(ctx, key)
	switch {
	case errors.Is(err, storage.ErrInvalidKey):
		return nil, jobs.BadInput("bad_params", "the task has no usable upload")
	case errors.Is(err, storage.ErrNotExist):
		return nil, jobs.BadInput("upload_missing", "the uploaded file is no longer available; upload it again")
	case err != nil:
		return nil, fmt.Errorf("open the upload: %w", err)
	}
	return &watchedObject{Object: stored}, nil
}

// readCheckpoint reads where an earlier attempt's last committed batch ended; the zero
// checkpoint when there is none.
func readCheckpoint(b []byte) (checkpoint, error) {
	var cp checkpoint
	if len(b) > 0 {
		if err := json.Unmarshal(b, &cp); err != nil {
			return cp, fmt.Errorf("read checkpoint: %w", err)
		}
	}
	return cp, nil
}

// openSheet checks the upload again and opens its sheet. The reader closes obj; on error,
// openSheet does. Before the first batch the rows are counted for real: a sheet may declare
// two rows and hold a million, and a file over the limit must fail before anything is
// written. A resumed attempt has committed rows already and trusts the count its first
// attempt made.
func (im *Importer) openSheet(obj *watchedObject, p Params, resumed bool, lim sheet.Limits) (*sheet.Reader, sheet.Inspection, error) {
	fail := func(err error) (*sheet.Reader, sheet.Inspection, error) {
		err = obj.badFile(err)
		obj.Close()
		return nil, sheet.Inspection{}, err
	}
	mode := sheet.CountAlways
	if resumed {
		mode = sheet.CountNever
	}
	c := sheet.Choice{Format: p.Format, Sheet: p.Sheet, Encoding: cmp.Or(p.Encoding, sheet.EncodingUTF8)}
	ins, err := sheet.Inspect(obj, obj.Size(), c, sheet.Options{Limits: lim, Count: mode, IsHeader: isHeader})
	if err != nil {
		return fail(err)
	}
	if !ins.Counted {
		ins.Rows = max(ins.Rows, p.Rows)
	}
	src, err := sheet.Open(obj, ins, lim, im.files.TempDir())
	if err != nil {
		return fail(err)
	}
	return src, ins, nil
}

// badFile turns a file problem (the reader's or the import's own) into bad input; anything
// else stays transient.
func badFile(err error) error {
	var fp *FileProblem
	if errors.As(fileProblem(err), &fp) {
		return jobs.BadInput(fp.Code, "%s", fp.Message)
	}
	return err
}

// errRowLimit ends reading at the row limit once rows have been committed: the rows after
// lastRow are left out and the import ends PARTIAL_SUCCESS saying so.
type errRowLimit struct {
	lastRow int // the last row imported
	limit   int
}

func (e *errRowLimit) Error() string { return e.message().English() }

// message is the limit said by the catalogue.
func (e *errRowLimit) message() msg.Message {
	m := msg.New("log.row_limit")
	m.Params = e.params()
	return m
}

// params are the limit's catalogue params.
func (e *errRowLimit) params() msg.Params {
	return msg.Params{"last_row": sheettype.Thousands(int64(e.lastRow)), "limit": sheettype.Thousands(int64(e.limit))}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func isRowLimit(err error) bool {
	var rl *errRowLimit
	return errors.As(err, &rl)
}

// readHeader finds the header row (or re-reads it on resume) and maps its columns.
func readHeader(src *sheet.Reader, cp *checkpoint) (columns, error) {
	const searchRows = sheet.HeaderSearchRows
	for src.Next() {
		n, cells := src.Row()
		if cp.HeaderRow > 0 {
			if n < cp.HeaderRow {
				continue
			}
			cols, _, err := mapHeader(cells)
			if err != nil {
				return cols, problem(Invalid, "missing_columns", "row %d: %v", n, err)
			}
			return cols, nil
		}
		if n > searchRows {
			break
		}
		if sheet.Blank(cells) {
			continue
		}
		cols, known, err := mapHeader(cells)
		if known >= 2 { // a title row above the header names at most one column
			if err != nil {
				return cols, problem(Invalid, "missing_columns", "row %d: %v", n, err)
			}
			cp.HeaderRow = n
			cp.Row = n
			cp.Header = rawCells(cells)
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

// read streams rows after the checkpoint, validates them and sends batches. At the row
// limit it fails the file if nothing has been committed yet (and sends nothing), or else
// sends what it has and returns errRowLimit.
func (im *Importer) read(ctx context.Context, src *sheet.Reader, cols *columns, cp checkpoint, resumed bool, lim sheet.Limits, out chan<- batch) error {
	b := batch{}
	sent := resumed
	send := func() bool {
		select {
		case out <- b:
			b = batch{}
			sent = true
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
		long := src.Long()
		if len(long) == 0 && sheet.Blank(cells) {
			b.last = n
			continue
		}
		if n-cp.HeaderRow > lim.MaxRows {
			// The count before the first batch saw fewer rows than there are (rows the byte
			// scan cannot recognise).
			if !sent {
				return sheet.OverRowLimit("the sheet", n-cp.HeaderRow, lim)
			}
			if b.last > 0 && !send() {
				return nil
			}
			return &errRowLimit{lastRow: cp.HeaderRow + lim.MaxRows, limit: lim.MaxRows}
		}
		b.last = n
		b.rows++
		c, errs := cols.validate(n, cells, long)
		if len(errs) > 0 {
			fields, msg := rowMessage(errs)
			b.rejected = append(b.rejected, item(n, fields, msg, cells))
		} else {
			b.customers = append(b.customers, c)
			b.raw = append(b.raw, rawCells(cells))
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

// item is a rejected row: its cells are stored cut down (rawCells), never in full.
func item(row int, fields, message string, cells []string) store.Item {
	return store.Item{Row: row, Field: fields, Message: message, Raw: rawJSON(cells)}
}

// write is one batch's transaction: customers, rejected rows, and the batch's bookkeeping.
func (im *Importer) write(taskID int64, insertOnly bool, b batch, cp checkpoint, estimate int64) func(context.Context, bun.Tx) (store.Batch, error) {
	return func(ctx context.Context, tx bun.Tx) (store.Batch, error) {
		rejected := append([]store.Item(nil), b.rejected...)
		// A code twice in one batch: the first row wins, later ones are rejected.
		first := make(map[string]int, len(b.customers))
		unique := make([]customers.Row, 0, len(b.customers))
		uniqueRaw := make([][]string, 0, len(b.customers))
		for i, c := range b.customers {
			if row, dup := first[c.Code]; dup {
				rejected = append(rejected, item(c.Row, "code", "code: "+msgDuplicate.text(c.Code, strconv.Itoa(row)), b.raw[i]))
				continue
			}
			first[c.Code] = c.Row
			unique = append(unique, c)
			uniqueRaw = append(uniqueRaw, b.raw[i])
		}
		conflicts, err := customers.Write(ctx, tx, taskID, unique, insertOnly)
		if err != nil {
			return store.Batch{}, err
		}
		for i, c := range unique {
			switch conflict, ok := conflicts[c.Code]; {
			case !ok:
			case conflict.EarlierRow > 0:
				rejected = append(rejected, item(c.Row, "code", "code: "+msgDuplicate.text(c.Code, strconv.Itoa(conflict.EarlierRow)), uniqueRaw[i]))
			default:
				rejected = append(rejected, item(c.Row, "code", "code: "+msgExists.text(c.Code), uniqueRaw[i]))
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

// finish reads the final counts, writes the error report, and decides the status. readErr
// is nil, or the errRowLimit that cut the import short. Every file it writes is named after
// the lease's attempt, never after the re-read row's: a superseded attempt must not touch
// the live attempt's files.
func (im *Importer) finish(ctx context.Context, run *jobs.Run, readErr error) (jobs.Result, error) {
	row, err := im.store.GetByID(ctx, run.Lease.TaskID)
	if err != nil {
		return jobs.Result{}, err
	}
	if row.Attempt != run.Lease.Attempt {
		return jobs.Result{}, fmt.Errorf("finish %s (the task is at attempt %d): %w", run.Lease, row.Attempt, store.ErrFenced)
	}
	if row.TotalCount == 0 {
		return jobs.Result{}, jobs.BadInput("no_rows", "the sheet has a header row but no data rows below it")
	}
	counts := task.Counts{Total: row.TotalCount, Success: row.SuccessCount, Failed: row.FailedCount}
	data := ResultData{Summary: Summary{Total: counts.Total, Success: counts.Success, Failed: counts.Failed}}
	var rl *errRowLimit
	cutShort := errors.As(readErr, &rl)
	status, code := task.Outcome(counts, cutShort)
	// The rows read are the file's one row total: progress ends there, not at the sheet's
	// last row number (blank rows are not rows).
	said := msg.Params{"success": itoa(counts.Success), "total": itoa(counts.Total), "failed": itoa(counts.Failed)}
	res := jobs.Result{Status: status, ErrorCode: code, Data: &data, Counts: &counts, Log: msg.New("log.imported")}
	res.Log.Params = said
	if code == task.CodeAllRowsRejected {
		res.ErrorParams = msg.Params{"total": itoa(counts.Total)}
		res.ErrorMessage = msg.Render(msg.EN, "error."+code, res.ErrorParams)
		res.Log.Code = "log.all_rejected"
	}
	if cutShort {
		data.NotImported = rl.Error()
		maps.Copy(said, rl.params())
		res.Log.Code += "_cut"
		run.Log(ctx, slog.LevelWarn, rl.message())
	}
	if counts.Failed == 0 {
		return res, nil
	}
	var cp checkpoint
	json.Unmarshal(row.Checkpoint, &cp) //nolint:errcheck // written by this package
	var p Params
	run.Params(&p) //nolint:errcheck // Run read them already
	lang := ParseLang(p.Lang)
	rel, first, err := writeErrorReport(ctx, im.store, im.files, run.Lease, run.TempPrefix(), cp.Header, lang)
	if err != nil {
		return jobs.Result{}, err
	}
	data.ErrorReport = rel
	data.ErrorReportName = "errors-" + run.Lease.TaskNo + ".xlsx"
	data.ErrorReportLang = lang
	data.FirstErrors = first
	expires := time.Now().Add(im.cfg.ReportTTL).UTC()
	res.ExpiresAt = &expires
	res.Files = []string{rel}
	return res, nil
}

// Title is the task's title: the file it imports, and the mode when it is not the default.
func (p *Params) Title() string {
	if p.Mode == ModeInsert {
		return "Import " + p.Filename + " (insert only)"
	}
	return "Import " + p.Filename
}

// Prepare implements jobs.Params. An import's parameters are set by its upload, never sent
// by a client, so there is nothing to check.
func (*Params) Prepare(jobs.Who) error { return nil }

// TaskType declares import:customers. It is submitted by uploading a file (POST
// /api/v1/imports), not through the generic submit.
func TaskType(st *store.Store, fs storage.Store, cfg Config) jobs.Type {
	return jobs.Type{
		Name: Type, Description: "Import customers from an uploaded .xlsx or .csv file (POST /api/v1/imports).",
		Queue: "imports", Submittable: false,
		NewParams: func() jobs.Params { return &Params{} },
		Title:     `{{.Title}}`,
		Policy:    jobs.Policy{MaxRetry: 3, RetryBase: 30 * time.Second, Timeout: 30 * time.Minute, MaxRuntime: 6 * time.Hour, StallAfter: 10 * time.Minute},
		Handler:   New(st, fs, cfg),
	}
}
