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
	"slices"
	"strconv"
	"strings"
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
	"github.com/taskcenter/taskcenter/store/uploads"
)

// Type is the task type of the customer import.
const Type = "import:customers"

// Modes of an import.
const (
	ModeUpsert = "upsert" // insert new codes, update existing ones
	ModeInsert = "insert" // insert new codes; an existing code is a row error
	// ModeReplace upserts like ModeUpsert and then, only when every row was accepted and the
	// whole file was read, removes the customers the file does not hold: the file is the
	// whole list.
	ModeReplace = "replace"
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
	// Columns maps headers of the file to fields (header → field name), applied before the
	// aliases; empty: the aliases, or the owner's saved mapping for the header set.
	Columns map[string]string `json:"columns,omitempty"`
	// DryRun runs every check and writes no customer: the outcome, counts and error report
	// are the ones the import would give.
	DryRun bool `json:"dry_run,omitempty"`
}

// writeMode is how the import's batches write customers.
func (p *Params) writeMode() customers.Mode {
	return customers.Mode{InsertOnly: p.Mode == ModeInsert, DryRun: p.DryRun, KeepCodes: p.Mode == ModeReplace}
}

// hasLastStep reports whether the import ends with a step of its own after its rows: a
// replace removes the customers not in the file (a dry one counts them), and every import
// that kept its file's codes (a replace, a dry run) forgets them.
func (p *Params) hasLastStep() bool { return p.DryRun || p.Mode == ModeReplace }

// Config tunes imports.
type Config struct {
	// Limits bound the file and what the import holds of it; zero fields take their defaults.
	Limits sheet.Limits
	// BatchSize is the rows written per transaction.
	BatchSize int
	// ReportTTL is how long the error report can be downloaded.
	ReportTTL time.Duration
}

// writer is what the import and its undo share: where they write (the customers, the
// rejected rows, the error report) and how they end.
type writer struct {
	store *store.Store
	files storage.Store
	cfg   Config

	// afterCommit, when set (by tests), runs after each batch has committed.
	afterCommit func(ctx context.Context, run *jobs.Run, batch int)
}

// finalRow re-reads the task of run's lease for its final counts. Another attempt having
// taken the task over fences this one: its ending must not write.
func (w *writer) finalRow(ctx context.Context, run *jobs.Run) (*store.Task, error) {
	row, err := w.store.GetByID(ctx, run.Lease.TaskID)
	if err != nil {
		return nil, err
	}
	if row.Attempt != run.Lease.Attempt {
		return nil, fmt.Errorf("finish %s (the task is at attempt %d): %w", run.Lease, row.Attempt, store.ErrFenced)
	}
	return row, nil
}

// withReport writes the error report of the attempt's rejected rows (under header, in lang;
// downloaded as name-<task>.xlsx) and makes it part of res and of its data: the file, kept for
// the report TTL, and the first errors.
func (w *writer) withReport(ctx context.Context, run *jobs.Run, res jobs.Result, data *ResultData, name string, header []string, lang Lang) (jobs.Result, error) {
	rel, first, err := writeErrorReport(ctx, w.store, w.files, run.Lease, run.TempPrefix(), header, lang)
	if err != nil {
		return jobs.Result{}, err
	}
	data.ErrorReport, data.ErrorReportName, data.ErrorReportLang = rel, name+"-"+run.Lease.TaskNo+".xlsx", lang
	data.FirstErrors, data.FirstErrorMessages = first.texts, first.messages
	expires := time.Now().Add(w.cfg.ReportTTL).UTC()
	res.ExpiresAt = &expires
	res.Files = []string{rel}
	return res, nil
}

// Importer is the import:customers handler.
type Importer struct {
	writer
	// inLastStep, when set (by tests), runs inside the last step's transaction once its work
	// is done; an error rolls the step back.
	inLastStep func(ctx context.Context, run *jobs.Run) error
	// afterLastStep, when set (by tests), runs once the last step has committed.
	afterLastStep func(ctx context.Context, run *jobs.Run)
}

// New returns the import handler.
func New(st *store.Store, fs storage.Store, cfg Config) *Importer {
	return &Importer{writer: writer{store: st, files: fs, cfg: cfg}}
}

// Type implements jobs.Handler.
func (im *Importer) Type() string { return Type }

