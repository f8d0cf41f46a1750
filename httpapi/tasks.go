package httpapi

import (
	"bufio"
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/taskcenter/taskcenter/httpapi/identity"
	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/httpapi/request"
	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/internal/textcheck"
	"github.com/taskcenter/taskcenter/jobs/export"
	"github.com/taskcenter/taskcenter/jobs/importer"
	"github.com/taskcenter/taskcenter/jobs/taskview"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/audit"
)

// ListView is one page of tasks, with how many tasks the filters select.
type ListView struct {
	Items      []TaskView `json:"items"`
	NextCursor string     `json:"next_cursor,omitempty"`
	// Total is how many tasks every filter selects (all pages).
	Total int64 `json:"total"`
	// Counts is how many tasks each status has among those every other filter selects: what
	// each status filter would list. Every status is present.
	Counts map[store.Status]int64 `json:"counts"`
}

// listTasks answers GET /api/v1/tasks?q=&status=&type=&owner=&created_from=&created_to=&sort=&limit=&cursor=
func (s taskRoutes) listTasks(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	f, err := parseListQuery(r.URL.RawQuery, p)
	if err != nil {
		return err
	}
	tasks, next, err := s.Store.List(r.Context(), f, p.Scope())
	if err != nil {
		return err
	}
	counts, err := s.Store.StatusCounts(r.Context(), f, p.Scope())
	if err != nil {
		return err
	}
	out := ListView{Items: s.views(r.Context(), tasks, readerLang(w, r)), Counts: make(map[store.Status]int64, len(task.AllStatuses))}
	for _, st := range task.AllStatuses {
		out.Counts[st] = counts[st]
		if len(f.Statuses) == 0 || slices.Contains(f.Statuses, st) {
			out.Total += counts[st]
		}
	}
	if next != nil {
		out.NextCursor = encodeCursor(*next)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// readQuery parses a query string whose every value must be text Postgres can hold.
func readQuery(rawQuery string) (url.Values, error) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, problem.BadRequest("invalid_query", "the query string is not valid URL encoding: %s", strings.TrimPrefix(err.Error(), "invalid URL escape "))
	}
	var errs []problem.FieldError
	for _, name := range slices.Sorted(maps.Keys(q)) {
		for _, v := range q[name] {
			if m, bad := textcheck.Problem(v, request.MaxQueryValue); bad {
				errs = append(errs, problem.Field(name, m))
				break
			}
		}
	}
	if len(errs) > 0 {
		return nil, problem.Invalid("invalid_query", "the query has invalid parameters", errs...)
	}
	return q, nil
}

