package httpapi

import (
	"bytes"
	"mime"
	"net/http"
	"time"

	"github.com/taskcenter/taskcenter/httpapi/identity"
	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/internal/sheet"
	"github.com/taskcenter/taskcenter/internal/textcheck"
	"github.com/taskcenter/taskcenter/jobs/importer"
)

// importTemplate answers GET /api/v1/imports/template?lang=zh|en&format=xlsx|csv: the file a
// user fills in to import customers ("下载模板"). Without lang it follows Accept-Language;
// without format it is an .xlsx.
func (s *Server) importTemplate(w http.ResponseWriter, r *http.Request, _ identity.Principal) error {
	q := r.URL.Query()
	lang := importer.ParseLang(r.Header.Get("Accept-Language"))
	switch l := q.Get("lang"); l {
	case "":
	case "zh", "en":
		lang = importer.Lang(l)
	default:
		return problem.Invalid("invalid_query", "lang must be zh or en, not "+textcheck.Echo(l), problem.Field("lang", textcheck.OneOf("zh", "en")))
	}
	format := sheet.XLSX
	switch f := q.Get("format"); f {
	case "", "xlsx":
	case "csv":
		format = sheet.CSV
	default:
		return problem.Invalid("invalid_query", "format must be xlsx or csv, not "+textcheck.Echo(f), problem.Field("format", textcheck.OneOf("xlsx", "csv")))
	}
	b, name, err := importer.Template(lang, format)
	if err != nil {
		return err
	}
	ct := xlsxType
	if format == sheet.CSV {
		ct = "text/csv; charset=utf-8"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	w.Header().Set("Content-Language", string(lang))
	w.Header().Set("Vary", "Accept-Language")
	w.Header().Set("Cache-Control", "private, max-age=3600")
	s.serveContent(w, r, name, time.Time{}, bytes.NewReader(b))
	return nil
}