// checkpoint is where a resumed attempt starts: after row Row, with the header already read,
// or, once Phase is phaseDone, at the end. It carries the counts the committed batches add
// up to, since each is committed with them.
type checkpoint struct {
	Row       int      `json:"row"`
	HeaderRow int      `json:"header_row"`
	Header    []string `json:"header"`
	// Columns is the mapping the header was read with (the explicit or the saved one), so a
	// resumed attempt reads it the same way; SavedAt is the date of the saved one applied.
	Columns map[string]string `json:"columns,omitempty"`
	SavedAt *time.Time        `json:"saved_at,omitempty"`
	// Phase is empty while rows are written, phaseDone once the last step has committed.
	Phase     string `json:"phase,omitempty"`
	Inserted  int64  `json:"inserted,omitempty"`
	Updated   int64  `json:"updated,omitempty"`
	Unchanged int64  `json:"unchanged,omitempty"`
	Removed   int64  `json:"removed,omitempty"`
}

// phaseDone marks a checkpoint whose import has committed its last step (hasLastStep).
const phaseDone = "done"

// batch is up to BatchSize consecutive rows, validated.
type batch struct {
	customers []customers.Row
	raw       [][]string // original cells of each customer (see rawCells), for a later rejection
	rejected  []store.Item
	rows      int // data rows (not blank) in the batch
	last      int // the last row number read
}

// Summary is the outcome an import reports: the one type the API and the Go client read.
type Summary = task.ImportSummary

// ResultData is the task result of an import.
type ResultData struct {
	Summary         Summary  `json:"summary"`
	ErrorReport     string   `json:"error_report,omitempty"`      // data-dir path
	ErrorReportName string   `json:"error_report_name,omitempty"` // download name
	FirstErrors     []string `json:"first_errors,omitempty"`      // "row 128, phone: must be …", always English (see messages.go)
	// FirstErrorMessages are FirstErrors as catalogue messages, in the same order.
	FirstErrorMessages []task.RowMessage `json:"first_error_messages,omitempty"`
	ErrorReportLang    Lang              `json:"error_report_lang,omitempty"` // the language the stored report is in
	// NotImported says which rows were left out when the sheet turned out, while it was
	// being imported, to hold more rows than the limit (PARTIAL_SUCCESS).
	NotImported string `json:"not_imported,omitempty"`
	// ColumnMapping says when the owner's saved column mapping was applied to the header.
	ColumnMapping string `json:"column_mapping,omitempty"`
	// DryRun is set on a dry run's result: nothing was written.
	DryRun bool `json:"dry_run,omitempty"`
	// Undoes is set on an undo's result: the import it undid.
	Undoes string `json:"undoes,omitempty"`
	// NothingRemoved says why a replace removed no customer ("nothing removed: 12 rows were
	// rejected"), and NothingRemovedMessage says it as a catalogue message.
	NothingRemoved        string       `json:"nothing_removed,omitempty"`
	NothingRemovedMessage *msg.Message `json:"nothing_removed_message,omitempty"`
}

// Run implements jobs.Handler.
func (im *Importer) Run(ctx context.Context, run *jobs.Run) (jobs.Result, error) {
	var p Params
	if err := run.Params(&p); err != nil {
		return jobs.Result{}, err
	}
	in, headerResult, err := im.begin(ctx, run, p)
	if err != nil || in == nil {
		return headerResult, err
	}
	defer in.src.Close()
	cp := in.cp

	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	batches := make(chan batch, 2)
	readErr := make(chan error, 1)
	go func() {
		defer close(batches)
		readErr <- im.read(readCtx, in.src, &in.cols, cp, in.resumed, in.lim, batches)
	}()
	abandon := func(err error) (jobs.Result, error) {
		stopReading()
		for range batches { //nolint:revive // let the reader finish
		}
		return jobs.Result{}, err
	}
	committed := 0
	for b := range batches {
		next := cp
		next.Row = b.last
		err := run.CommitBatch(ctx, im.write(run.Task.ID, p.writeMode(), b, &next, in.estimate))
		if err == nil || errors.Is(err, jobs.ErrCancelRequested) {
			cp = next
		}
		committed++
		if im.afterCommit != nil && (err == nil || errors.Is(err, jobs.ErrCancelRequested)) {
			im.afterCommit(ctx, run, committed)
		}
		if errors.Is(err, jobs.ErrCancelRequested) {
			// The batch is committed. If it was the last one the rows are all written: a
			// cancel that comes after the work is done does not undo it.
			if _, more := <-batches; more {
				return abandon(err)
			}
			return im.cancelledAtTheEnd(ctx, run, &p, &cp, <-readErr, in.estimate, err)
		}
		if err != nil {
			return abandon(err)
		}
	}
	rerr := <-readErr
	if rerr != nil && !isRowLimit(rerr) {
		return jobs.Result{}, in.obj.badFile(rerr)
	}
	if err := im.lastStep(ctx, run, &p, &cp, isRowLimit(rerr), in.estimate); err != nil {
		if !errors.Is(err, jobs.ErrCancelRequested) || cp.Phase != phaseDone {
			return jobs.Result{}, err
		}
	}
	return im.finish(ctx, run, rerr)
}

