package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/httpapi/request"
	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/sheet"
	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/export"
	"github.com/taskcenter/taskcenter/jobs/importer"
	"github.com/taskcenter/taskcenter/jobs/jobstest"
	"github.com/taskcenter/taskcenter/jobs/noop"
	"github.com/taskcenter/taskcenter/jobs/report"
	"github.com/taskcenter/taskcenter/jobs/taskview"
	"github.com/taskcenter/taskcenter/jobs/webhook"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/storetest"
)

const (
	aliceToken = "test-token-alice-0000"
	bobToken   = "test-token-bob-000000"
	adminToken = "test-token-admin-0000"
)

// apiEnv is one test's API over its own schema, Redis database and data dir.
type apiEnv struct {
	t       *testing.T
	pg      *storetest.Postgres
	rdb     *redis.Client
	st      *store.Store
	files   storage.Store
	root    string // the data dir
	srv     *Server
	handler http.Handler
	logs    *testenv.SyncBuffer
}

// newAPI builds the API with real Postgres and Redis; change adjusts its Deps.
func newAPI(t *testing.T, change ...func(*Deps)) *apiEnv {
	t.Helper()
	return newAPIOn(t, storage.Config{}, change...)
}

// newAPIOn is newAPI with files kept in the given store (storage.Config{}: the data dir).
func newAPIOn(t *testing.T, sc storage.Config, change ...func(*Deps)) *apiEnv {
	t.Helper()
	w := jobstest.New(t, sc)
	pg, rdb, root, fs, st := w.PG, w.Redis, w.Root, w.Files, w.Store
	logs := &testenv.SyncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	enq := jobs.NewEnqueuer(asynq.NewClientFromRedisClient(rdb), asynq.NewInspectorFromRedisClient(rdb), nil)
	types := map[string]jobs.SubmitPolicy{
		export.CustomersType:     {Queue: "exports", MaxRetry: 3, TimeoutSeconds: 1800},
		export.TasksType:         {Queue: "exports", MaxRetry: 3, TimeoutSeconds: 1800},
		importer.Type:            {Queue: "imports", MaxRetry: 3, TimeoutSeconds: 1800},
		importer.UndoType:        {Queue: "imports", MaxRetry: 3, TimeoutSeconds: 1800},
		noop.Type:                {Queue: "exports", MaxRetry: 3, TimeoutSeconds: 60},
		report.CustomerStatsType: {Queue: "exports", MaxRetry: 3, TimeoutSeconds: 1800},
	}
	registry := jobs.NewRegistry()
	registry.Register(export.CustomersTaskType(pg.DB, fs, export.Config{}))
	registry.Register(export.TasksTaskType(pg.DB, fs, export.Config{}))
	registry.Register(importer.TaskType(st, fs, importer.Config{}))
	registry.Register(importer.UndoTaskType(st, fs, importer.Config{}))
	registry.Register(noop.TaskType())
	registry.Register(report.CustomerStatsTaskType(pg.DB, fs, report.Config{}))
	d := Deps{
		Types: registry,
		Store: st, Submitter: jobs.NewSubmitter(st, enq, types, nil, nil, logger, nil).WithNotifyPayload(webhook.BuildPayload),
		Board: jobs.NewProgressBoard(rdb), Files: fs, Logger: logger,
		Tokens: config.Tokens{{Token: aliceToken, User: "alice", Role: config.RoleUser},
			{Token: bobToken, User: "bob", Role: config.RoleUser}, {Token: adminToken, User: "ops", Role: config.RoleAdmin}},
		Import: ImportLimits{MaxUploadBytes: 10 << 20, File: sheet.Limits{MaxUncompressed: 100 << 20, MaxEntries: 1000, MaxRows: 100_000}},
	}
	for _, c := range change {
		c(&d)
	}
	if d.Uploads == nil {
		d.Uploads = importer.NewUploads(importer.UploadsDeps{Store: st, Files: fs, Limits: d.Import.File,
			Submitter: d.Submitter, Notifications: d.Webhooks, QueryTimeout: d.QueryTimeout})
	}
	srv := New(d)
	// Every exchange of the test is held to the OpenAPI document.
	handler := loadContract(t).Handler(t, srv.Handler())
	return &apiEnv{t: t, pg: pg, rdb: rdb, st: st, files: fs, root: root, srv: srv, handler: handler, logs: logs}
}

