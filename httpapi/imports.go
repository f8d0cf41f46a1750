package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"strings"
	"time"
	"unicode"

	"github.com/taskcenter/taskcenter/internal/files"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/importer"
)

// ImportLimits bound uploads.
type ImportLimits struct {
	// MaxUploadBytes caps the uploaded file.
	MaxUploadBytes int64
	// File holds the checks an uploaded spreadsheet must pass.
	File importer.Limits
}

// multipartSlack is room for the multipart framing and the small form fields.
const multipartSlack = 64 << 10

// submitImport answers POST /api/v1/imports (multipart: file, mode, sheet). It streams the
// upload to disk while hashing it, runs the cheap checks, stores the file under its content
// hash, and creates the task. The same owner, file, mode and sheet give back the first task.
func (s *Server) submitImport(w http.ResponseWriter, r *http.Request, p Principal) error {
	limit := s.Import.MaxUploadBytes
	if r.ContentLength > limit+multipartSlack {
		return tooLarge(limit)
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit+multipartSlack)
	mr, err := r.MultipartReader()
	if err != nil {
		return problem(http.StatusUnsupportedMediaType, "unsupported_media_type",
			`send multipart/form-data with the spreadsheet in a "file" field (curl -F file=@customers.xlsx)`)
	}
	var (
		mode     = importer.ModeUpsert
		sheet    string
		upload   *os.File
		filename string
		size     int64
		sum      string
	)
	defer func() {
		if upload != nil {
			files.Discard(upload)
		}
	}()
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return uploadError(err, limit)
		}
		switch part.FormName() {
		case "file":
			if upload != nil {
				return badRequest("invalid_upload", `send one "file" field`)
			}
			filename = cleanFilename(part.FileName())
			if _, err := importer.FormatOf(filename); err != nil {
				return err
			}
			if upload, err = s.Files.CreateTemp("upload", path.Ext(filename)); err != nil {
				return err
			}
			h := sha256.New()
			size, err = io.Copy(io.MultiWriter(upload, h), io.LimitReader(part, limit+1))
			if err != nil {
				return uploadError(err, limit)
			}
			if size > limit {
				return tooLarge(limit)
			}
			sum = hex.EncodeToString(h.Sum(nil))
		case "mode":
			v, err := smallField(part)
			if err != nil {
				return err
			}
			mode = strings.ToLower(v)
		case "sheet":
			if sheet, err = smallField(part); err != nil {
				return err
			}
		}
	}
	if upload == nil {
		return badRequest("invalid_upload", `the form has no "file" field; send the spreadsheet as file=@customers.xlsx`)
	}
	if mode != importer.ModeUpsert && mode != importer.ModeInsert {
		return problem(http.StatusUnprocessableEntity, "bad_mode", fmt.Sprintf("mode must be upsert or insert, not %q", mode))
	}
	format, _ := importer.FormatOf(filename)
	ins, err := importer.Inspect(upload.Name(), format, sheet, s.Import.File)
	if err != nil {
		return err
	}
	rel := files.Uploads + "/" + sum + "." + string(format)
	if err := s.Files.Commit(upload, rel); err != nil {
		return err
	}
	upload = nil
	now := time.Now()
	if abs, err := s.Files.Path(rel); err == nil {
		os.Chtimes(abs, now, now) //nolint:errcheck // freshness for the upload sweeper
	}
	params, err := json.Marshal(importer.Params{Upload: rel, Format: format, Mode: mode, Sheet: ins.Sheet,
		Filename: filename, Size: size, SHA256: sum, Rows: ins.Rows})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.QueryTimeout)
	defer cancel()
	return s.submit(w, r.WithContext(ctx), jobs.Submission{Type: importer.Type, Owner: p.User, Params: params, RequestID: requestID(r.Context()),
		BizKey: fmt.Sprintf("sha256:%s:%s:%s", sum, mode, ins.Sheet)})
}

func tooLarge(limit int64) *Problem {
	return problem(http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the file is larger than the %d MB limit", limit>>20))
}

func uploadError(err error, limit int64) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return tooLarge(limit)
	}
	return badRequest("invalid_upload", "the upload could not be read: %v", err)
}

// smallField reads a short form value.
func smallField(r io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, 257))
	if err != nil {
		return "", badRequest("invalid_upload", "the form could not be read")
	}
	if len(b) > 256 {
		return "", badRequest("invalid_upload", "form fields other than file must be at most 256 bytes")
	}
	return strings.TrimSpace(string(b)), nil
}

// cleanFilename keeps the base name of an uploaded file for display: no directories, no
// control characters, at most 200 characters. The file is stored under its hash, never
// under this name.
func cleanFilename(name string) string {
	name = path.Base(strings.ReplaceAll(name, `\`, "/"))
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, name)
	if r := []rune(name); len(r) > 200 {
		name = string(r[len(r)-200:])
	}
	return name
}

// downloadErrorReport answers GET /api/v1/tasks/{id}/error-report.
func (s *Server) downloadErrorReport(w http.ResponseWriter, r *http.Request, p Principal) error {
	t, err := s.Store.Get(r.Context(), r.PathValue("id"), p.Scope())
	if err != nil {
		return err
	}
	var res struct {
		ErrorReport     string `json:"error_report"`
		ErrorReportName string `json:"error_report_name"`
		Expired         bool   `json:"expired"`
	}
	if len(t.Result) > 0 {
		json.Unmarshal(t.Result, &res) //nolint:errcheck
	}
	switch {
	case res.ErrorReport != "" && expired(t, time.Now()), res.Expired:
		return problem(http.StatusGone, "report_expired", "the error report has expired")
	case res.ErrorReport != "":
		return s.serveFile(w, r, res.ErrorReport, res.ErrorReportName, "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet")
	case !t.Status.Terminal():
		return problem(http.StatusConflict, "report_not_ready", fmt.Sprintf("the task is %s; the error report is written when it ends", t.Status))
	default:
		return problem(http.StatusNotFound, "no_error_report", "this task has no error report: no row was rejected")
	}
}