// opened is an import's upload, open as a sheet whose header has been read.
type opened struct {
	obj      *watchedObject
	src      *sheet.Reader
	cols     columns
	cp       checkpoint
	resumed  bool
	lim      sheet.Limits
	estimate int64 // data rows below the header
}

// begin opens the upload as a sheet, reads its header (a resumed run reads it as its
// checkpoint keeps it) and says how the run starts. A header that cannot be used is the
// task's result (and no opened sheet), not an error.
func (im *Importer) begin(ctx context.Context, run *jobs.Run, p Params) (*opened, jobs.Result, error) {
	obj, err := im.openUpload(ctx, p.Upload)
	if err != nil {
		return nil, jobs.Result{}, err
	}
	cp, err := readCheckpoint[checkpoint](run.Task.Checkpoint)
	if err != nil {
		obj.Close()
		return nil, jobs.Result{}, err
	}
	// A checkpoint is only ever written with a committed batch.
	in := &opened{obj: obj, cp: cp, resumed: cp.HeaderRow > 0, lim: im.cfg.Limits.WithDefaults()}
	src, ins, err := im.openSheet(obj, p, in.resumed, in.lim)
	if err != nil {
		return nil, jobs.Result{}, err
	}
	in.src = src
	in.cols, err = readHeader(src, &in.cp, p.Columns, func(cells []string) (*uploads.SavedMapping, error) {
		// Keyed as applyMapping saves it: by the header as the checkpoint keeps it.
		return im.store.FindMapping(ctx, run.Task.Owner, HeaderKey(rawCells(cells)))
	})
	if he := (*HeaderError)(nil); errors.As(err, &he) {
		src.Close()
		return nil, headerFailed(he), nil
	}
	if err != nil {
		src.Close()
		return nil, jobs.Result{}, obj.badFile(err)
	}
	src.KeepColumns(in.cols.kept())
	if in.resumed {
		run.Log(ctx, slog.LevelInfo, msg.New("log.resuming", "row", strconv.Itoa(in.cp.Row)))
	} else if err := im.applyMapping(ctx, run, p, in.cp); err != nil {
		src.Close()
		return nil, jobs.Result{}, err
	}
	// Data rows below the header (ins.Rows counts from row 2).
	in.estimate = int64(max(ins.Rows+1-in.cp.HeaderRow, 0))
	return in, jobs.Result{}, nil
}

// cancelledAtTheEnd ends an import whose cancel arrived with its last batch: the rows are all
// written, and a cancel that comes after the work is done does not undo it. A replace's
// removal is work still to do, so the cancel stops it.
func (im *Importer) cancelledAtTheEnd(ctx context.Context, run *jobs.Run, p *Params, cp *checkpoint, rerr error, estimate int64, cancelled error) (jobs.Result, error) {
	if rerr != nil && !isRowLimit(rerr) {
		return jobs.Result{}, cancelled
	}
	if p.Mode == ModeReplace && !p.DryRun {
		run.Log(ctx, slog.LevelWarn, msg.New("log.cancel_before_removal"))
		return jobs.Result{}, cancelled
	}
	run.Log(ctx, slog.LevelWarn, msg.New("log.cancel_too_late"))
	if err := im.lastStep(ctx, run, p, cp, isRowLimit(rerr), estimate); err != nil && !errors.Is(err, jobs.ErrCancelRequested) {
		return jobs.Result{}, err
	}
	return im.finish(ctx, run, rerr)
}