// call serves one request in-process; headers are name, value pairs set verbatim (so a test
// can send bytes a real client would refuse to).
func (e *apiEnv) call(method, target, token string, body io.Reader, headers ...string) *httptest.ResponseRecorder {
	e.t.Helper()
	req := httptest.NewRequest(method, "http://api.test/", body)
	u, err := req.URL.Parse(target)
	if err != nil {
		e.t.Fatalf("target %q: %v", target, err)
	}
	req.URL = u
	req.RequestURI = u.RequestURI()
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header[headers[i]] = []string{headers[i+1]}
	}
	rec := httptest.NewRecorder()
	e.handler.ServeHTTP(rec, req)
	return rec
}

func (e *apiEnv) callJSON(method, target, token string, body any, headers ...string) *httptest.ResponseRecorder {
	e.t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.call(method, target, token, bytes.NewReader(b), headers...)
}

// problemOf decodes a problem answer, failing unless it is one.
func problemOf(t *testing.T, rec *httptest.ResponseRecorder) problem.Problem {
	t.Helper()
	var p problem.Problem
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("answer %d is %q, not a problem: %s", rec.Code, ct, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatalf("problem body %q: %v", rec.Body, err)
	}
	// A field error is a catalogue message: its code and params say what its English says.
	for _, f := range p.Errors {
		if en := msg.Render(msg.EN, f.Code, f.Params); !msg.Known(f.Code) || en != f.Message {
			t.Errorf("the field error %+v is not the message its code says (%q)", f, en)
		}
	}
	return p
}

// finishedExport creates alice's export task and ends it SUCCESS with a result file
// expiring at expires (nil: never).
func (e *apiEnv) finishedExport(expires *time.Time) *store.Task {
	e.t.Helper()
	return e.finished(export.CustomersType, "exports", ".xlsx", "PK fake xlsx", expires, func(rel string) (store.Status, json.RawMessage) {
		result, _ := json.Marshal(export.ResultData{File: rel, Name: "customers.xlsx", Rows: 3, Size: 12, ContentType: export.ContentTypeXLSX})
		return store.StatusSuccess, result
	})
}

// finishedImport ends an import task PARTIAL_SUCCESS with an error report.
func (e *apiEnv) finishedImport(expires *time.Time) *store.Task {
	e.t.Helper()
	return e.finished(importer.Type, "imports", "-errors.xlsx", "PK fake report", expires, func(rel string) (store.Status, json.RawMessage) {
		return store.StatusPartialSuccess, json.RawMessage(`{"summary":{"total":3,"success":2,"failed":1},"error_report":"` + rel + `","error_report_name":"errors.xlsx"}`)
	})
}

// expiringExport is finishedExport with a result expiring in an hour, and its download path.
func (e *apiEnv) expiringExport() (task *store.Task, path string) {
	e.t.Helper()
	soon := time.Now().Add(time.Hour)
	task = e.finishedExport(&soon)
	return task, "/api/v1/tasks/" + task.TaskNo + "/result"
}

// expiringImport is finishedImport with a report expiring in an hour, and the report's path.
func (e *apiEnv) expiringImport() (task *store.Task, path string) {
	e.t.Helper()
	soon := time.Now().Add(time.Hour)
	task = e.finishedImport(&soon)
	return task, "/api/v1/tasks/" + task.TaskNo + "/error-report"
}

