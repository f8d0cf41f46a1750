package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/taskcenter/taskcenter/httpapi/identity"
	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/httpapi/request"
	"github.com/taskcenter/taskcenter/internal/sheet"
	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/jobs/importer"
	"github.com/taskcenter/taskcenter/jobs/taskview"
	"github.com/taskcenter/taskcenter/store"
)

// ImportLimits bound uploads.
type ImportLimits struct {
	// MaxUploadBytes caps the uploaded file.
	MaxUploadBytes int64
	// MaxConcurrentUploads caps the uploads one user may have in flight on one API
	// process; more answer 429 too_many_uploads. Default 4.
	MaxConcurrentUploads int
	// File holds the checks an uploaded spreadsheet must pass.
	File sheet.Limits
}

// multipartSlack is room for the multipart framing and the small form fields.
const multipartSlack = 64 << 10

// submitImport answers POST /api/v1/imports (multipart: file, mode, sheet, encoding, lang).
// It streams the upload to disk while hashing it, runs the cheap checks, stores the file
// under its content hash, and creates the task. The same owner, file, mode and sheet give
// back the first task. The error report's language is the lang field, else the request's
// Accept-Language.
func (s *Server) submitImport(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	limit := s.Import.MaxUploadBytes
	if r.ContentLength > limit+multipartSlack {
		return tooLarge(limit)
	}
	release, ok := s.uploads.acquire(p.User)
	if !ok {
		pr := problem.New(http.StatusTooManyRequests, "too_many_uploads",
			fmt.Sprintf("you already have %d uploads in progress; wait for one to finish", s.Import.MaxConcurrentUploads))
		pr.WithRetryAfter(5)
		return pr
	}
	defer release()
	r.Body = http.MaxBytesReader(w, r.Body, limit+multipartSlack)
	mr, err := r.MultipartReader()
	if err != nil {
		return problem.New(http.StatusUnsupportedMediaType, "unsupported_media_type",
			`send multipart/form-data with the spreadsheet in a "file" field (curl -F file=@customers.xlsx)`)
	}
	form, err := s.readImportForm(r, mr, limit)
	defer func() { form.received.Discard() }()
	if err != nil {
		return err
	}
	hook := notifyOf(form.notify.URL, form.notify.Secret)
	if err := hook.check(r.Context(), s); err != nil {
		return err
	}
	// The checks read the stored upload (ranged reads on s3): the request's time, not a
	// query's.
	sub, err := s.Uploads.Accept(r.Context(), form.received, p.User, form.choice)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.QueryTimeout)
	defer cancel()
	sub.RequestID = problem.RequestID(r.Context())
	if t, ok := s.Types.Lookup(sub.Type); ok {
		params := t.NewParams()
		if json.Unmarshal(sub.Params, params) == nil {
			sub.Title = t.TitleOf(params)
		}
	}
	return s.submit(w, r.WithContext(ctx), sub, hook)
}

// importForm is an import's multipart form as read: the received file, the uploader's
// choices and the notification asked for.
type importForm struct {
	received *importer.Received
	choice   importer.Submit
	notify   notifyRequest
}

// readImportForm reads the form's parts in the order sent: the file is streamed to storage
// as it arrives, and the uploader's choices are the import's to check (importer.Submit.Set),
// each as it arrives, so a bad one is refused before a large file after it is read. The
// received file is the caller's to discard, also on an error.
func (s *Server) readImportForm(r *http.Request, mr *multipart.Reader, limit int64) (importForm, error) {
	f := importForm{choice: importer.Submit{Mode: importer.ModeUpsert, Lang: r.Header.Get("Accept-Language")}}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return f, uploadError(err, limit)
		}
		switch name := part.FormName(); name {
		case "file":
			if f.received != nil {
				return f, problem.BadRequest("invalid_upload", `send one "file" field`)
			}
			f.received, err = s.Uploads.Receive(r.Context(), cleanFilename(part.FileName()), part, limit)
			var fp *importer.FileProblem
			switch {
			case errors.As(err, &fp):
				return f, err
			case err != nil:
				return f, uploadError(err, limit)
			}
		case "notify_url":
			if f.notify.URL, err = smallField(part, limit); err != nil {
				return f, err
			}
		case "notify_secret":
			if f.notify.Secret, err = smallField(part, limit); err != nil {
				return f, err
			}
		default:
			if !importer.IsChoice(name) {
				continue // a field the import does not read
			}
			v, err := smallField(part, limit)
			if err != nil {
				return f, err
			}
			if err := f.choice.Set(name, v); err != nil {
				return f, err
			}
		}
	}
	if f.received == nil {
		return f, problem.BadRequest("invalid_upload", `the form has no "file" field; send the spreadsheet as file=@customers.xlsx`)
	}
	return f, nil
}

