package importer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"

	"github.com/taskcenter/taskcenter/internal/files"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/store"
)

// Uploads is the import's submit side, the use case behind POST /api/v1/imports: an upload is
// streamed to a temp file while it is hashed, checked, stored under its content hash and
// recorded (the record, not the file's mtime, keeps it from the upload sweeper), and becomes
// the task's submission. The same owner, content, mode and sheet make the same task.
type Uploads struct {
	store  *store.Store
	files  *files.Store
	limits Limits
}

// NewUploads returns the import's submit side.
func NewUploads(st *store.Store, fs *files.Store, limits Limits) *Uploads {
	return &Uploads{store: st, files: fs, limits: limits}
}

// Received is an uploaded file on disk, hashed, not yet checked or stored.
type Received struct {
	Filename string // as uploaded, cleaned for display
	Format   Format
	Size     int64
	SHA256   string
	tmp      *os.File
}

// Discard removes a received file that will not be accepted. It is safe to call after Accept.
func (r *Received) Discard() {
	if r != nil && r.tmp != nil {
		files.Discard(r.tmp)
		r.tmp = nil
	}
}

// Receive streams body (the uploaded file called filename) to a temp file, hashing it, up to
// maxBytes: a bigger file is refused (a *FileProblem of kind TooLarge) without reading more
// than one byte past the limit. A read error of body is returned as it is.
func (u *Uploads) Receive(filename string, body io.Reader, maxBytes int64) (*Received, error) {
	format, err := FormatOf(filename)
	if err != nil {
		return nil, err
	}
	tmp, err := u.files.CreateTemp("upload", path.Ext(filename))
	if err != nil {
		return nil, err
	}
	r := &Received{Filename: filename, Format: format, tmp: tmp}
	h := sha256.New()
	r.Size, err = io.Copy(io.MultiWriter(tmp, h), io.LimitReader(body, maxBytes+1))
	if err != nil {
		r.Discard()
		return nil, err
	}
	if r.Size > maxBytes {
		r.Discard()
		return nil, problem(TooLarge, "too_large", "the file is larger than the %d MB limit", maxBytes>>20)
	}
	r.SHA256 = hex.EncodeToString(h.Sum(nil))
	return r, nil
}

// Submit is what the uploader chose besides the file.
type Submit struct {
	Mode  string // ModeUpsert or ModeInsert
	Sheet string // empty: the first sheet, or the only one whose header names the columns
	// Encoding of a CSV: empty or auto, utf-8, gb18030 (see ParseEncoding).
	Encoding string
	// Lang of the error report and first_errors: "zh" or "en" (see Lang).
	Lang string
}

// Accept checks a received file (the cheap checks: format, zip sanity, size, sheet, rows,
// a CSV's encoding), stores it under its content hash, records it, and returns the task's
// submission for owner. The received file is consumed either way.
//
// The biz key is of the bytes as uploaded, the mode, the sheet and, when it is not UTF-8,
// the encoding the text is read in: the same file read in another encoding is other data.
// The language is not part of it: it only changes how the outcome reads.
func (u *Uploads) Accept(ctx context.Context, r *Received, owner string, o Submit) (jobs.Submission, error) {
	defer r.Discard()
	if o.Mode != ModeUpsert && o.Mode != ModeInsert {
		return jobs.Submission{}, problem(Invalid, "bad_mode", "mode must be upsert or insert")
	}
	enc, err := ParseEncoding(o.Encoding)
	if err != nil {
		return jobs.Submission{}, err
	}
	ins, err := InspectChoice(r.tmp.Name(), Choice{Format: r.Format, Sheet: o.Sheet, Encoding: enc}, u.limits)
	if err != nil {
		return jobs.Submission{}, err
	}
	// The format is what the content is: an .xls renamed .xlsx is read as the .xls it is.
	rel := files.Uploads + "/" + r.SHA256 + "." + string(ins.Format)
	// Record first: a sweep of this path (the same content uploaded long ago) holds the
	// record's lock while it deletes the file, so the file committed next is never lost.
	if err := u.store.RecordUpload(ctx, rel, r.SHA256, r.Size); err != nil {
		return jobs.Submission{}, err
	}
	if err := u.files.Commit(r.tmp, rel); err != nil {
		return jobs.Submission{}, err
	}
	r.tmp = nil
	p := Params{Upload: rel, Format: ins.Format, Mode: o.Mode, Sheet: ins.Sheet,
		Filename: r.Filename, Size: r.Size, SHA256: r.SHA256, Rows: ins.Rows, Lang: string(ParseLang(o.Lang))}
	key := fmt.Sprintf("sha256:%s:%s:%s", r.SHA256, o.Mode, ins.Sheet)
	if ins.Encoding == EncodingGB18030 {
		p.Encoding = EncodingGB18030
		key += ":" + string(EncodingGB18030)
	}
	params, err := json.Marshal(p)
	if err != nil {
		return jobs.Submission{}, err
	}
	return jobs.Submission{Type: Type, Owner: owner, Params: params, BizKey: key}, nil
}