// finished creates alice's task of type typ, claims it, stores its file (the task number
// and suffix, under storage.Results) holding content, and ends it as ending says for that
// file, the file expiring at expires.
func (e *apiEnv) finished(typ, queue, suffix, content string, expires *time.Time, ending func(rel string) (store.Status, json.RawMessage)) *store.Task {
	e.t.Helper()
	ctx := context.Background()
	task, _, err := e.st.Create(ctx, store.NewTask{TaskNo: jobs.NewTaskNo(), Type: typ, Owner: "alice",
		Queue: queue, MaxRetry: 3, TimeoutSeconds: 60})
	if err != nil {
		e.t.Fatal(err)
	}
	claimed, err := e.st.ClaimTask(ctx, task.ID, "w1", time.Minute)
	if err != nil {
		e.t.Fatal(err)
	}
	rel := storage.Results + "/" + task.TaskNo + suffix
	e.put(rel, content)
	status, result := ending(rel)
	done, err := e.st.EndFinished(ctx, claimed.Lease, store.Outcome{Status: status, Result: result, ResultExpiresAt: expires})
	if err != nil {
		e.t.Fatal(err)
	}
	return done
}

// put stores a file as a worker would.
func (e *apiEnv) put(key, content string) {
	e.t.Helper()
	if _, err := e.files.Put(context.Background(), key, strings.NewReader(content), int64(len(content)), ""); err != nil {
		e.t.Fatal(err)
	}
}

// cleanupExpires does to a task what cleanup's expiry step does: delete its files, keep the
// row with result.expired set.
// expireResult moves the task's result expiry into the past, as time does before cleanup runs.
func (e *apiEnv) expireResult(task *store.Task) {
	e.t.Helper()
	if _, err := e.pg.DB.ExecContext(context.Background(), `UPDATE tasks SET result_expires_at = now() - interval '1 second' WHERE id = ?`, task.ID); err != nil {
		e.t.Fatal(err)
	}
}

func (e *apiEnv) cleanupExpires(task *store.Task) {
	e.t.Helper()
	r, _ := taskview.FilesOf(task)
	for _, rel := range []string{r.File, r.ErrorReport} {
		if rel != "" {
			if err := e.files.Delete(context.Background(), rel); err != nil {
				e.t.Fatal(err)
			}
		}
	}
	if err := e.st.ForgetResultFiles(context.Background(), []int64{task.ID}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *apiEnv) taskView(token, id string) TaskView {
	e.t.Helper()
	rec := e.call("GET", "/api/v1/tasks/"+id, token, nil)
	if rec.Code != http.StatusOK {
		e.t.Fatalf("get task %s: %d %s", id, rec.Code, rec.Body)
	}
	var v TaskView
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		e.t.Fatal(err)
	}
	return v
}

func TestExpiredResultAnswers410BeforeAndAfterCleanup(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	task, path := e.expiringExport()

	if rec := e.call("GET", path, aliceToken, nil); rec.Code != http.StatusOK || rec.Body.String() != "PK fake xlsx" {
		t.Fatalf("download before expiry: %d %s", rec.Code, rec.Body)
	}
	if v := e.taskView(aliceToken, task.TaskNo); v.Links.Result == "" || v.Result.Expired {
		t.Fatalf("fresh result: links %+v expired %v", v.Links, v.Result.Expired)
	}

	expectGone := func(when string) {
		t.Helper()
		rec := e.call("GET", path, aliceToken, nil)
		p := problemOf(t, rec)
		if rec.Code != http.StatusGone || p.Code != "result_expired" || !strings.Contains(p.Detail, "export again") {
			t.Fatalf("download %s: %d %+v, want 410 result_expired", when, rec.Code, p)
		}
		v := e.taskView(aliceToken, task.TaskNo)
		if v.Links.Result != "" || v.Result == nil || !v.Result.Expired || v.Result.Name != "customers.xlsx" {
			t.Fatalf("task view %s: links %+v result %+v", when, v.Links, v.Result)
		}
	}
	// Past its expiry, before cleanup has run: the file is still on disk.
	e.expireResult(task)
	expectGone("after expiry, before cleanup")
	// As cleanup leaves the row: no result.file, result.expired true.
	e.cleanupExpires(task)
	expectGone("after cleanup")
	// Even with no expiry time on record, the expired flag decides.
	e.pg.DB.ExecContext(context.Background(), `UPDATE tasks SET result_expires_at = NULL WHERE id = ?`, task.ID) //nolint:errcheck
	expectGone("after cleanup, without an expiry time")
	// The export never had an error report.
	if rec := e.call("GET", "/api/v1/tasks/"+task.TaskNo+"/error-report", aliceToken, nil); rec.Code != http.StatusNotFound {
		t.Fatalf("error report of an export: %d %s", rec.Code, rec.Body)
	}
}