func tooLarge(limit int64) *problem.Problem {
	return problem.New(http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the file is larger than the %d MB limit", limit>>20))
}

func uploadError(err error, limit int64) error {
	var mbe *http.MaxBytesError
	var slow *request.SlowBodyError
	if errors.As(err, &mbe) {
		return tooLarge(limit)
	}
	if errors.As(err, &slow) {
		return slow.Problem()
	}
	return problem.BadRequest("invalid_upload", "the upload could not be read: %v", err)
}

// smallField reads a short form value.
func smallField(r io.Reader, limit int64) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, 257))
	if err != nil {
		return "", uploadError(err, limit)
	}
	if len(b) > 256 {
		return "", problem.BadRequest("invalid_upload", "form fields other than file must be at most 256 bytes")
	}
	return strings.TrimSpace(string(b)), nil
}

// cleanFilename keeps the base name of an uploaded file for display: no directories, valid
// UTF-8, no control or invisible formatting characters (a right-to-left override would
// show "invoice\u202Excod.exe" as "invoice.docx…"), at most 200 characters. The file is
// stored under its hash, never under this name.
func cleanFilename(name string) string {
	name = strings.ToValidUTF8(name, "\uFFFD")
	name = path.Base(strings.ReplaceAll(name, `\`, "/"))
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || hiddenInName(r) {
			return -1
		}
		return r
	}, name)
	if r := []rune(name); len(r) > 200 {
		name = string(r[len(r)-200:])
	}
	return name
}

// hiddenInName reports characters that change how a name displays without being seen:
// bidirectional controls (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C) and the
// other format characters (zero-width spaces, BOM, soft hyphen), plus line and paragraph
// separators. The zero-width joiners inside emoji are kept.
func hiddenInName(r rune) bool {
	if r == '\u200C' || r == '\u200D' {
		return false
	}
	return unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r)
}

// downloadErrorReport answers GET /api/v1/tasks/{id}/error-report: 410 once the report has
// expired (before or after cleanup deleted the file), 409 while the task runs, 404 when no
// row was rejected. ?lang=zh|en asks for the report in that language: the stored report is
// in the uploader's language, another one is written from the rejected rows for this
// download.
func (s *Server) downloadErrorReport(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	t, res, err := s.taskFiles(r, p)
	if err != nil {
		return err
	}
	switch {
	case res.HadReport() && res.IsExpired(t, time.Now()):
		return problem.New(http.StatusGone, "report_expired", "the error report has expired and was deleted")
	case res.ErrorReport != "":
		if q := r.URL.Query().Get("lang"); q != "" && importer.ParseLang(q) != importer.ParseLang(string(res.ErrorReportLang)) {
			return s.serveReportIn(w, r, t, res, importer.ParseLang(q))
		}
		return s.serveFile(w, r, res.ErrorReport, res.ErrorReportName, xlsxType)
	case !t.Status.Terminal():
		return problem.New(http.StatusConflict, "report_not_ready", fmt.Sprintf("the task is %s; the error report is written when it ends", t.Status))
	default:
		return problem.New(http.StatusNotFound, "no_error_report", "this task has no error report: no row was rejected")
	}
}

const xlsxType = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"

// serveReportIn writes a task's error report in lang for this download only.
func (s *Server) serveReportIn(w http.ResponseWriter, r *http.Request, t *store.Task, res taskview.Files, lang importer.Lang) error {
	if err := storage.ValidKey(res.ErrorReport); err != nil {
		return err
	}
	p, done, err := importer.ErrorReportIn(r.Context(), s.Store, s.Files, t, lang)
	if err != nil {
		return err
	}
	defer done()
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	name := strings.TrimSuffix(res.ErrorReportName, ".xlsx") + "-" + string(lang) + ".xlsx"
	w.Header().Set("Content-Type", xlsxType)
	w.Header().Set("Content-Disposition", storage.ContentDisposition(name))
	w.Header().Set("Cache-Control", "private, no-store")
	w.Header().Set("Content-Language", string(lang))
	s.serveContent(w, r, name, time.Now(), f)
	return nil
}

// uploadSlots caps the uploads each user has in flight.
type uploadSlots struct {
	max    int
	mu     sync.Mutex
	active map[string]int
}

func newUploadSlots(max int) *uploadSlots {
	return &uploadSlots{max: max, active: map[string]int{}}
}

// acquire takes one of user's slots, or reports that all are in use.
func (u *uploadSlots) acquire(user string) (release func(), ok bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.active[user] >= u.max {
		return nil, false
	}
	u.active[user]++
	return func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		if u.active[user]--; u.active[user] <= 0 {
			delete(u.active, user)
		}
	}, true
}
