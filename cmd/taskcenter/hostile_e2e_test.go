package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/taskcenter/taskcenter/internal/sheet/sheettest"
	"github.com/taskcenter/taskcenter/internal/testenv"
)

const hostileHeader = `<row r="1"><c t="inlineStr"><is><t>code</t></is></c><c t="inlineStr"><is><t>name</t></is></c><c t="inlineStr"><is><t>phone</t></is></c></row>`

// uploadStream posts a multipart import whose file content is streamed from r.
func uploadStream(t *testing.T, base, filename string, r io.Reader) response {
	t.Helper()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		fw, err := mw.CreateFormFile("file", filename)
		if err == nil {
			_, err = io.Copy(fw, r)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	req, _ := http.NewRequest("POST", base+"/api/v1/imports", pr)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	res, err := checkedClient(t).Do(req)
	if err != nil {
		t.Fatalf("upload %s: %v", filename, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// repeatReader streams n bytes of pattern.
type repeatReader struct {
	pattern []byte
	n       int64
	off     int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	if r.off == 0 && len(r.pattern) < 64<<10 {
		// The same stream in large copies: a one-byte pattern copied byte by byte took 80 s
		// for 500 MB under the race detector.
		r.pattern = bytes.Repeat(r.pattern, (64<<10)/len(r.pattern)+1)
	}
	k := 0
	for k < len(p) && int64(k) < r.n {
		c := copy(p[k:min(len(p), k+int(min(r.n-int64(k), int64(len(r.pattern)-r.off))))], r.pattern[r.off:])
		r.off = (r.off + c) % len(r.pattern)
		k += c
	}
	r.n -= int64(k)
	return k, nil
}

// memory samples a process's resident memory from /proc until stopped.
type memory struct {
	pid     int
	mu      sync.Mutex
	maxRSS  int64 // kB, the largest VmRSS sampled
	samples int
	stop    chan struct{}
	done    chan struct{}
}

func watchMemory(pid int) *memory {
	m := &memory{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if rss, _ := procStatus(pid, "VmRSS"); rss > 0 {
				m.mu.Lock()
				m.maxRSS, m.samples = max(m.maxRSS, rss), m.samples+1
				m.mu.Unlock()
			}
			select {
			case <-m.stop:
				return
			case <-t.C:
			}
		}
	}()
	return m
}

func (m *memory) finish() (maxRSS int64, samples int) {
	close(m.stop)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.maxRSS, m.samples
}

// procStatus reads a "Vm…: N kB" line of /proc/<pid>/status.
func procStatus(pid int, key string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && k == key {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", key, pid)
}

// Every hostile file of the hostile-input round, against the real binary (api and worker in one
// process): each is refused at submit or ends FAILED as bad input, with words a person
// understands, no retry and no alert; a normal import beside them succeeds; the process
// stays under 300 MB and keeps answering /healthz.
func TestHostileUploadsKeepTheProcessSmallAndAnswering(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]string{
		"TASKCENTER_IMPORT_MAX_UPLOAD_BYTES": strconv.Itoa(600 << 20), // room for a 500 MB CSV
	})
	bin := e.startBinary("api,worker")
	api := &proc{t: t, client: checkedClient(t), base: bin.base}
	pid := bin.cmd.Process.Pid
	mem := watchMemory(pid)

	// /healthz must keep answering, promptly, all along.
	var healthFailures atomic.Int32
	var slowest atomic.Int64
	stopHealth := make(chan struct{})
	healthDone := make(chan struct{})
	go func() {
		defer close(healthDone)
		client := checkedClient(t)
		client.Timeout = 2 * time.Second
		for {
			began := time.Now()
			res, err := client.Get(bin.base + "/healthz")
			if err != nil || res.StatusCode != http.StatusOK {
				healthFailures.Add(1)
			}
			if err == nil {
				res.Body.Close()
			}
			slowest.Store(max(slowest.Load(), int64(time.Since(began))))
			select {
			case <-stopHealth:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()

	gigaCell := []sheettest.Piece{sheettest.Text(`<row r="2"><c r="A2" t="inlineStr"><is><t>`), sheettest.Repeat("A", 1000<<20), sheettest.Text(`</t></is></c></row>`)}
	// Declares two rows, holds 1.1 million.
	lying := []sheettest.Piece{sheettest.Text(`<worksheet><dimension ref="A1:C2"/><sheetData>` + hostileHeader),
		{B: []byte(strings.Repeat(`<row><c><v>1</v></c></row>`, 1000)), Times: 1100}, sheettest.Text(`</sheetData></worksheet>`)}
	wrap := sheettest.BookParts([]sheettest.Piece{sheettest.Text(`<worksheet><sheetData>` + hostileHeader), sheettest.Repeat(" ", 64<<20), sheettest.Text(`</sheetData></worksheet>`)}, nil)
	wrap[3].Declare = 1 << 63
	wrap = append(wrap, sheettest.Part{Name: "xl/media/padding.bin", Pieces: []sheettest.Piece{sheettest.Text("x")}, Declare: 1 << 63})
	manyParts := sheettest.BookParts([]sheettest.Piece{sheettest.Text(`<worksheet><sheetData>` + hostileHeader + `</sheetData></worksheet>`)}, nil)
	for i := range 10_001 {
		manyParts = append(manyParts, sheettest.Part{Name: fmt.Sprintf("xl/media/%d", i), Pieces: []sheettest.Piece{sheettest.Text("x")}})
	}

	type hostile struct {
		name    string
		file    string
		content func() io.Reader
		status  int    // at submit: 202, or the refusal
		code    string // the refusal's or the failure's code
		says    string
	}
	book := func(parts []sheettest.Part) func() io.Reader {
		b := sheettest.Zip(t, parts...)
		return func() io.Reader { return bytes.NewReader(b) }
	}
	cases := []hostile{
		{"a 1,000 MiB cell that deflates to 1 MB", "cell.xlsx",
			book(sheettest.BookParts(append([]sheettest.Piece{sheettest.Text(`<worksheet><sheetData>` + hostileHeader)}, append(gigaCell, sheettest.Text(`</sheetData></worksheet>`))...), nil)),
			422, "row_too_large", "row 2 holds more than 8 MB"},
		{"the same cell under a plausible dimension", "cell-declared.xlsx",
			book(sheettest.BookParts(append([]sheettest.Piece{sheettest.Text(`<worksheet><dimension ref="A1:C100000"/><sheetData>` + hostileHeader)}, append(gigaCell, sheettest.Text(`</sheetData></worksheet>`))...), nil)),
			202, "row_too_large", "row 2 holds more than 8 MB"},
		{"a 1,000 MiB shared string", "sst.xlsx",
			book(sheettest.BookParts([]sheettest.Piece{sheettest.Text(`<worksheet><dimension ref="A1:C2"/><sheetData>` + hostileHeader + `<row r="2"><c t="s"><v>0</v></c></row></sheetData></worksheet>`)},
				[]sheettest.Piece{sheettest.Text(`<sst><si><t>`), sheettest.Repeat("A", 1000<<20), sheettest.Text(`</t></si></sst>`)})),
			202, "row_too_large", "shared string 0 of the workbook holds more than 8 MB"},
		{"ZIP64 sizes that wrap around", "wrap.xlsx", book(wrap), 413, "too_large_uncompressed", "claim to expand to more than any disk holds"},
		{"10,001 parts", "parts.xlsx", book(manyParts), 422, "damaged_file", "more than 10,000 parts"},
		// Submit counts the first rows only and accepts it; the worker counts every row
		// before its first batch.
		{"a dimension that hides 1.1 million rows", "lying.xlsx", book(sheettest.BookParts(lying, nil)), 202, "too_many_rows", "has 1,100,000 rows, over the limit of 1,000,000"},
		{"an unclosed quote over 20 lines of 1 MB", "quote.csv",
			func() io.Reader {
				line := append(bytes.Repeat([]byte("A"), 1<<20), '\n')
				return io.MultiReader(strings.NewReader("code,name,phone\nC1,\"n"), &repeatReader{pattern: line, n: int64(20 * len(line))})
			},
			202, "row_too_large", "a quote (\") opened in that row is never closed"},
		{"a 500 MB field", "field.csv",
			func() io.Reader {
				return io.MultiReader(strings.NewReader("code,name,phone\nC1,"), &repeatReader{pattern: []byte("A"), n: 500 << 20})
			},
			422, "row_too_large", "line 2 is longer than 8 MB"},
	}

	normal := sheetBytes(t, func(f *excelize.File) {
		f.SetSheetRow("Sheet1", "A1", &[]any{"code", "name", "phone"}) //nolint:errcheck
		for i := 2; i <= 41; i++ {
			f.SetSheetRow("Sheet1", fmt.Sprintf("A%d", i), &[]any{fmt.Sprintf("N%d", i), "normal", 13800000000 + i}) //nolint:errcheck
		}
	})
	began := time.Now()
	normalTask := api.submitImport(aliceToken, "normal.xlsx", normal, nil)

	var accepted []struct {
		hostile
		id string
	}
	for _, c := range cases {
		res := uploadStream(t, bin.base, c.file, c.content())
		if res.status != c.status {
			t.Errorf("%s: submit answered %d %s, want %d", c.name, res.status, res.body, c.status)
			continue
		}
		if c.status != http.StatusAccepted {
			var prob struct{ Code, Detail string }
			json.Unmarshal(res.body, &prob) //nolint:errcheck
			if prob.Code != c.code || !strings.Contains(prob.Detail, c.says) {
				t.Errorf("%s: refused with %s %q, want %s saying %q", c.name, prob.Code, prob.Detail, c.code, c.says)
			}
			continue
		}
		var out struct{ Task taskJSON }
		res.json(t, &out)
		accepted = append(accepted, struct {
			hostile
			id string
		}{c, out.Task.ID})
	}
	for _, a := range accepted {
		final := api.waitStatus(aliceToken, a.id, 60*time.Second, "FAILED", "SUCCESS", "PARTIAL_SUCCESS", "RETRY_WAIT")
		if final.Status != "FAILED" || final.Error == nil || final.Error.Code != a.code || !strings.Contains(final.Error.Message, a.says) ||
			final.Retry != 0 || len(final.Attempts) != 1 {
			t.Errorf("%s: ended %s %+v after %d attempts (retries %d); want FAILED %s saying %q, no retry",
				a.name, final.Status, final.Error, len(final.Attempts), final.Retry, a.code, a.says)
		}
	}
	final := api.waitStatus(aliceToken, normalTask.ID, 60*time.Second, "SUCCESS", "FAILED", "PARTIAL_SUCCESS")
	if final.Status != "SUCCESS" || final.Counts.Success != 40 {
		t.Errorf("the normal import beside them: %s with %d imported, want SUCCESS with 40", final.Status, final.Counts.Success)
	}
	took := time.Since(began)

	close(stopHealth)
	<-healthDone
	maxRSS, samples := mem.finish()
	hwm, err := procStatus(pid, "VmHWM")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d hostile files in %s: peak RSS (VmHWM) %d MB, largest sampled VmRSS %d MB over %d samples; /healthz slowest %s, %d failures",
		len(cases), took.Round(time.Millisecond), hwm>>10, maxRSS>>10, samples, time.Duration(slowest.Load()).Round(time.Millisecond), healthFailures.Load())
	if peak := max(hwm, maxRSS); peak > 300<<10 {
		t.Errorf("peak RSS %d MB, over 300 MB", peak>>10)
	}
	if n := healthFailures.Load(); n > 0 {
		t.Errorf("/healthz failed %d times", n)
	}
	if alerts := bin.logs.matching("ALERT"); len(alerts) > 0 {
		t.Errorf("hostile input raised alerts: %v", alerts)
	}
}

// An expired export answers 410 before cleanup deletes the file and after.
func TestExpiredExportAnswers410BeforeAndAfterCleanup(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]string{
		"TASKCENTER_EXPORT_RESULT_TTL": "2s",
		"TASKCENTER_CLEANUP_SPEC":      "@every 1s",
	})
	e.seedCustomers(5)
	p := e.start("api,worker") // no scheduler yet: no cleanup round runs
	task := p.submitExport(aliceToken, map[string]any{"type": "customers"})
	done := p.waitStatus(aliceToken, task.ID, 30*time.Second, "SUCCESS")
	if res := p.do("GET", done.Links["result"], aliceToken, nil); res.status != http.StatusOK {
		t.Fatalf("fresh download: %d %s", res.status, res.body)
	}
	resultPath := "/api/v1/tasks/" + task.ID + "/result"
	expectGone := func(when string) {
		t.Helper()
		res := p.do("GET", resultPath, aliceToken, nil)
		var prob struct{ Code, Detail string }
		res.json(t, &prob)
		if res.status != http.StatusGone || prob.Code != "result_expired" || !strings.Contains(prob.Detail, "export again") {
			t.Fatalf("download %s: %d %s, want 410 result_expired", when, res.status, res.body)
		}
		view := p.task(aliceToken, task.ID)
		if view.Links["result"] != "" || view.Result == nil || !view.Result.Expired {
			t.Fatalf("task view %s: links %v result %+v", when, view.Links, view.Result)
		}
	}
	testenv.Eventually(t, 10*time.Second, "the result to expire", func() bool {
		return p.do("GET", resultPath, aliceToken, nil).status == http.StatusGone
	})
	if n := e.count(`SELECT count(*) FROM tasks WHERE task_no = ? AND (result ->> 'file') IS NOT NULL`, task.ID); n != 1 {
		t.Fatal("the file reference is gone before any cleanup ran")
	}
	expectGone("after expiry, before cleanup")

	e.start("worker,scheduler") // cleanup rounds begin
	testenv.Eventually(t, 30*time.Second, "cleanup to expire the result", func() bool {
		return e.count(`SELECT count(*) FROM tasks WHERE task_no = ? AND (result ->> 'expired')::boolean AND (result ->> 'file') IS NULL`, task.ID) == 1
	})
	if files, _ := filepath.Glob(filepath.Join(e.dataDir, "results", "*")); len(files) != 0 {
		t.Fatalf("result files left after cleanup: %v", files)
	}
	for range 3 {
		expectGone("after cleanup")
		time.Sleep(300 * time.Millisecond)
	}
}

// The inputs an adversarial round found answering 500, sent over the wire to a running server, and odd
// but valid values carried through exports that run to the end.
func TestHostileRequestsOverTheWire(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.seedCustomers(3, [3]string{"X%1", "odd percent", "13900000001"})
	p := e.start("all")
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, c := range []struct {
		name, method, path, token string
		body                      any
		headers                   []string
		status                    int
		field                     string
	}{
		{"year 0 created_to", "GET", "/api/v1/tasks?created_to=0000-01-01T00:00:00Z", aliceToken, nil, nil, 400, "created_to"},
		{"cursor -2^63", "GET", "/api/v1/tasks?cursor=" + b64("-9223372036854775808:1"), aliceToken, nil, nil, 400, "cursor"},
		{"NUL in type", "GET", "/api/v1/tasks?type=a%00", aliceToken, nil, nil, 400, "type"},
		{"NUL in owner", "GET", "/api/v1/tasks?owner=a%00", adminToken, nil, nil, 400, "owner"},
		{"NUL in the id", "GET", "/api/v1/tasks/tsk_%00", aliceToken, nil, nil, 400, "id"},
		{"invalid UTF-8 in the id", "POST", "/api/v1/tasks/%FF%FE/cancel", aliceToken, nil, nil, 400, "id"},
		{"NUL in a filter", "POST", "/api/v1/exports", aliceToken, map[string]any{"type": "tasks", "filter": map[string]any{"owner": "a\x00"}}, nil, 400, "filter.owner"},
		{"year 0 in a filter", "POST", "/api/v1/exports", aliceToken, map[string]any{"type": "tasks", "filter": map[string]any{"created_from": "0000-01-01T00:00:00Z"}}, nil, 422, "filter.created_from"},
		{"invalid UTF-8 Idempotency-Key", "POST", "/api/v1/exports", aliceToken, map[string]any{"type": "customers"}, []string{"Idempotency-Key", "key\xff"}, 400, "Idempotency-Key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := p.do(c.method, c.path, c.token, c.body, c.headers...)
			var prob struct {
				Errors []struct{ Field string }
			}
			res.json(t, &prob)
			if res.status != c.status || len(prob.Errors) == 0 || prob.Errors[0].Field != c.field {
				t.Fatalf("%d %s, want %d naming %s", res.status, res.body, c.status, c.field)
			}
		})
	}

	// Quotes, ?, $1, ::, backslashes and LIKE wildcards are data: the exports run to the end
	// and match nothing (or exactly the row that has them).
	odd := []string{"o'brien", "?", "$1", "a::text", `C:\x\`, "?0 ?TableName", "' OR 1=1 --"}
	var ids []string
	for _, v := range odd {
		ids = append(ids,
			p.submitExport(aliceToken, map[string]any{"type": "customers", "filter": map[string]any{"city": v, "code_prefix": v}}).ID,
			p.submitExport(adminToken, map[string]any{"type": "tasks", "filter": map[string]any{"type": []string{v}, "owner": v}}).ID)
		var list ListViewJSON
		res := p.do("GET", "/api/v1/tasks?type="+url.QueryEscape(v)+"&owner="+url.QueryEscape(v), adminToken, nil)
		res.json(t, &list)
		if res.status != http.StatusOK || len(list.Items) != 0 {
			t.Fatalf("list with type and owner %q: %d %s", v, res.status, res.body)
		}
		if res := p.do("GET", "/api/v1/tasks/"+url.PathEscape(v), aliceToken, nil); res.status != http.StatusNotFound {
			t.Fatalf("task id %q: %d %s", v, res.status, res.body)
		}
	}
	percent := p.submitExport(aliceToken, map[string]any{"type": "customers", "filter": map[string]any{"code_prefix": "X%"}})
	for _, id := range ids {
		done := p.waitStatus(adminToken, id, 3*time.Minute, "SUCCESS", "FAILED")
		if done.Status != "SUCCESS" || done.Result == nil || done.Result.Rows != 0 {
			t.Fatalf("export %s: %+v (error %+v)", id, done.Result, done.Error)
		}
	}
	if done := p.waitStatus(aliceToken, percent.ID, 3*time.Minute, "SUCCESS", "FAILED"); done.Status != "SUCCESS" || done.Result.Rows != 1 {
		t.Fatalf("code_prefix X%% matches %+v, want exactly the row X%%1", done.Result)
	}
	for _, bad := range []string{"syntax error", "SQLSTATE 42601", "SQLSTATE 22", "request failed"} {
		if lines := p.logs.matching(bad); len(lines) > 0 {
			t.Fatalf("the server logged %q:\n%s", bad, strings.Join(lines, "\n"))
		}
	}
}

func TestHTTPHygieneOverTheWire(t *testing.T) {
	t.Parallel()
	e, p := startEnv(t, nil, "api")
	for _, c := range []struct{ method, path, allow string }{
		{"PUT", "/api/v1/tasks/tsk_X", "GET, HEAD"},
		{"DELETE", "/api/v1/tasks/tsk_X", "GET, HEAD"},
		{"OPTIONS", "/api/v1/exports", "POST"},
	} {
		res := p.do(c.method, c.path, aliceToken, nil)
		if res.status != http.StatusMethodNotAllowed || res.header.Get("Allow") != c.allow ||
			res.header.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(string(res.body), "method_not_allowed") {
			t.Errorf("%s %s: %d %v %s", c.method, c.path, res.status, res.header, res.body)
		}
	}
	req, _ := http.NewRequest("POST", p.base+"/api/v1/exports", strings.NewReader(`{"type":"customers"}{"type":"tasks"}`))
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := p.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("trailing data: %d", res.StatusCode)
	}
	if n := e.count("SELECT count(*) FROM tasks"); n != 0 {
		t.Fatalf("a refused body created %d tasks", n)
	}
}

// trickle sends a request's head and then one body byte every interval over a raw
// connection, and returns the status the server answers with (0 if it never does within
// the deadline).
func trickle(t *testing.T, base, path, token string, every time.Duration, deadline time.Duration) <-chan int {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); conn.Close() })
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: multipart/form-data; boundary=B\r\nContent-Length: 1000000\r\n\r\n"+
		"--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"c.csv\"\r\n\r\ncode,name,phone\r\n", path, token)
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := io.WriteString(conn, "C"); err != nil {
					return
				}
			}
		}
	}()
	out := make(chan int, 1)
	go func() {
		conn.SetReadDeadline(time.Now().Add(deadline)) //nolint:errcheck
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			out <- 0
			return
		}
		res.Body.Close()
		out <- res.StatusCode
	}()
	return out
}

// With the default limits, uploads trickling a few bytes a second are cut
// off, and a user holds at most four at once.
func TestSlowUploadsAreCutOffWithDefaultLimits(t *testing.T) {
	t.Parallel()
	e, p := startEnv(t, nil, "api")
	var held []<-chan int
	for range 4 {
		held = append(held, trickle(t, p.base, "/api/v1/imports", aliceToken, 200*time.Millisecond, 40*time.Second))
	}
	time.Sleep(500 * time.Millisecond)
	csv := []byte("code,name,phone\nC1,A,13800000001\n")
	res := p.upload(aliceToken, "c.csv", csv, nil)
	if res.status != http.StatusTooManyRequests || res.header.Get("Retry-After") == "" || !strings.Contains(string(res.body), "too_many_uploads") {
		t.Fatalf("a fifth concurrent upload: %d %v %s", res.status, res.header, res.body)
	}
	if res := p.upload(bobToken, "c.csv", csv, nil); res.status != http.StatusAccepted {
		t.Fatalf("another user's upload: %d %s", res.status, res.body)
	}
	start := time.Now()
	for i, c := range held {
		if status := <-c; status != http.StatusRequestTimeout {
			t.Fatalf("trickling upload %d: %d after %s, want 408", i, status, time.Since(start))
		}
	}
	t.Logf("trickling uploads cut off %s after they started", time.Since(start)+500*time.Millisecond)
	if res := p.upload(aliceToken, "c.csv", csv, nil); res.status != http.StatusAccepted {
		t.Fatalf("alice once her slow uploads ended: %d %s", res.status, res.body)
	}
	if n := len(p.logs.matching(`"status":408`)); n != 4 {
		t.Logf("408 request log lines: %d", n)
	}
	if entries, _ := os.ReadDir(filepath.Join(e.dataDir, "tmp")); len(entries) != 0 {
		var names []string
		for _, de := range entries {
			names = append(names, de.Name())
		}
		t.Fatalf("cut-off uploads left temp files: %v", names)
	}
}

// A request whose head is larger than http.max_header_bytes is answered 431 on every address
// the process serves (the API with the page and the console, and the metrics address), even by
// a client that writes all of its 2.8 MB head before it reads, at the pace of a real network;
// the server serves the next request as usual.
func TestOversizedHeadersAnswer431OnEveryAddress(t *testing.T) {
	t.Parallel()
	_, p := startEnv(t, nil, "all")
	for name, base := range map[string]string{"api": p.base, "metrics": p.metricsBase(t)} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			addr := strings.TrimPrefix(base, "http://")
			for _, path := range []string{"/healthz", "/api/v1/tasks", "/monitor/"} {
				if name == "metrics" && path != "/healthz" {
					continue
				}
				status, err := sendOversizedHead(addr, path, 2_800_000)
				if err != nil || status != http.StatusRequestHeaderFieldsTooLarge {
					t.Fatalf("GET %s with a 2.8 MB header: status %d, %v; want 431", path, status, err)
				}
			}
			res, err := http.Get(base + "/healthz")
			if err != nil {
				t.Fatalf("a normal request afterwards: %v", err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("a normal request afterwards: %d", res.StatusCode)
			}
		})
	}
}

// sendOversizedHead writes a GET whose head is about size bytes over its own TCP connection,
// in 32 KiB pieces a few milliseconds apart (the server has read its limit and answered long
// before the client is done), and only then reads the answer.
func sendOversizedHead(addr, path string, size int) (int, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	req := []byte("GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer " + aliceToken +
		"\r\nX-Oversized: " + strings.Repeat("x", size) + "\r\n\r\n")
	for len(req) > 0 {
		n := min(len(req), 32<<10)
		if _, err := c.Write(req[:n]); err != nil {
			return 0, err
		}
		req = req[n:]
		time.Sleep(15 * time.Millisecond)
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Second)) //nolint:errcheck
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	res.Body.Close()
	return res.StatusCode, nil
}