func TestExpiredErrorReportAnswers410BeforeAndAfterCleanup(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	task, path := e.expiringImport()
	if rec := e.call("GET", path, aliceToken, nil); rec.Code != http.StatusOK {
		t.Fatalf("report before expiry: %d %s", rec.Code, rec.Body)
	}
	if v := e.taskView(aliceToken, task.TaskNo); v.Links.ErrorReport == "" {
		t.Fatalf("fresh report has no link: %+v", v.Links)
	}
	expectGone := func(when string) {
		t.Helper()
		rec := e.call("GET", path, aliceToken, nil)
		if p := problemOf(t, rec); rec.Code != http.StatusGone || p.Code != "report_expired" {
			t.Fatalf("report %s: %d %+v", when, rec.Code, p)
		}
		if v := e.taskView(aliceToken, task.TaskNo); v.Links.ErrorReport != "" || !v.Result.Expired {
			t.Fatalf("task view %s: links %+v result %+v", when, v.Links, v.Result)
		}
		// An import has no result file: that stays a 409, expired or not.
		if rec := e.call("GET", "/api/v1/tasks/"+task.TaskNo+"/result", aliceToken, nil); rec.Code != http.StatusConflict {
			t.Fatalf("result of an import %s: %d %s", when, rec.Code, rec.Body)
		}
	}
	e.expireResult(task)
	expectGone("after expiry, before cleanup")
	e.cleanupExpires(task)
	expectGone("after cleanup")
}

func TestWrongMethodOnAKnownPathAnswers405WithAllow(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	cases := []struct{ method, path, allow string }{
		{"PUT", "/api/v1/tasks/tsk_X", "GET, HEAD"},
		{"DELETE", "/api/v1/tasks/tsk_X", "GET, HEAD"},
		{"OPTIONS", "/api/v1/tasks", "GET, HEAD, POST"},
		{"GET", "/api/v1/tasks/tsk_X/cancel", "POST"},
		{"PATCH", "/api/v1/exports", "POST"},
		{"DELETE", "/healthz", "GET, HEAD"},
	}
	for _, c := range cases {
		rec := e.call(c.method, c.path, aliceToken, nil)
		p := problemOf(t, rec)
		if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != c.allow || p.Code != "method_not_allowed" {
			t.Errorf("%s %s: %d Allow %q %+v, want 405 Allow %q", c.method, c.path, rec.Code, rec.Header().Get("Allow"), p, c.allow)
		}
	}
	if rec := e.call("PUT", "/api/v2/nothing", aliceToken, nil); rec.Code != http.StatusNotFound {
		t.Errorf("unknown path: %d", rec.Code)
	}
}

func TestEveryAnswerForbidsContentSniffing(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	task := e.finishedExport(nil)
	for _, c := range []struct{ method, path, token string }{
		{"GET", "/healthz", ""}, {"GET", "/api/v1/tasks", aliceToken}, {"GET", "/api/v1/tasks", ""},
		{"GET", "/api/v1/tasks/" + task.TaskNo + "/result", aliceToken}, {"GET", "/nowhere", ""}, {"GET", "/openapi.yaml", ""},
	} {
		if rec := e.call(c.method, c.path, c.token, nil); rec.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s %s (%d) lacks X-Content-Type-Options: nosniff", c.method, c.path, rec.Code)
		}
	}
}

