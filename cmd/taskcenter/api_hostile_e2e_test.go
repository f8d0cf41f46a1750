package main

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/testenv"
)

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
