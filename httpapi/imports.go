package httpapi

import (
	"errors"
	"fmt"
	"io"
	"mime"
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
	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/sheet"
	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/textcheck"
	"github.com/taskcenter/taskcenter/jobs/importer"
	"github.com/taskcenter/taskcenter/jobs/taskview"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/webhooks"
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
	// UndoTTL is how long after it ends an import can be undone (import.undo_ttl).
	UndoTTL time.Duration
}

// multipartSlack is room for the multipart framing and the small form fields.
const multipartSlack = 64 << 10

// submitImport answers POST /api/v1/imports (multipart: file, mode, sheet, encoding, lang,
// columns, dry_run). It streams the upload to disk while hashing it, runs the cheap checks,
// stores the file under its content hash, and creates the task. The same owner, file, mode,
// sheet, columns and dry_run give back the first task. The error report's language is the
// lang field, else the request's Accept-Language. A JSON body re-submits an earlier
// import's upload instead (resubmitImport).
func (s *Server) submitImport(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "application/json" {
		return s.resubmitImport(w, r, p)
	}
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
	// The import reads the form, checks its notification, stores and checks the file and
	// submits the task; the handler answers in HTTP. The checks read the stored upload
	// (ranged reads on s3): the request's time, not a query's.
	res, err := s.Uploads.SubmitForm(r.Context(), p.User, problem.RequestID(r.Context()),
		importer.Submit{Mode: importer.ModeUpsert, Lang: r.Header.Get("Accept-Language")}, multipartForm{mr}, limit)
	if fe := (*importer.FormError)(nil); errors.As(err, &fe) {
		return uploadError(fe.Err, limit)
	}
	if err != nil {
		return err
	}
	return s.answerSubmit(w, r, res)
}

// importResubmit is the JSON body of a re-submit: the earlier import task, and the choices
// that change (absent: the earlier task's).
type importResubmit struct {
	FromTask string            `json:"from_task"`
	Columns  map[string]string `json:"columns"`
	Mode     *string           `json:"mode"`
	Sheet    *string           `json:"sheet"`
	Encoding *string           `json:"encoding"`
	Lang     *string           `json:"lang"`
	DryRun   *bool             `json:"dry_run"`
	// NotifyURL and NotifySecret subscribe a webhook to the new task, as with an upload.
	NotifyURL    string `json:"notify_url"`
	NotifySecret string `json:"notify_secret"`
}

// resubmitImport answers POST /api/v1/imports with a JSON body: the stored upload of an
// earlier import task the caller can see (another user's answers 404, as GET /tasks/{id}
// does) is imported again with the choices given over that task's, without uploading it
// again. An upload already swept answers 410 upload_missing. The answer is an upload's: 202
// and the task, or 200 and the earlier identical one.
func (s *Server) resubmitImport(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	var body importResubmit
	if err := request.DecodeJSON(r, &body); err != nil {
		return err
	}
	if m, bad := textcheck.Problem(body.FromTask, request.MaxID); bad || body.FromTask == "" {
		if body.FromTask == "" {
			m = msg.New("field_error.from_task_required")
		}
		return problem.New(http.StatusUnprocessableEntity, "invalid_submit", "from_task "+m.English()).
			WithErrors(problem.Field("from_task", m))
	}
	res, err := s.Uploads.Resubmit(r.Context(), p.User, p.Scope(), problem.RequestID(r.Context()), importer.Resubmit{
		FromTask: body.FromTask, Columns: body.Columns, Mode: body.Mode, Sheet: body.Sheet, Encoding: body.Encoding,
		Lang: body.Lang, DryRun: body.DryRun, Notify: webhooks.Notify{URL: body.NotifyURL, Secret: body.NotifySecret}})
	if err != nil {
		return err
	}
	return s.answerSubmit(w, r, res)
}

// multipartForm is a multipart body as the import reads it: one field at a time, with the
// file name cleaned for display.
type multipartForm struct{ mr *multipart.Reader }

func (f multipartForm) NextField() (string, string, io.Reader, error) {
	part, err := f.mr.NextPart()
	if err != nil {
		return "", "", nil, err
	}
	return part.FormName(), cleanFilename(part.FileName()), part, nil
}

func tooLarge(limit int64) *problem.Problem {
	return importProblem(importer.TooLargeProblem(limit))
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
		return problem.Say(http.StatusConflict, "report_not_ready", msg.Params{"status": string(t.Status)})
	default:
		return problem.Say(http.StatusNotFound, "no_error_report", nil)
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