func TestJSONBodiesAreReadStrictly(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	cases := []struct {
		name, contentType, body string
		status                  int
		code, detail            string
	}{
		{"trailing object", "application/json", `{"type":"customers"}{"type":"tasks"}`, 400, "invalid_body", "data after"},
		{"trailing garbage", "application/json", `{"type":"customers"} x`, 400, "invalid_body", ""},
		{"duplicate key", "application/json", `{"type":"customers","type":"tasks"}`, 400, "invalid_body", "type appears twice"},
		{"duplicate key in another case", "application/json", `{"type":"customers","TYPE":"tasks"}`, 400, "invalid_body", "twice"},
		{"duplicate nested key", "application/json", `{"type":"customers","filter":{"city":"a","city":"b"}}`, 400, "invalid_body", "filter.city appears twice"},
		{"json-ish media type", "application/jsonfoo", `{"type":"customers"}`, 415, "unsupported_media_type", ""},
		{"json+x media type", "application/json-patch+json", `{"type":"customers"}`, 415, "unsupported_media_type", ""},
		{"other charset", "application/json; charset=latin1", `{"type":"customers"}`, 415, "unsupported_media_type", ""},
		{"unknown parameter", "application/json; boundary=x", `{"type":"customers"}`, 415, "unsupported_media_type", ""},
		{"text/plain", "text/plain", `{"type":"customers"}`, 415, "unsupported_media_type", ""},
		{"no media type", "", `{"type":"customers"}`, 415, "unsupported_media_type", "Content-Type: application/json"},
		{"NUL in a value", "application/json", `{"type":"customers","filter":{"city":"a\u0000b"}}`, 400, "invalid_body", "filter.city must not contain a NUL"},
		{"deep nesting", "application/json", `{"type":"x","filter":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`, 400, "invalid_body", "nested deeper"},
		{"huge number", "application/json", `{"type":"bench:noop","params":{"n":1e999}}`, 400, "invalid_body", "params.n is a number out of range"},
		{"empty", "application/json", ``, 400, "invalid_body", "empty"},
		{"too large", "application/json", `{"type":"customers","filter":{"city":"` + strings.Repeat("a", request.MaxJSONBody) + `"}}`, 413, "body_too_large", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := "/api/v1/exports"
			if strings.Contains(c.body, "bench:noop") {
				path = "/api/v1/tasks"
			}
			rec := e.call("POST", path, aliceToken, strings.NewReader(c.body), "Content-Type", c.contentType)
			p := problemOf(t, rec)
			if rec.Code != c.status || p.Code != c.code || !strings.Contains(p.Detail, c.detail) {
				t.Fatalf("%d %+v, want %d %s with %q", rec.Code, p, c.status, c.code, c.detail)
			}
		})
	}
	t.Run("charset utf-8 is fine", func(t *testing.T) {
		rec := e.call("POST", "/api/v1/exports", aliceToken, strings.NewReader(`{"type":"customers"}`), "Content-Type", "application/json; charset=UTF-8")
		if rec.Code != http.StatusAccepted {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
	})
}

