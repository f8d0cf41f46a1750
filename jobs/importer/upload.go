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

// Accept checks a received file (the cheap checks: format, zip sanity, size, sheet, rows),
// stores it under its content hash, records it, and returns the task's submission for owner.
// The received file is consumed either way.
func (u *Uploads) Accept(ctx context.Context, r *Received, owner, mode, sheet string) (jobs.Submission, error) {
	defer r.Discard()
	if mode != ModeUpsert && mode != ModeInsert {
		return jobs.Submission{}, problem(Invalid, "bad_mode", "mode must be upsert or insert")
	}
	ins, err := Inspect(r.tmp.Name(), r.Format, sheet, u.limits)
	if err != nil {
		return jobs.Submission{}, err
	}
	rel := files.Uploads + "/" + r.SHA256 + "." + string(r.Format)
	// Record first: a sweep of this path (the same content uploaded long ago) holds the
	// record's lock while it deletes the file, so the file committed next is never lost.
	if err := u.store.RecordUpload(ctx, rel, r.SHA256, r.Size); err != nil {
		return jobs.Submission{}, err
	}
	if err := u.files.Commit(r.tmp, rel); err != nil {
		return jobs.Submission{}, err
	}
	r.tmp = nil
	params, err := json.Marshal(Params{Upload: rel, Format: r.Format, Mode: mode, Sheet: ins.Sheet,
		Filename: r.Filename, Size: r.Size, SHA256: r.SHA256, Rows: ins.Rows})
	if err != nil {
		return jobs.Submission{}, err
	}
	return jobs.Submission{Type: Type, Owner: owner, Params: params, BizKey: fmt.Sprintf("sha256:%s:%s:%s", r.SHA256, mode, ins.Sheet)}, nil
}