// mayRemove decides whether a replace removes the customers its file does not hold: only
// when every row was accepted and the whole file was read. Otherwise removal says why not
// (the catalogue's nothing_removed.<removal>).
func mayRemove(total, failed int64, cutShort bool) (removes bool, removal string) {
	switch {
	case total == 0:
		return false, "no_rows"
	case failed > 0:
		return false, "rejected"
	case cutShort:
		return false, "cut"
	}
	return true, "removed"
}

// lastStep runs an import's own last step once its rows are written (see hasLastStep), in
// one transaction fenced by the attempt, with the checkpoint that records it done: a
// replace removes the customers its file does not hold (serialised with every other
// replace's removal), a dry replace counts them, and the file's codes are forgotten. An
// attempt that resumes after the step committed finds it done and does not run it again.
// A cancel requested before it stops the import without it.
func (im *Importer) lastStep(ctx context.Context, run *jobs.Run, p *Params, cp *checkpoint, cutShort bool, estimate int64) error {
	if !p.hasLastStep() || cp.Phase == phaseDone {
		return nil
	}
	if p.Mode == ModeReplace && !p.DryRun {
		if err := run.Checkpoint(ctx); err != nil {
			if errors.Is(err, jobs.ErrCancelRequested) {
				run.Log(ctx, slog.LevelWarn, msg.New("log.cancel_before_removal"))
			}
			return err
		}
	}
	next := *cp
	next.Phase = phaseDone
	err := run.CommitBatch(ctx, func(ctx context.Context, tx bun.Tx) (store.Batch, error) {
		total, success, failed, err := store.CountsIn(ctx, tx, run.Task.ID)
		if err != nil {
			return store.Batch{}, err
		}
		remove, _ := mayRemove(total, failed, cutShort)
		switch {
		case p.Mode != ModeReplace || !remove:
			err = customers.ForgetCodes(ctx, tx, run.Task.ID)
		case p.DryRun:
			if next.Removed, err = customers.CountMissing(ctx, tx, run.Task.ID); err == nil {
				err = customers.ForgetCodes(ctx, tx, run.Task.ID)
			}
		default:
			next.Removed, err = customers.RemoveMissing(ctx, tx, run.Task.ID, success)
			if errors.Is(err, customers.ErrCodesIncomplete) {
				err = jobs.BadInput("replace_incomplete", "nothing removed: the import's record of its file is incomplete (%v); import the file again", err)
			}
		}
		if err != nil {
			return store.Batch{}, err
		}
		if im.inLastStep != nil {
			if err := im.inLastStep(ctx, run); err != nil {
				return store.Batch{}, err
			}
		}
		cpJSON, _ := json.Marshal(next)
		done := int64(next.Row - next.HeaderRow)
		return store.Batch{Checkpoint: cpJSON, ProgressCurrent: done, ProgressTotal: max(estimate, done)}, nil
	})
	if err == nil || errors.Is(err, jobs.ErrCancelRequested) {
		*cp = next
		if p.Mode == ModeReplace && !p.DryRun && next.Removed > 0 {
			run.Log(ctx, slog.LevelInfo, msg.New("log.removed_missing", "removed", itoa(next.Removed)))
		}
		if im.afterLastStep != nil {
			im.afterLastStep(ctx, run)
		}
	}
	return err
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

// readCheckpoint reads where an earlier attempt's last committed batch ended (an import's
// checkpoint, an undo's undoCheckpoint); the zero checkpoint when there is none.
func readCheckpoint[C any](b []byte) (C, error) {
	var cp C
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

// savedLookup returns the owner's saved mapping for a header row's header set, nil when
// there is none.
type savedLookup func(cells []string) (*uploads.SavedMapping, error)

// readHeader finds the header row (or re-reads it on resume) and maps its columns: with the
// explicit mapping when there is one, else by the aliases, else (when they do not make a
// usable header) with the owner's mapping saved for the row's header set (saved, nil: none).
// The mapping used and the date of a saved one go into the checkpoint. A header that lacks
// required fields is a *HeaderError.
func readHeader(src *sheet.Reader, cp *checkpoint, explicit map[string]string, saved savedLookup) (columns, error) {
	const searchRows = sheet.HeaderSearchRows
	var (
		candidate    []string // the first row of two or more cells: the header when none names the columns
		candidateRow int
	)
	for src.Next() {
		n, cells := src.Row()
		if cp.HeaderRow > 0 {
			if n < cp.HeaderRow {
				continue
			}
			m := mappingOf(cp.Columns)
			cols, _, err := mapHeader(cells, m)
			if err != nil {
				return cols, headerFailure(n, cells, cols, m, err)
			}
			return cols, nil
		}
		if n > searchRows {
			break
		}
		if sheet.Blank(cells) {
			continue
		}
		used, m := explicit, mappingOf(explicit)
		cols, known, err := mapHeader(cells, m)
		var savedAt *time.Time
		if len(explicit) == 0 && saved != nil && (known < 2 || err != nil) && filled(cells) >= 2 {
			sm, serr := saved(cells)
			if serr != nil {
				return columns{}, serr
			}
			if sm != nil {
				used, m, savedAt = sm.Columns, mappingOf(sm.Columns), &sm.SavedAt
				cols, known, err = mapHeader(cells, m)
			}
		}
		if candidate == nil && filled(cells) >= 2 {
			candidate, candidateRow = slices.Clone(cells), n
		}
		if known >= 2 { // a title row above the header names at most one column
			if err != nil {
				return cols, headerFailure(n, cells, cols, m, err)
			}
			cp.HeaderRow = n
			cp.Row = n
			cp.Header = rawCells(cells)
			cp.Columns, cp.SavedAt = used, savedAt
			return cols, nil
		}
	}
	if err := src.Err(); err != nil {
		return columns{}, err
	}
	if cp.HeaderRow > 0 {
		return columns{}, problem(Invalid, "damaged_file", "the file changed since the import started")
	}
	fp := problem(Invalid, "missing_header",
		"no header row found in the first %d rows; the first row should name the columns, e.g. code (客户编号), name (客户名称), phone (手机号)", searchRows)
	if candidate == nil {
		return columns{}, fp
	}
	m := mappingOf(explicit)
	cols, _, _ := mapHeader(candidate, m)
	details := headerProblem(candidateRow, candidate, cols, m)
	fp.Message += details.describe()
	return columns{}, &HeaderError{FileProblem: fp, Details: details}
}

// filled counts the cells that are not blank.
func filled(cells []string) int {
	n := 0
	for _, c := range cells {
		if strings.TrimSpace(c) != "" {
			n++
		}
	}
	return n
}

// headerFailure is why the header in row n cannot be used: a *HeaderError with the details of
// a mapping form when required fields are missing.
func headerFailure(n int, cells []string, cols columns, m mapping, err error) error {
	var mc *missingColumns
	if !errors.As(err, &mc) {
		return problem(Invalid, "missing_columns", "row %d: %v", n, err)
	}
	details := headerProblem(n, cells, cols, m)
	return &HeaderError{FileProblem: problem(Invalid, "missing_columns", "row %d: %v%s", n, err, details.describe()), Details: details}
}

// headerFailed is the outcome of an import whose header cannot be used: FAILED, with the
// details a mapping form needs in the result (error_details, shown as error.details).
func headerFailed(he *HeaderError) jobs.Result {
	return jobs.Result{Status: store.StatusFailed, ErrorCode: he.Code, ErrorMessage: he.Message, Log: msg.New("log.failed", "code", he.Code, "error", he.Message),
		Data: &headerResult{ErrorDetails: he.Details}}
}

// headerResult is the result of an import that failed on its header.
type headerResult struct {
	ErrorDetails *HeaderProblem `json:"error_details"`
}

// applyMapping records what the header was read with: an explicit mapping is saved for the
// owner under the header set, a saved one applied is said in the log.
func (im *Importer) applyMapping(ctx context.Context, run *jobs.Run, p Params, cp checkpoint) error {
	switch {
	case cp.SavedAt != nil:
		run.Log(ctx, slog.LevelInfo, msg.New("log.saved_mapping_applied", "at", savedMappingTime(*cp.SavedAt)))
	case len(p.Columns) > 0:
		if err := im.store.SaveMapping(ctx, run.Task.Owner, HeaderKey(cp.Header), p.Columns); err != nil {
			return err
		}
		run.Log(ctx, slog.LevelInfo, msg.New("log.mapping_saved"))
	}
	return nil
}

// savedMappingNote says that the owner's saved mapping was applied, in the log and the result.
func savedMappingNote(at time.Time) string {
	return msg.Render(msg.EN, "log.saved_mapping_applied", msg.Params{"at": savedMappingTime(at)})
}

// savedMappingTime is when a saved mapping was saved, as the note says it.
func savedMappingTime(at time.Time) string { return at.UTC().Format("2006-01-02 15:04 UTC") }

// kept is how many columns of each row the import reads: through the last mapped one, and at
// least the maxRawCells a rejected row keeps for the error report. The cells further right
// are skipped by the reader without being decoded (a hostile row can hold 16,384).
func (c *columns) kept() int {
	last := -1
	for _, i := range c {
		last = max(last, i)
	}
	return max(last+1, maxRawCells)
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
			b.rejected = append(b.rejected, item(n, rowParts(errs), cells))
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

// item is a rejected row: its problems as catalogue messages, with the fields and English
// text they make (kept for the readers of those columns), and its cells stored cut down
// (rawCells), never in full.
func item(row int, parts []task.FieldMessage, cells []string) store.Item {
	fields, message := partsText(parts)
	return store.Item{Row: row, Field: fields, Message: message, Messages: parts, Raw: rawJSON(cells)}
}

// write is one batch's transaction: customers, rejected rows, and the batch's bookkeeping.
// It adds the batch's counts to cp, which it commits as the checkpoint; the caller keeps cp
// only when the batch committed.
func (im *Importer) write(taskID int64, mode customers.Mode, b batch, cp *checkpoint, estimate int64) func(context.Context, bun.Tx) (store.Batch, error) {
	return func(ctx context.Context, tx bun.Tx) (store.Batch, error) {
		rejected := append([]store.Item(nil), b.rejected...)
		// A code twice in one batch: the first row wins, later ones are rejected.
		first := make(map[string]int, len(b.customers))
		unique := make([]customers.Row, 0, len(b.customers))
		uniqueRaw := make([][]string, 0, len(b.customers))
		for i, c := range b.customers {
			if row, dup := first[c.Code]; dup {
				rejected = append(rejected, item(c.Row, []task.FieldMessage{msgDuplicate.of("code", c.Code, strconv.Itoa(row))}, b.raw[i]))
				continue
			}
			first[c.Code] = c.Row
			unique = append(unique, c)
			uniqueRaw = append(uniqueRaw, b.raw[i])
		}
		written, err := customers.Write(ctx, tx, taskID, unique, mode)
		if err != nil {
			return store.Batch{}, err
		}
		conflicts := written.Conflicts
		for i, c := range unique {
			switch conflict, ok := conflicts[c.Code]; {
			case !ok:
			case conflict.EarlierRow > 0:
				rejected = append(rejected, item(c.Row, []task.FieldMessage{msgDuplicate.of("code", c.Code, strconv.Itoa(conflict.EarlierRow))}, uniqueRaw[i]))
			default:
				rejected = append(rejected, item(c.Row, []task.FieldMessage{msgExists.of("code", c.Code)}, uniqueRaw[i]))
			}
		}
		for i := range rejected {
			rejected[i].TaskID = taskID
		}
		if err := store.InsertItems(ctx, tx, rejected); err != nil {
			return store.Batch{}, err
		}
		next := *cp
		next.Inserted += int64(written.Inserted)
		next.Updated += int64(written.Updated)
		next.Unchanged += int64(written.Unchanged)
		cpJSON, _ := json.Marshal(next)
		*cp = next
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
	row, err := im.finalRow(ctx, run)
	if err != nil {
		return jobs.Result{}, err
	}
	if row.TotalCount == 0 {
		return jobs.Result{}, jobs.BadInput("no_rows", "the sheet has a header row but no data rows below it")
	}
	var cp checkpoint
	json.Unmarshal(row.Checkpoint, &cp) //nolint:errcheck // written by this package
	var p Params
	run.Params(&p) //nolint:errcheck // Run read them already
	counts := task.Counts{Total: row.TotalCount, Success: row.SuccessCount, Failed: row.FailedCount}
	data := ResultData{Summary: Summary{Total: counts.Total, Success: counts.Success, Failed: counts.Failed,
		Inserted: cp.Inserted, Updated: cp.Updated, Unchanged: cp.Unchanged, Removed: cp.Removed}, DryRun: p.DryRun}
	if cp.SavedAt != nil {
		data.ColumnMapping = savedMappingNote(*cp.SavedAt)
	}
	var rl *errRowLimit
	cutShort := errors.As(readErr, &rl)
	status, code := task.Outcome(counts, cutShort)
	removes, removal := mayRemove(counts.Total, counts.Failed, cutShort)
	// The rows read are the file's one row total: progress ends there, not at the sheet's
	// last row number (blank rows are not rows).
	said := msg.Params{"success": itoa(counts.Success), "total": itoa(counts.Total), "failed": itoa(counts.Failed),
		"inserted": itoa(data.Summary.Inserted), "updated": itoa(data.Summary.Updated), "unchanged": itoa(data.Summary.Unchanged),
		"removed": itoa(data.Summary.Removed), "head": "imported",
		// The clauses a replace and a cut-short sheet add: none unless set below.
		"removal": "", "cut": ""}
	if p.DryRun {
		said["head"] = "dry_run"
	}
	res := jobs.Result{Status: status, ErrorCode: code, Data: &data, Counts: &counts, Log: msg.New("log.import_summary")}
	res.Log.Params = said
	if code == task.CodeAllRowsRejected {
		res.ErrorParams = msg.Params{"total": itoa(counts.Total)}
		res.ErrorMessage = msg.Render(msg.EN, "error."+code, res.ErrorParams)
		said["head"] = "all_rejected"
		if p.DryRun {
			said["head"] = "dry_all_rejected"
		}
	}
	if p.Mode == ModeReplace {
		if p.DryRun {
			removal = "dry_" + removal
		}
		said["removal"] = removal
		if !removes {
			code := "nothing_removed." + removal // rejected, cut or no_rows; dry_ on a dry run
			why := msg.New(code, "failed", itoa(counts.Failed))
			data.NothingRemoved, data.NothingRemovedMessage = why.English(), &why
		}
	}
	if cutShort {
		data.NotImported = rl.Error()
		maps.Copy(said, rl.params())
		said["cut"] = "cut"
		run.Log(ctx, slog.LevelWarn, rl.message())
	}
	if counts.Failed == 0 {
		return res, nil
	}
	return im.withReport(ctx, run, res, &data, "errors", cp.Header, ParseLang(p.Lang))
}

// TitleMessage implements jobs.Titled: the file it imports, the mode when it is not the
// default, and whether it is a dry run ("Import customers.xlsx (replace) (dry run)").
func (p *Params) TitleMessage() msg.Message {
	mode, dry := "", ""
	if p.Mode == ModeInsert || p.Mode == ModeReplace {
		mode = p.Mode
	}
	if p.DryRun {
		dry = "dry_run"
	}
	return msg.New("title.import", "filename", p.Filename, "mode", mode, "dry_run", dry)
}

// Prepare implements jobs.Params. An import's parameters are set by its upload, never sent
// by a client, so there is nothing to check.
func (*Params) Prepare(jobs.Who) error { return nil }

// TaskType declares import:customers. It is submitted by uploading a file (POST
// /api/v1/imports), not through the generic submit.
func TaskType(st *store.Store, fs storage.Store, cfg Config) jobs.Type {
	return importsType(New(st, fs, cfg), "Import customers from an uploaded .xlsx or .csv file (POST /api/v1/imports).",
		"POST /api/v1/imports", func() jobs.Params { return &Params{} })
}

// importsType declares a type of the imports queue that is submitted through its own route
// (via), not the generic submit: the import and its undo share their retry and time limits.
func importsType(h jobs.Handler, description, via string, params func() jobs.Params) jobs.Type {
	return jobs.Type{
		Name: h.Type(), Description: description,
		Queue: "imports", Submittable: false, SubmitVia: via,
		NewParams: params,
		Policy:    jobs.Policy{MaxRetry: 3, RetryBase: 30 * time.Second, Timeout: 30 * time.Minute, MaxRuntime: 6 * time.Hour, StallAfter: 10 * time.Minute},
		Handler:   h,
	}
}
