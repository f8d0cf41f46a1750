package importer

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/sheet"
	"github.com/taskcenter/taskcenter/internal/sheet/sheettype"
	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/textcheck"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/store"
)

// Uploads is the import's submit side, the use case behind POST /api/v1/imports, from the
// form to the task: an upload is streamed into the store (under storage.Incoming, no local
// copy on the API node) while it is hashed, its notification checked, the file checked where
// it is stored, recorded (the record, not the object's age, keeps it from the upload
// sweeper), moved under its content hash, and submitted with its notification. The same
// owner, content, mode and sheet make the same task.
type Uploads struct {
	store         *store.Store
	files         storage.Store
	limits        sheet.Limits
	submitter     *jobs.Submitter
	notifications Notifications
	queryTimeout  time.Duration
	// countBytes bounds the bytes of the sheet (or text) submit reads to count its rows
	// (sheet.Options.CountBytes): submitCountBytes, smaller in tests.
	countBytes int64
}

// submitCountBytes is how much of a sheet's XML or a CSV's text submit reads to count rows
// and check lines and encoding: a few tenths of a second of work, whatever the file's size.
// A longer file is accepted with its rows estimated (unless the part read is already over
// the row limit); the worker counts every row before it writes the first batch, and fails
// a file over the limit, or not text in its encoding, with nothing written.
const submitCountBytes = 4 << 20

// UploadsDeps is what the import's submit side works with.
type UploadsDeps struct {
	Store  *store.Store
	Files  storage.Store
	Limits sheet.Limits
	// Submitter creates the import's task and hands it to the workers.
	Submitter *jobs.Submitter
	// Notifications checks a submit's notify_url (jobs/webhook's Policy).
	Notifications Notifications
	// QueryTimeout bounds the submit's statements (zero: the request's time alone); the
	// upload's reads and checks take the request's time.
	QueryTimeout time.Duration
}

// NewUploads returns the import's submit side.
func NewUploads(d UploadsDeps) *Uploads {
	return &Uploads{store: d.Store, files: d.Files, limits: d.Limits, submitter: d.Submitter, notifications: d.Notifications,
		queryTimeout: d.QueryTimeout, countBytes: submitCountBytes}
}

// receivedFile is an uploaded file, stored under storage.Incoming and hashed, not yet checked or
// accepted.
type receivedFile struct {
	Filename string // as uploaded, cleaned for display
	Format   sheet.Format
	Size     int64
	SHA256   string
	key      string // under storage.Incoming until accepted or discarded
	files    storage.Store
}

// discardTimeout bounds the delete of a refused upload, which runs whatever became of the
// request.
const discardTimeout = 10 * time.Second

// Discard deletes a received file that will not be accepted (best effort: the sweep of
// storage.Incoming deletes what is left). It is safe to call after accept.
func (r *receivedFile) Discard() {
	if r == nil || r.key == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), discardTimeout)
	defer cancel()
	r.files.Delete(ctx, r.key) //nolint:errcheck // swept later when this fails
	r.key = ""
}

// receive streams body (the uploaded file called filename) into the store, hashing it, up to
// maxBytes: a bigger file is refused (a *FileProblem of kind TooLarge) without reading more
// than one byte past the limit, and leaves nothing stored. A read error of body is a
// *FormError; a failure of the store is returned wrapped (storage.ErrUnavailable when it
// cannot be reached). ctx bounds the upload (the request's).
func (u *Uploads) receive(ctx context.Context, filename string, body io.Reader, maxBytes int64) (*receivedFile, error) {
	format, err := sheet.FormatOf(filename)
	if err != nil {
		return nil, fileProblem(err)
	}
	var id [16]byte
	rand.Read(id[:]) //nolint:errcheck // never fails
	key := storage.Incoming + "/" + hex.EncodeToString(id[:]) + "." + string(format)
	h := sha256.New()
	in := &capReader{r: io.TeeReader(body, h), limit: maxBytes}
	if _, err := u.files.Put(ctx, key, in, -1, ""); err != nil {
		switch {
		case in.over:
			return nil, TooLargeProblem(maxBytes)
		case in.err != nil:
			return nil, &FormError{in.err} // the body's own error (too large for the request, too slow, cut)
		}
		// The store's failure (storage.ErrUnavailable when it cannot be reached): not the
		// client's form, so not a FormError.
		return nil, fmt.Errorf("store the upload: %w", err)
	}
	return &receivedFile{Filename: filename, Format: format, Size: in.n, SHA256: hex.EncodeToString(h.Sum(nil)), key: key, files: u.files}, nil
}