// parseListQuery reads the task list's query. The filters are the task export's
// (export.TaskFilter), checked by the same rules; every value must be text Postgres can
// hold; the cursor must be one this API wrote for the same sort.
func parseListQuery(rawQuery string, p identity.Principal) (store.ListFilter, error) {
	q, err := readQuery(rawQuery)
	if err != nil {
		return store.ListFilter{}, err
	}
	var errs []problem.FieldError
	tf := export.TaskFilter{Types: textcheck.SplitList(q["type"]), Owner: q.Get("owner"), Search: q.Get("q")}
	for _, st := range textcheck.SplitList(q["status"]) {
		tf.Statuses = append(tf.Statuses, store.Status(strings.ToUpper(st)))
	}
	if tf.Owner != "" && !p.Scope().Admin && tf.Owner != p.User {
		errs = append(errs, problem.Field("owner", msg.New("field_error.others_tasks")))
	}
	errs = append(errs, request.QueryTimes(q, map[string]**time.Time{"created_from": &tf.CreatedFrom, "created_to": &tf.CreatedTo})...)
	var ferr *export.FilterError
	if errors.As(tf.Validate(), &ferr) {
		for _, f := range ferr.Fields {
			errs = append(errs, problem.Field(f.Field, f.Message))
		}
	}
	f := store.ListFilter{Statuses: tf.Statuses, Types: tf.Types, Owner: tf.Owner, CreatedFrom: tf.CreatedFrom, CreatedTo: tf.CreatedTo,
		Search: tf.Search, Sort: store.SortNewest}
	if q.Has("sort") {
		f.Sort = store.Sort(q.Get("sort"))
		if f.Sort == "" || !f.Sort.Valid() {
			errs = append(errs, problem.Field("sort", sortChoices()))
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 200 {
			errs = append(errs, problem.Field("limit", request.NumberRange(1, 200)))
		}
		f.Limit = n
	}
	if v := q.Get("cursor"); v != "" {
		c, err := decodeCursor(v)
		switch {
		case err != nil:
			errs = append(errs, problem.Field("cursor", msg.New("field_error.bad_cursor")))
		case f.Sort.Valid() && c.Sort != f.Sort:
			errs = append(errs, problem.Field("cursor", msg.New("field_error.cursor_sort", "was", string(c.Sort), "sort", string(f.Sort))))
		}
		f.After = c
	}
	if len(errs) > 0 {
		slices.SortStableFunc(errs, func(a, b problem.FieldError) int { return strings.Compare(a.Field, b.Field) })
		return store.ListFilter{}, problem.Invalid("invalid_query", "the query has invalid parameters", errs...)
	}
	return f, nil
}

// sortChoices says which sorts the list takes.
func sortChoices() msg.Message {
	var names []string
	for _, s := range store.Sorts() {
		names = append(names, string(s))
	}
	return textcheck.OneOf(names...)
}

// getTask answers GET /api/v1/tasks/{id}: the task, live progress, attempts and recent log.
func (s taskRoutes) getTask(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	ctx := r.Context()
	t, archived, err := s.readableTask(r, p)
	if err != nil {
		return err
	}
	readRuns, readLogs := s.Store.Runs, s.Store.RecentLogs
	if archived { // retention moved it to the archive: the same view, marked, with no actions
		readRuns, readLogs = s.Store.ArchivedRuns, s.Store.ArchivedLogs
	}
	v, err := s.detail(ctx, t, archived, readRuns, readLogs, readerLang(w, r))
	if err != nil {
		return err
	}
	if archived {
		v.Archived = true
		v.Links = Links{Self: v.Links.Self} // its files are gone
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// detail renders t with its attempts, its recent log and the count of its rejected rows by
// field, read through readRuns and readLogs: the live tables' for a task, the archive's for
// an archived one.
func (s *Server) detail(ctx context.Context, t *store.Task, archived bool, readRuns func(context.Context, int64) ([]store.Run, error),
	readLogs func(context.Context, int64, int) ([]store.LogEntry, error), lang msg.Lang) (DetailView, error) {
	runs, err := readRuns(ctx, t.ID)
	if err != nil {
		return DetailView{}, err
	}
	logs, err := readLogs(ctx, t.ID, 50)
	if err != nil {
		return DetailView{}, err
	}
	v := DetailView{TaskView: s.view(ctx, t, lang), Attempts: make([]AttemptView, len(runs)), Logs: make([]LogView, len(logs)),
		CancelledBy: s.cancelledBy(ctx, t)}
	for i, r := range runs {
		v.Attempts[i] = AttemptView{Attempt: r.Attempt, Trigger: r.Trigger, Worker: r.Worker, Status: r.Status,
			Error: r.Error, ErrorCode: r.ErrorCode, ErrorParams: r.ErrorParams, StartedAt: r.StartedAt.UTC(), FinishedAt: taskview.UTC(r.FinishedAt)}
	}
	for i, l := range logs {
		v.Logs[i] = logView(l)
	}
	if t.FailedCount > 0 {
		counts, err := s.Store.RejectedByField(ctx, t.ID, archived)
		if err != nil {
			return DetailView{}, err
		}
		for _, c := range counts {
			fc := FieldCountView{Field: c.Field, Count: c.Count, Reasons: make([]ReasonCountView, len(c.Reasons))}
			for i, r := range c.Reasons {
				fc.Reasons[i] = ReasonCountView{Code: r.Code, Params: r.Params, Count: r.Count, Says: task.Reason(r.Code, r.Params)}
			}
			v.RejectedBreakdown = append(v.RejectedBreakdown, fc)
		}
	}
	return v, nil
}

// view renders a task for a reader of lang with its live progress from Redis when it is
// running; when Redis has none (or is down) the database's per-batch copy is shown.
func (s *Server) view(ctx context.Context, t *store.Task, lang msg.Lang) TaskView {
	return s.views(ctx, []store.Task{*t}, lang)[0]
}

// views renders tasks as view does, with the live progress of the running ones read in one
// round trip: the list shows what the task's own page shows.
func (s *Server) views(ctx context.Context, tasks []store.Task, lang msg.Lang) []TaskView {
	var running []string
	for i := range tasks {
		if tasks[i].Status == store.StatusRunning {
			running = append(running, tasks[i].TaskNo)
		}
	}
	var live map[string]task.Live
	if len(running) > 0 {
		live, _ = s.Board.GetMany(ctx, running) // without Redis: the progress the rows keep
	}
	now := time.Now()
	views := make([]TaskView, len(tasks))
	for i := range tasks {
		if l, ok := live[tasks[i].TaskNo]; ok {
			views[i] = taskview.Of(&tasks[i], &l, now, lang)
		} else {
			views[i] = taskview.Of(&tasks[i], nil, now, lang)
		}
	}
	s.addWaits(ctx, tasks, views, now)
	return views
}

// addWaits puts each waiting task's place in its queue into its view (views[i] is tasks[i]).
// The place is a courtesy: when it cannot be read the views go without it.
func (s *Server) addWaits(ctx context.Context, tasks []store.Task, views []TaskView, now time.Time) {
	var ids []int64
	for i := range tasks {
		if tasks[i].Status.Waiting() {
			ids = append(ids, tasks[i].ID)
		}
	}
	if len(ids) == 0 {
		return
	}
	lines, err := s.Store.Lines(ctx, ids, task.WaitWindow)
	if err != nil {
		return
	}
	for i := range tasks {
		if l, ok := lines[tasks[i].ID]; ok {
			views[i].Wait = task.WaitOf(l.Ahead, l.Finished, task.WaitWindow, tasks[i].NextRetryAt, now)
		}
	}
}

// cancelTask answers POST /api/v1/tasks/{id}/cancel.
func (s taskRoutes) cancelTask(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	return s.act(w, r, p, s.cancel, http.StatusOK)
}

// act answers the action do (cancel, retry) on the task the request names, with the task as
// it now is; an accepted action (202: the task runs again) points at the task to follow.
func (s taskRoutes) act(w http.ResponseWriter, r *http.Request, p identity.Principal,
	do func(context.Context, string, identity.Principal) (*store.Task, error), status int) error {
	id, err := request.TaskID(r)
	if err != nil {
		return err
	}
	t, err := do(r.Context(), id, p)
	if err != nil {
		return err
	}
	if status == http.StatusAccepted {
		w.Header().Set("Location", "/api/v1/tasks/"+t.TaskNo)
	}
	writeJSON(w, status, s.view(r.Context(), t, readerLang(w, r)))
	return nil
}

// cancel cancels the task id if p may see it, for the single and the bulk cancel alike:
// the store's transition (with its log line, outbox event and audit row), the job withdrawn,
// the live streams told.
func (s taskRoutes) cancel(ctx context.Context, id string, p identity.Principal) (*store.Task, error) {
	res, err := s.Store.Cancel(ctx, id, p.Scope())
	if err != nil {
		return nil, err
	}
	if res.Immediate {
		// The job will find the task CANCELLED if it is delivered anyway; withdrawing it just
		// keeps the queue tidy (and re-enqueues a task retried meanwhile, see Withdraw).
		if err := s.Submitter.Withdraw(context.WithoutCancel(ctx), res.Task, res.PrevAttempt); err != nil {
			s.Logger.Debug("could not withdraw the cancelled task's job", "task_no", res.Task.TaskNo, "err", err)
		}
	}
	s.changed(ctx, res.Task)
	return res.Task, nil
}

// changed announces a committed transition to the live streams (a lost announcement only
// delays it until their next outbox poll).
func (s *Server) changed(ctx context.Context, t *store.Task) {
	if err := s.Board.Changed(context.WithoutCancel(ctx), t.TaskNo, t.Owner); err != nil {
		s.Logger.Debug("could not announce a task change", "task_no", t.TaskNo, "err", err)
	}
}

// retryTask answers POST /api/v1/tasks/{id}/retry.
func (s taskRoutes) retryTask(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	return s.act(w, r, p, s.retry, http.StatusAccepted)
}

// retry runs the task id again if p may see it and its rules allow (task.CanRetry, in the
// store's statement), for the single and the bulk retry alike: the store's transition (with
// its log line, outbox event and audit row), the live streams told, the job enqueued.
func (s taskRoutes) retry(ctx context.Context, id string, p identity.Principal) (*store.Task, error) {
	t, err := s.Store.Retry(ctx, id, p.Scope())
	if err != nil {
		return nil, err
	}
	s.changed(ctx, t)
	s.Submitter.Enqueue(ctx, t)
	return t, nil
}

// undoTask answers POST /api/v1/tasks/{id}/undo: the undo of a finished import, a new task
// of type import:customers-undo owned by the import's owner (202), or, asked again, the undo
// made the first time (200, duplicate). The caller must see the import (else 404, like every
// task route); what cannot be undone is refused (importer.UndoSubmission: 409, or 410 once
// the before-image has expired, and for an archived import).
func (s taskRoutes) undoTask(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	t, archived, err := s.readableTask(r, p)
	if err != nil {
		return err
	}
	if archived {
		return &importer.UndoRefused{Code: "undo_expired", Gone: true, Message: "the import has been archived; it can no longer be undone"}
	}
	sub, err := importer.UndoSubmission(t, cmp.Or(s.Import.UndoTTL, 7*24*time.Hour), time.Now())
	if err != nil {
		return err
	}
	sub.RequestID = problem.RequestID(r.Context())
	// The request's audit row is this route's (task.undo on the import, written once the
	// answer is known), not the undo task's submit row.
	return s.submit(w, r.WithContext(audit.NewContext(r.Context(), nil)), sub)
}

// taskFiles reads the task a download names, if p may see it, and what it says of its files.
func (s *Server) taskFiles(r *http.Request, p identity.Principal) (*store.Task, taskview.Files, error) {
	id, err := request.TaskID(r)
	if err != nil {
		return nil, taskview.Files{}, err
	}
	t, err := s.Store.Get(r.Context(), id, p.Scope())
	if errors.Is(err, store.ErrNotFound) {
		// An archived task is a finished one whose files have gone: its downloads answer
		// 410 like any expired result's.
		t, err = s.Store.GetArchived(r.Context(), id, p.Scope())
	}
	if err != nil {
		return nil, taskview.Files{}, err
	}
	res, _ := taskview.FilesOf(t)
	return t, res, nil
}

// downloadResult answers GET /api/v1/tasks/{id}/result: 410 once the result has expired
// (before or after cleanup deleted the file), 409 until there is a result.
func (s taskRoutes) downloadResult(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	t, res, err := s.taskFiles(r, p)
	if err != nil {
		return err
	}
	if res.HadFile() && res.IsExpired(t, time.Now()) {
		detail := "the result file has expired; export again to get a new one"
		if t.ResultExpiresAt != nil {
			detail = "the result file expired at " + t.ResultExpiresAt.UTC().Format(time.RFC3339) + "; export again to get a new one"
		}
		return problem.New(http.StatusGone, "result_expired", detail)
	}
	if res.File == "" {
		if t.Status.Terminal() {
			return problem.Say(http.StatusConflict, "no_result", msg.Params{"status": string(t.Status)})
		}
		return problem.Say(http.StatusConflict, "result_not_ready", msg.Params{"status": string(t.Status)})
	}
	return s.serveFile(w, r, res.File, res.Name, res.ContentType)
}

// serveFile answers a download of a stored file: with a store that presigns (s3, presign on),
// a 302 to a short-lived URL the browser fetches from the S3 service itself (curl -L); else
// the object streamed through the API (ranges and conditional requests work). A file that
// is gone answers 410 either way (a presigned URL is only given for an object that exists).
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request, key, name, contentType string) error {
	if name == "" {
		name = path.Base(key)
	}
	if u, ok, err := s.Files.Presign(r.Context(), key, name, 0); err != nil {
		return err
	} else if ok {
		if _, err := s.Files.Stat(r.Context(), key); errors.Is(err, storage.ErrNotExist) {
			return problem.New(http.StatusGone, "result_expired", "the result file is no longer available")
		} else if err != nil {
			return err
		}
		w.Header().Set("Cache-Control", "no-store")
		redirect(w, u)
		return nil
	}
	obj, err := s.Files.Open(r.Context(), key)
	if errors.Is(err, storage.ErrNotExist) {
		return problem.New(http.StatusGone, "result_expired", "the result file is no longer available")
	}
	if err != nil {
		return err
	}
	defer obj.Close()
	var modTime time.Time
	if info, err := s.Files.Stat(r.Context(), key); err == nil {
		modTime = info.ModTime
	}
	if contentType != "" {
		w.Header().Set("Content-Type", contentType)
	}
	w.Header().Set("Content-Disposition", storage.ContentDisposition(name))
	w.Header().Set("Cache-Control", "private, no-store")
	s.serveContent(w, r, name, modTime, obj)
	return nil
}

// taskRoutes are the handlers of /api/v1/tasks and a task's cancel, retry and result.
type taskRoutes struct{ *Server }

// LogPageView is a page of a task's log, oldest line first; NextCursor continues with the
// lines written before the page's first.
type LogPageView struct {
	Items      []LogView `json:"items"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

// FieldCountView is how many rejected rows one field was at fault in, and why.
type FieldCountView struct {
	Field string `json:"field"`
	Count int64  `json:"count"`
	// Reasons count the field's rows by reason, most first; rows stored before their
	// reasons were kept count in Count only.
	Reasons []ReasonCountView `json:"reasons"`
}

// ReasonCountView is how many rejected rows one field was at fault in for one reason: a row
// message's catalogue code ("row.phone"), with its params when every row of the group has
// the same.
type ReasonCountView struct {
	Code   string     `json:"code"`
	Params msg.Params `json:"params,omitempty"`
	Count  int64      `json:"count"`
	// Says is the reason as the message to say (task.Reason): the row message with its
	// params, or the catalogue's "reason.<name>" when the rows' values differ.
	Says msg.Message `json:"says"`
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
