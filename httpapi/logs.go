package httpapi

import (
	"bufio"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/taskcenter/taskcenter/httpapi/identity"
	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/httpapi/request"
	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/store"
)

// LogPageView is a page of a task's log, oldest line first; NextCursor continues with the
// lines written before the page's first.
type LogPageView struct {
	Items      []LogView `json:"items"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

// FieldCountView is how many rejected rows one field was at fault in.
type FieldCountView struct {
	Field string `json:"field"`
	Count int64  `json:"count"`
}

// Log page sizes: the default, and the most one page may ask for.
const (
	defaultLogLimit = 100
	maxLogLimit     = 1000
)

// listLogs answers GET /api/v1/tasks/{id}/logs?attempt=&cursor=&limit=: the newest lines
// first as a page (oldest first within it), then earlier pages by cursor.
func (s taskRoutes) listLogs(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	t, archived, err := s.readableTask(r, p)
	if err != nil {
		return err
	}
	q, err := parseLogQuery(r.URL.RawQuery)
	if err != nil {
		return err
	}
	q.Archived = archived
	limit := q.Limit
	q.Limit++ // one more says whether there is an earlier page
	lines, err := s.Store.LogPage(r.Context(), t.ID, q)
	if err != nil {
		return err
	}
	out := LogPageView{Items: make([]LogView, 0, len(lines))}
	if len(lines) > limit {
		lines = lines[1:]
		out.NextCursor = encodeLogCursor(lines[0].ID)
	}
	for _, l := range lines {
		out.Items = append(out.Items, logView(l))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// downloadLog answers GET /api/v1/tasks/{id}/logs.txt: the whole log as text, oldest line
// first, a heading before each attempt's lines, under a first line naming the task.
func (s taskRoutes) downloadLog(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	t, archived, err := s.readableTask(r, p)
	if err != nil {
		return err
	}
	const page = 1000
	lines, err := s.Store.LogLines(r.Context(), t.ID, 0, page, archived)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Disposition", storage.ContentDisposition(t.TaskNo+"-log.txt"))
	w.Header().Set("Cache-Control", "private, no-store")
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# log of task %s\n\n", t.TaskNo)
	attempt := -1
	for len(lines) > 0 {
		for _, l := range lines {
			if l.Attempt != attempt {
				if attempt != -1 {
					bw.WriteString("\n")
				}
				attempt = l.Attempt
				fmt.Fprintf(bw, "== attempt %d ==\n", attempt)
			}
			fmt.Fprintf(bw, "%s %-5s %s\n", l.CreatedAt.UTC().Format(time.RFC3339Nano), l.Level, oneLine(l.Message))
		}
		if len(lines) < page {
			break
		}
		if lines, err = s.Store.LogLines(r.Context(), t.ID, lines[len(lines)-1].ID, page, archived); err != nil {
			// The answer has begun: cut it short, and say why in the server's log.
			s.Logger.Warn("the log download was cut short", "task_no", t.TaskNo, "err", err)
			break
		}
	}
	return bw.Flush()
}

// readableTask reads the task a request names if p may see it: live, or else archived.
func (s taskRoutes) readableTask(r *http.Request, p identity.Principal) (*store.Task, bool, error) {
	id, err := request.TaskID(r)
	if err != nil {
		return nil, false, err
	}
	t, err := s.Store.Get(r.Context(), id, p.Scope())
	if errors.Is(err, store.ErrNotFound) {
		t, err = s.Store.GetArchived(r.Context(), id, p.Scope())
		return t, true, err
	}
	return t, false, err
}

// parseLogQuery reads attempt, cursor and limit of a log page.
func parseLogQuery(rawQuery string) (store.LogQuery, error) {
	q, err := readQuery(rawQuery)
	if err != nil {
		return store.LogQuery{}, err
	}
	var errs []problem.FieldError
	lq := store.LogQuery{Limit: defaultLogLimit}
	if v := q.Get("attempt"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			errs = append(errs, problem.Field("attempt", msg.New("field_error.attempt")))
		}
		lq.Attempt = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLogLimit {
			errs = append(errs, problem.Field("limit", request.NumberRange(1, maxLogLimit)))
		}
		lq.Limit = n
	}
	if v := q.Get("cursor"); v != "" {
		id, ok := decodeLogCursor(v)
		if !ok {
			errs = append(errs, problem.Field("cursor", msg.New("field_error.bad_cursor")))
		}
		lq.Before = id
	}
	if len(errs) > 0 {
		return store.LogQuery{}, problem.Invalid("invalid_query", "the query has invalid parameters", errs...)
	}
	return lq, nil
}

func encodeLogCursor(before int64) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "log:%d", before))
}

func decodeLogCursor(s string) (int64, bool) {
	if len(s) > maxCursor {
		return 0, false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return 0, false
	}
	v, ok := strings.CutPrefix(string(b), "log:")
	id, err := strconv.ParseInt(v, 10, 64)
	return id, ok && err == nil && id > 0
}

func logView(l store.LogEntry) LogView {
	return LogView{At: l.CreatedAt.UTC(), Attempt: l.Attempt, Level: l.Level, Message: l.Message, Code: l.Code, Params: l.Params}
}

// oneLine keeps a log line on one line of the text download.
func oneLine(s string) string { return lineBreaks.Replace(s) }

var lineBreaks = strings.NewReplacer("\r\n", `\n`, "\n", `\n`, "\r", `\n`)