func TestSubmitValidatesFiltersFieldByField(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	cases := []struct {
		name   string
		body   string
		fields []string
		detail string
	}{
		{"year zero", `{"type":"tasks","filter":{"created_from":"0000-01-01T00:00:00Z"}}`, []string{"filter.created_from"}, "1970"},
		{"before 1970", `{"type":"tasks","filter":{"created_to":"1969-12-31T23:59:59Z"}}`, []string{"filter.created_to"}, ""},
		{"from after to", `{"type":"tasks","filter":{"created_from":"2026-02-01T00:00:00Z","created_to":"2026-01-01T00:00:00Z"}}`, []string{"filter.created_from"}, "before created_to"},
		{"bad status", `{"type":"tasks","filter":{"status":["DONE"]}}`, []string{"filter.status"}, `"DONE" is not a task status`},
		{"too many types", `{"type":"tasks","filter":{"type":[` + strings.TrimSuffix(strings.Repeat(`"a",`, 21), ",") + `]}}`, []string{"filter.type"}, "at most 20"},
		{"long type", `{"type":"tasks","filter":{"type":["` + strings.Repeat("t", 101) + `"]}}`, []string{"filter.type"}, "at most 100"},
		{"control character in owner", `{"type":"tasks","filter":{"owner":"a\tb"}}`, []string{"filter.owner"}, "control"},
		{"long city", `{"type":"customers","filter":{"city":"` + strings.Repeat("城", 65) + `"}}`, []string{"filter.city"}, "at most 64"},
		{"unknown level", `{"type":"customers","filter":{"level":"bronze"}}`, []string{"filter.level"}, "normal, silver"},
		{"long code prefix", `{"type":"customers","filter":{"code_prefix":"` + strings.Repeat("C", 33) + `"}}`, []string{"filter.code_prefix"}, "at most 32"},
		{"several at once", `{"type":"customers","filter":{"level":"x","code_prefix":"` + strings.Repeat("C", 33) + `"}}`, []string{"filter.level", "filter.code_prefix"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := e.call("POST", "/api/v1/exports", adminToken, strings.NewReader(c.body))
			p := problemOf(t, rec)
			var fields []string
			for _, f := range p.Errors {
				fields = append(fields, f.Field)
			}
			if rec.Code != http.StatusUnprocessableEntity || p.Code != "bad_filter" || strings.Join(fields, ",") != strings.Join(c.fields, ",") ||
				!strings.Contains(p.Detail, c.detail) {
				t.Fatalf("%d %+v, want 422 bad_filter on %v with %q", rec.Code, p, c.fields, c.detail)
			}
		})
	}
	var n int
	e.pg.DB.NewRaw("SELECT count(*) FROM tasks").Scan(context.Background(), &n) //nolint:errcheck
	if n != 0 {
		t.Fatalf("refused submits left %d tasks", n)
	}
	// The edges are accepted.
	rec := e.call("POST", "/api/v1/exports", aliceToken, strings.NewReader(
		`{"type":"tasks","filter":{"created_from":"1970-01-01T00:00:00Z","created_to":"9999-12-31T23:59:59Z","status":["FAILED"]}}`))
	if rec.Code != http.StatusAccepted {
		t.Fatalf("edge times: %d %s", rec.Code, rec.Body)
	}
	rec = e.call("POST", "/api/v1/exports", aliceToken, strings.NewReader(`{"type":"customers","filter":{"level":"gold","city":"上海"}}`))
	if rec.Code != http.StatusAccepted {
		t.Fatalf("valid customer filter: %d %s", rec.Code, rec.Body)
	}
}

func TestCleanFilenameDropsInvisibleCharacters(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"invoice\u202Excod.exe":            "invoicexcod.exe",
		"a\u2066b\u2067c\u2068d\u2069.csv": "abcd.csv",
		"\u200Freport\u200E.xlsx":          "report.xlsx",
		"zero\u200Bwidth\uFEFF.csv":        "zerowidth.csv",
		"line\u2028sep.csv":                "linesep.csv",
		`C:\Users\x\..\evil.xlsx`:          "evil.xlsx",
		"bad\xffutf8.csv":                  "bad\uFFFDutf8.csv",
		"nul\x00.csv":                      "nul.csv",
		"客户👩\u200D💻.xlsx":                  "客户👩\u200D💻.xlsx",
	}
	for in, want := range cases {
		if got := cleanFilename(in); got != want {
			t.Errorf("cleanFilename(%q) = %q, want %q", in, got, want)
		}
	}
}

// multipartBody builds an import upload.
func multipartBody(t *testing.T, filename string, content []byte, fields map[string]string) (*bytes.Buffer, string) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for k, v := range fields {
		mw.WriteField(k, v) //nolint:errcheck
	}
	fw, err := mw.CreateFormFile("file", filename)
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(content) //nolint:errcheck
	mw.Close()
	return &body, mw.FormDataContentType()
}

func TestImportShowsTheCleanedFilename(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	body, ct := multipartBody(t, "customers\u202Evsc.csv", []byte("code,name,phone\nC1,A,13800000001\n"), nil)
	rec := e.call("POST", "/api/v1/imports", aliceToken, body, "Content-Type", ct)
	if rec.Code != http.StatusAccepted {
		t.Fatalf("upload: %d %s", rec.Code, rec.Body)
	}
	if strings.Contains(rec.Body.String(), "\u202E") || !strings.Contains(rec.Body.String(), `"filename":"customersvsc.csv"`) {
		t.Fatalf("the task shows the raw name: %s", rec.Body)
	}
	abs := filepath.Join(e.root, storage.Uploads)
	entries, _ := os.ReadDir(abs)
	for _, de := range entries {
		if strings.Contains(de.Name(), "\u202E") {
			t.Fatalf("stored under the uploaded name: %s", de.Name())
		}
	}
}
