package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// metricsBase is the process's metrics address (metrics.addr), from its log.
func (p *proc) metricsBase(t *testing.T) string {
	t.Helper()
	line := p.logs.waitFor(t, 30*time.Second, `"msg":"metrics listening"`, p.done)
	var rec struct{ Addr string }
	json.Unmarshal([]byte(line), &rec) //nolint:errcheck
	return "http://" + rec.Addr
}

// scrape returns the value of one series (name with exactly these labels, as rendered),
// read from the process's metrics address.
func scrape(t *testing.T, p *proc, series string) float64 {
	t.Helper()
	res, err := http.Get(p.metricsBase(t) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("/metrics: %d %v", res.StatusCode, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.LastIndexByte(line, ' '); i > 0 && line[:i] == series {
			v, _ := strconv.ParseFloat(line[i+1:], 64)
			return v
		}
	}
	return 0
}

func TestMetricsConsoleAndLogsDuringAnImport(t *testing.T) {
	t.Parallel()
	// Without a per-owner running cap, so the claim goes through the grouped writer measured
	// below (a capped claim counts the owner's running tasks in a statement of its own).
	_, p := startEnv(t, map[string]string{"TASKCENTER_QUEUES_IMPORTS_MAX_RUNNING_PER_OWNER": "0"}, "all")
	before := scrape(t, p, `taskcenter_rows_total{result="success",type="import:customers"}`)
	task := p.submitImport(aliceToken, "messy.xlsx", excelizeMessy(t), map[string]string{})
	p.waitStatus(aliceToken, task.ID, 3*time.Minute, "PARTIAL_SUCCESS")

	for series, want := range map[string]float64{
		`taskcenter_tasks_submitted_total{type="import:customers"}`:                                      1,
		`taskcenter_rows_total{result="success",type="import:customers"}`:                                before + 8,
		`taskcenter_rows_total{result="failed",type="import:customers"}`:                                 7,
		`taskcenter_tasks_finished_total{cause="none",status="PARTIAL_SUCCESS",type="import:customers"}`: 1,
		`taskcenter_task_attempts_total{trigger="first",type="import:customers"}`:                        1,
		`taskcenter_task_duration_seconds_count{type="import:customers"}`:                                1,
	} {
		if got := scrape(t, p, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if got := scrape(t, p, `taskcenter_http_request_duration_seconds_count{code="202",route="POST /api/v1/imports"}`); got != 1 {
		t.Errorf("http histogram for the import submit = %v", got)
	}
	// The grouped writes the submit, the claim and the ending went through.
	for _, kind := range []string{"submit", "claim", "end"} {
		waits := scrape(t, p, `taskcenter_write_wait_seconds_count{kind="`+kind+`"}`)
		rows := scrape(t, p, `taskcenter_write_batch_rows_sum{kind="`+kind+`"}`)
		if waits < 1 || rows != waits {
			t.Errorf("grouped %s writes: %v waits, %v rows", kind, waits, rows)
		}
	}

	// The console is mounted under /monitor/ and answers admins only.
	if res := p.do("GET", "/monitor/api/queues", adminToken, nil); res.status != 200 || !strings.Contains(string(res.body), `"queue":"imports"`) {
		t.Errorf("console API for the admin: %d %.200s", res.status, res.body)
	}
	if res := p.do("GET", "/monitor/api/queues", aliceToken, nil); res.status != http.StatusUnauthorized {
		t.Errorf("console API for a user token: %d, want 401", res.status)
	}
	if res := p.do("GET", "/monitor/", adminToken, nil); res.status != 200 || !strings.Contains(string(res.body), "/monitor") {
		t.Errorf("console page: %d", res.status)
	}
	// The API address has no /metrics unless the operator gives it a token (metrics.token).
	if res := p.do("GET", "/metrics", "", nil); res.status != http.StatusNotFound {
		t.Errorf("/metrics on the API address without metrics.token: %d", res.status)
	}
	if res := p.do("GET", "/openapi.yaml", "", nil); res.status != 200 || !strings.Contains(string(res.body), "/api/v1/imports") {
		t.Errorf("openapi.yaml: %d", res.status)
	}

	// Every log line of the task's execution names the task, its type, the attempt and the
	// request that submitted it; no phone number appears in the logs.
	var submitRequest string
	for _, line := range p.logs.matching(`"route":"POST /api/v1/imports"`) {
		var rec struct {
			RequestID string `json:"request_id"`
		}
		json.Unmarshal([]byte(line), &rec) //nolint:errcheck
		submitRequest = rec.RequestID
	}
	lines := p.logs.matching(`"task_no":"` + task.ID + `"`)
	if len(lines) < 2 || submitRequest == "" {
		t.Fatalf("execution log lines: %d, submit request id %q", len(lines), submitRequest)
	}
	for _, line := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec["type"] != "import:customers" || rec["attempt"] == nil || rec["request_id"] != submitRequest {
			t.Errorf("log line without the task's fields: %s", line)
		}
	}
	if phone := regexp.MustCompile(`1[3-9][0-9]{9}`).FindString(p.logs.String()); phone != "" {
		t.Errorf("a phone number reached the logs: %s", phone)
	}
}
