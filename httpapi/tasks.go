package httpapi

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/taskcenter/taskcenter/store"
)

// ListView is one page of tasks.
type ListView struct {
	Items      []TaskView `json:"items"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

// listTasks answers GET /api/v1/tasks?status=&type=&owner=&created_from=&created_to=&limit=&cursor=
func (s *Server) listTasks(w http.ResponseWriter, r *http.Request, p Principal) error {
	q := r.URL.Query()
	f := store.ListFilter{Types: multi(q["type"])}
	var errs []FieldError
	for _, st := range multi(q["status"]) {
		status := store.Status(strings.ToUpper(st))
		if !status.Valid() {
			errs = append(errs, FieldError{"status", fmt.Sprintf("%q is not a task status", st)})
		}
		f.Statuses = append(f.Statuses, status)
	}
	if o := q.Get("owner"); o != "" {
		if !p.Scope().Admin && o != p.User {
			errs = append(errs, FieldError{"owner", "only an admin can list other users' tasks"})
		}
		f.Owner = o
	}
	for name, dst := range map[string]**time.Time{"created_from": &f.CreatedFrom, "created_to": &f.CreatedTo} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				errs = append(errs, FieldError{name, "must be an RFC 3339 time such as 2026-11-30T00:00:00Z"})
			}
			*dst = &t
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 200 {
			errs = append(errs, FieldError{"limit", "must be a number from 1 to 200"})
		}
		f.Limit = n
	}
	if v := q.Get("cursor"); v != "" {
		c, err := decodeCursor(v)
		if err != nil {
			errs = append(errs, FieldError{"cursor", "is not a cursor this API returned"})
		}
		f.After = c
	}
	if len(errs) > 0 {
		pr := badRequest("invalid_query", "the query has invalid parameters")
		pr.Errors = errs
		return pr
	}
	tasks, next, err := s.Store.List(r.Context(), f, p.Scope())
	if err != nil {
		return err
	}
	now := time.Now()
	out := ListView{Items: make([]TaskView, len(tasks))}
	for i := range tasks {
		out.Items[i] = taskView(&tasks[i], nil, now)
	}
	if next != nil {
		out.NextCursor = encodeCursor(*next)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getTask answers GET /api/v1/tasks/{id}: the task, live progress, attempts and recent log.
func (s *Server) getTask(w http.ResponseWriter, r *http.Request, p Principal) error {
	ctx := r.Context()
	t, err := s.Store.Get(ctx, r.PathValue("id"), p.Scope())
	if err != nil {
		return err
	}
	runs, err := s.Store.Runs(ctx, t.ID)
	if err != nil {
		return err
	}
	logs, err := s.Store.RecentLogs(ctx, t.ID, 50)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.detail(ctx, t, runs, logs))
	return nil
}

func (s *Server) detail(ctx context.Context, t *store.Task, runs []store.Run, logs []store.LogEntry) DetailView {
	v := DetailView{TaskView: s.view(ctx, t), Attempts: make([]AttemptView, len(runs)), Logs: make([]LogView, len(logs))}
	for i, r := range runs {
		v.Attempts[i] = AttemptView{Attempt: r.Attempt, Trigger: r.Trigger, Worker: r.Worker, Status: r.Status,
			Error: r.Error, StartedAt: r.StartedAt.UTC(), FinishedAt: utc(r.FinishedAt)}
	}
	for i, l := range logs {
		v.Logs[i] = LogView{At: l.CreatedAt.UTC(), Attempt: l.Attempt, Level: l.Level, Message: l.Message}
	}
	return v
}

// view renders a task with its live progress from Redis when it is running; when Redis has
// none (or is down) the database's per-batch copy is shown.
func (s *Server) view(ctx context.Context, t *store.Task) TaskView {
	if t.Status == store.StatusRunning {
		if live, ok, err := s.Board.Get(ctx, t.TaskNo); err == nil && ok {
			return taskView(t, &live, time.Now())
		}
	}
	return taskView(t, nil, time.Now())
}

// cancelTask answers POST /api/v1/tasks/{id}/cancel.
func (s *Server) cancelTask(w http.ResponseWriter, r *http.Request, p Principal) error {
	res, err := s.Store.Cancel(r.Context(), r.PathValue("id"), p.Scope())
	if err != nil {
		return err
	}
	if res.Immediate {
		// The job will find the task CANCELLED if it is delivered anyway; withdrawing it just
		// keeps the queue tidy.
		if err := s.Enqueuer.Withdraw(res.Task.Queue, res.Task.TaskNo, res.PrevAttempt); err != nil {
			s.Logger.Debug("could not withdraw the cancelled task's job", "task_no", res.Task.TaskNo, "err", err)
		}
	}
	writeJSON(w, http.StatusOK, s.view(r.Context(), res.Task))
	return nil
}

// retryTask answers POST /api/v1/tasks/{id}/retry.
func (s *Server) retryTask(w http.ResponseWriter, r *http.Request, p Principal) error {
	t, err := s.Store.Retry(r.Context(), r.PathValue("id"), p.Scope())
	if err != nil {
		return err
	}
	s.Submitter.Enqueue(r.Context(), t)
	w.Header().Set("Location", "/api/v1/tasks/"+t.TaskNo)
	writeJSON(w, http.StatusAccepted, s.view(r.Context(), t))
	return nil
}

// downloadResult answers GET /api/v1/tasks/{id}/result: 409 until there is a result, 410 once
// it has expired.
func (s *Server) downloadResult(w http.ResponseWriter, r *http.Request, p Principal) error {
	t, err := s.Store.Get(r.Context(), r.PathValue("id"), p.Scope())
	if err != nil {
		return err
	}
	res, ok := parseResult(t)
	if !ok || res.File == "" {
		if t.Status.Terminal() {
			return problem(http.StatusConflict, "no_result", fmt.Sprintf("the task ended %s without a result file", t.Status))
		}
		return problem(http.StatusConflict, "result_not_ready", fmt.Sprintf("the task is %s; the result is not ready yet", t.Status))
	}
	if expired(t, time.Now()) {
		return problem(http.StatusGone, "result_expired", "the result file expired at "+t.ResultExpiresAt.UTC().Format(time.RFC3339)+"; retry the export to get a new one")
	}
	return s.serveFile(w, r, res.File, res.Name, res.ContentType)
}

// serveFile streams a data-dir file as a download (ranges and conditional requests work).
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request, rel, name, contentType string) error {
	abs, err := s.Files.Path(rel)
	if err != nil {
		return err
	}
	f, err := os.Open(abs)
	if errors.Is(err, os.ErrNotExist) {
		return problem(http.StatusGone, "result_expired", "the result file is no longer available")
	}
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if name == "" {
		name = path.Base(rel)
	}
	if contentType != "" {
		w.Header().Set("Content-Type", contentType)
	}
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	w.Header().Set("Cache-Control", "private, no-store")
	http.ServeContent(w, r, name, info.ModTime(), f)
	return nil
}

// multi splits repeated and comma-separated query values.
func multi(vals []string) []string {
	var out []string
	for _, v := range vals {
		for part := range strings.SplitSeq(v, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

func encodeCursor(c store.Cursor) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d:%d", c.CreatedAt.UnixMicro(), c.ID))
}

func decodeCursor(s string) (*store.Cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, err
	}
	us, id, ok := strings.Cut(string(b), ":")
	if !ok {
		return nil, errors.New("bad cursor")
	}
	micros, err1 := strconv.ParseInt(us, 10, 64)
	n, err2 := strconv.ParseInt(id, 10, 64)
	if err1 != nil || err2 != nil {
		return nil, errors.New("bad cursor")
	}
	return &store.Cursor{CreatedAt: time.UnixMicro(micros), ID: n}, nil
}