// capReader passes at most limit bytes of r and fails past them, so a Put of an oversized
// upload fails and stores nothing; it keeps r's own error.
type capReader struct {
	r     io.Reader
	limit int64
	n     int64
	over  bool
	err   error
}

var errOverLimit = errors.New("the upload is over the size limit")

func (c *capReader) Read(p []byte) (int, error) {
	if c.over {
		return 0, errOverLimit
	}
	if room := c.limit - c.n + 1; int64(len(p)) > room {
		p = p[:room] // one byte past the limit is enough to know
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.limit {
		c.over = true
		return 0, errOverLimit
	}
	if err != nil && !errors.Is(err, io.EOF) {
		c.err = err
	}
	return n, err
}

// Submit is what the uploader chose besides the file.
type Submit struct {
	Mode  string // ModeUpsert, ModeInsert or ModeReplace
	Sheet string // empty: the first sheet, or the only one whose header names the columns
	// Encoding of a CSV: empty or auto, utf-8, gb18030 (see sheet.ParseEncoding).
	Encoding string
	// Lang of the error report and first_errors: "zh" or "en" (see Lang).
	Lang string
	// Columns maps headers of the file to fields (header → field name), checked by
	// CheckColumns; applied before the aliases.
	Columns map[string]string
	// DryRun checks everything and writes no customer (the dry_run field: true, false, 1, 0,
	// on, off).
	DryRun bool
}

// maxSheetName caps the sheet field: Excel's own limit for a sheet name.
const maxSheetName = 31

// isChoice reports whether a form field sent beside the file is one of the uploader's
// choices (Submit.Set).
func isChoice(field string) bool {
	switch field {
	case "mode", "encoding", "sheet", "lang", "columns", "dry_run":
		return true
	}
	return false
}

// Set records one of the uploader's choices (isChoice), refusing a value that cannot be one
// with the field named, as soon as it arrives. Other names are ignored.
func (o *Submit) Set(field, value string) error {
	switch field {
	case "mode":
		o.Mode = strings.ToLower(value)
		return checkMode(o.Mode)
	case "encoding":
		o.Encoding = value
		if _, err := sheet.ParseEncoding(value); err != nil {
			return &FileProblem{Kind: Invalid, Code: "bad_encoding", Message: err.Error(),
				Field: "encoding", FieldMessage: textcheck.OneOf("utf-8", "gb18030", "auto")}
		}
	case "sheet":
		o.Sheet = value
		if m, bad := textcheck.Problem(value, maxSheetName); bad {
			return &FileProblem{Kind: Invalid, Code: "bad_sheet", Message: "sheet " + m.English(), Field: "sheet", FieldMessage: m}
		}
	case "lang":
		o.Lang = value
	case "columns":
		cols, err := ParseColumns(value)
		if err != nil {
			return err
		}
		o.Columns = cols
	case "dry_run":
		switch strings.ToLower(value) {
		case "true", "1", "on", "yes":
			o.DryRun = true
		case "false", "0", "off", "no", "":
			o.DryRun = false
		default:
			return &FileProblem{Kind: Invalid, Code: "bad_dry_run", Message: "dry_run must be true or false, not " + textcheck.Echo(value),
				Field: "dry_run", FieldMessage: textcheck.OneOf("true", "false")}
		}
	}
	return nil
}

func checkMode(mode string) error {
	if mode != ModeUpsert && mode != ModeInsert && mode != ModeReplace {
		return &FileProblem{Kind: Invalid, Code: "bad_mode", Message: "mode must be upsert, insert or replace, not " + textcheck.Echo(mode),
			Field: "mode", FieldMessage: textcheck.OneOf(ModeUpsert, ModeInsert, ModeReplace)}
	}
	return nil
}

// recordTimeout bounds the upload's record, written in the database.
const recordTimeout = 5 * time.Second

// accept checks a received file where it is stored (the cheap checks: format, zip sanity,
// size, sheet, rows, a CSV's encoding, all within Limits), records it, moves it under its
// content hash, and returns the task's submission for owner. The received file is consumed
// either way. ctx bounds the reads and the move (the request's). With a column mapping the
// header is checked here too (checkHeader).
func (u *Uploads) accept(ctx context.Context, r *receivedFile, owner string, o Submit) (jobs.Submission, error) {
	defer r.Discard()
	enc, err := checkChoice(o)
	if err != nil {
		return jobs.Submission{}, err
	}
	ins, err := u.inspect(ctx, r.key, sheet.Choice{Format: r.Format, Sheet: o.Sheet, Encoding: enc}, o.Columns)
	if err != nil {
		return jobs.Submission{}, fileProblem(err)
	}
	if err := u.checkHeader(ctx, r.key, ins, o.Columns); err != nil {
		return jobs.Submission{}, err
	}
	// The format is what the content is: an .xls renamed .xlsx is read as the .xls it is.
	rel := storage.Uploads + "/" + r.SHA256 + "." + string(ins.Format)
	// Record first: a sweep of this key (the same content uploaded long ago) holds the
	// record's lock while it deletes the object, so the object moved in next is never lost.
	rctx, cancel := context.WithTimeout(ctx, recordTimeout)
	err = u.store.RecordUpload(rctx, rel, r.SHA256, r.Size)
	cancel()
	if err != nil {
		return jobs.Submission{}, err
	}
	if err := u.files.Move(ctx, r.key, rel); err != nil {
		return jobs.Submission{}, fmt.Errorf("store the upload: %w", err)
	}
	r.key = ""
	return submission(owner, Params{Upload: rel, Filename: r.Filename, Size: r.Size, SHA256: r.SHA256}, ins, o)
}

// checkChoice checks the choices that are not checked as they arrive, and resolves the
// encoding asked for.
func checkChoice(o Submit) (sheet.Encoding, error) {
	if err := checkMode(o.Mode); err != nil {
		return "", err
	}
	if err := CheckColumns(o.Columns); err != nil {
		return "", err
	}
	enc, err := sheet.ParseEncoding(o.Encoding)
	if err != nil {
		return "", fileProblem(err)
	}
	return enc, nil
}

// submission is the task's submission of a stored upload (p's Upload, Filename, Size and
// SHA256) as inspected, with the uploader's choices.
//
// The biz key is of the bytes as uploaded, the mode, the sheet and, when it is not UTF-8,
// the encoding the text is read in: the same file read in another encoding is other data; and
// of the column mapping and dry_run when given: another mapping reads other data, a dry run
// is not the import. The language is not part of it: it only changes how the outcome reads.
func submission(owner string, p Params, ins sheet.Inspection, o Submit) (jobs.Submission, error) {
	p.Format, p.Mode, p.Sheet, p.Rows, p.Lang = ins.Format, o.Mode, ins.Sheet, ins.Rows, string(ParseLang(o.Lang))
	p.Columns, p.DryRun, p.Encoding = o.Columns, o.DryRun, ""
	key := fmt.Sprintf("sha256:%s:%s:%s", p.SHA256, o.Mode, ins.Sheet)
	if ins.Encoding == sheet.EncodingGB18030 {
		p.Encoding = sheet.EncodingGB18030
		key += ":" + string(sheet.EncodingGB18030)
	}
	if len(o.Columns) > 0 {
		doc, _ := json.Marshal(o.Columns) // keys sorted: the same mapping, the same text
		sum := sha256.Sum256(doc)
		key += ":columns:" + hex.EncodeToString(sum[:8])
	}
	if o.DryRun {
		key += ":dry_run"
	}
	params, err := json.Marshal(p)
	if err != nil {
		return jobs.Submission{}, err
	}
	title := jobs.NewTitle(p.TitleMessage())
	return jobs.Submission{Type: Type, Owner: owner, Params: params, BizKey: key, Title: title.Text, TitleMessage: title.Message}, nil
}

// checkHeader reads the header of a stored upload when the uploader mapped columns: each
// header mapped must be one of the file's, and the mapping must leave no required field
// open (a *HeaderError with the details of a mapping form). Without a mapping the worker
// checks the header.
func (u *Uploads) checkHeader(ctx context.Context, key string, ins sheet.Inspection, cols map[string]string) error {
	if len(cols) == 0 {
		return nil
	}
	stored, err := u.files.Open(ctx, key)
	if err != nil {
		return fmt.Errorf("read the upload: %w", err)
	}
	obj := &watchedObject{Object: stored}
	src, err := sheet.Open(obj, ins, u.limits, u.files.TempDir())
	if err != nil {
		obj.Close()
		return fileProblem(err)
	}
	defer src.Close()
	var cp checkpoint
	_, err = readHeader(src, &cp, cols, nil)
	headers := cp.Header
	var he *HeaderError
	if errors.As(err, &he) {
		headers = he.Details.Headers
	}
	if cp.HeaderRow > 0 || he != nil {
		if missing := missingHeaders(cols, headers); len(missing) > 0 {
			quoted := make([]string, len(missing))
			for i, h := range missing {
				quoted[i] = textcheck.Echo(h)
			}
			m := msg.New("field_error.columns_unknown_header",
				"missing", strings.Join(quoted, ", "), "headers", strings.Join(headersIn(headers), ", "))
			return &FileProblem{Kind: Invalid, Code: "unknown_column", Message: m.English(), Field: "columns", FieldMessage: m}
		}
	}
	if err != nil {
		return fileProblem(err)
	}
	return nil
}

// headersIn are a header row's cells that are not blank, clipped for a message.
func headersIn(cells []string) []string {
	var out []string
	for _, c := range cells {
		if strings.TrimSpace(c) != "" {
			out = append(out, sheettype.Clip(c, 40))
		}
	}
	return out
}

// inspect runs the submit checks on a stored upload, reading it where it is (ranged reads
// on s3). A read that fails in the store is an error of its own, not a damaged file.
func (u *Uploads) inspect(ctx context.Context, key string, c sheet.Choice, cols map[string]string) (sheet.Inspection, error) {
	stored, err := u.files.Open(ctx, key)
	if err != nil {
		return sheet.Inspection{}, fmt.Errorf("read the upload: %w", err)
	}
	obj := &watchedObject{Object: stored}
	defer obj.Close()
	ins, err := sheet.Inspect(obj, obj.Size(), c, sheet.Options{Limits: u.limits, Count: sheet.CountAuto, IsHeader: mappingOf(cols).headerTest(), CountBytes: u.countBytes})
	if err != nil {
		obj.mu.Lock()
		fault := obj.err
		obj.mu.Unlock()
		if fault != nil {
			return sheet.Inspection{}, fmt.Errorf("read the upload: %w", fault)
		}
		return sheet.Inspection{}, err
	}
	return ins, nil
}

// TooLargeProblem refuses a file over the upload limit of maxBytes, stated in the unit it was
// set in ("the 1,500,000 bytes limit", never "the 1 MB limit" for a limit that is not one).
func TooLargeProblem(maxBytes int64) *FileProblem {
	number, unit := sheettype.LimitParts(maxBytes)
	p := problem(TooLarge, "too_large", "the file is larger than the %s %s limit", number, unit)
	p.Params = msg.Params{"limit": number, "unit": unit}
	return p
}
