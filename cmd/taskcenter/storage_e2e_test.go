package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/testenv"
)

// withVars is e's settings with overrides, for a process that differs from the others (its
// own data dir).
func (e *env) withVars(overrides map[string]string) *env {
	c := *e
	c.vars = merge(e.vars, overrides)
	return &c
}

// customersXLSX is an .xlsx of n customers (every 97th with a bad phone), written through
// excelize's StreamWriter as Excel would store it (shared strings off: inline values).
func customersXLSX(t *testing.T, n int) (content []byte, bad int) {
	t.Helper()
	content = sheetBytes(t, func(f *excelize.File) {
		sw, err := f.NewStreamWriter("Sheet1")
		if err != nil {
			t.Fatal(err)
		}
		sw.SetRow("A1", []any{"code", "name", "phone"}) //nolint:errcheck
		for i := 1; i <= n; i++ {
			phone := fmt.Sprintf("139%08d", i)
			if i%97 == 0 {
				phone, bad = "12345", bad+1
			}
			cell, _ := excelize.CoordinatesToCellName(1, i+1)
			if err := sw.SetRow(cell, []any{fmt.Sprintf("N%07d", i), fmt.Sprintf("name %d", i), phone}); err != nil {
				t.Fatal(err)
			}
		}
		if err := sw.Flush(); err != nil {
			t.Fatal(err)
		}
	})
	return content, bad
}

// filesUnder lists the regular files under dir.
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error { //nolint:errcheck
		if err == nil && d.Type().IsRegular() {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// Nodes without a shared disk: one api process and two workers, each with its own
// empty data dir, all on one S3 bucket. An .xlsx uploaded to the API is imported by the first
// worker, which is SIGKILLed at about 40 %; the second takes over from the checkpoint, reading
// the same object, and the counts are exact with no row written twice. An export's result is
// downloaded through the presigned URL the API redirects to, and once expired the cleanup
// round deletes its object.
func TestNodesWithoutASharedDiskShareTheBucket(t *testing.T) {
	t.Parallel()
	gw := testenv.NewS3(t)
	const bucket = "taskcenter-e2e"
	e := newEnv(t, merge(fastCleanup, map[string]string{
		"TASKCENTER_STORAGE_BACKEND": "s3", "TASKCENTER_STORAGE_ENDPOINT": gw.Endpoint, "TASKCENTER_STORAGE_BUCKET": bucket,
		"TASKCENTER_STORAGE_REGION": gw.Region, "TASKCENTER_STORAGE_ACCESS_KEY": gw.AccessKey,
		"TASKCENTER_STORAGE_SECRET_KEY": gw.SecretKey, "TASKCENTER_STORAGE_CREATE_BUCKET": "true",
		"TASKCENTER_STORAGE_PRESIGN_TTL": "2m", "TASKCENTER_IMPORT_BATCH_SIZE": "100",
	}))
	dirs := map[string]string{"api": t.TempDir(), "worker A": t.TempDir(), "worker B": t.TempDir()}
	node := func(name string) *env { return e.withVars(map[string]string{"TASKCENTER_DATA_DIR": dirs[name]}) }
	bucketStore, err := storage.New(t.Context(), storage.Config{Backend: storage.BackendS3, Endpoint: gw.Endpoint, Bucket: bucket,
		Region: gw.Region, AccessKey: gw.AccessKey, SecretKey: gw.SecretKey, PathStyle: true, CreateBucket: true}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}

	api := node("api").start("api,scheduler")
	workerA := node("worker A").startBinary("worker")

	const rows = 30000
	content, bad := customersXLSX(t, rows)
	task := api.submitImport(aliceToken, "customers.xlsx", content, map[string]string{"mode": "upsert"})
	// SIGKILL worker A once about 40 % of the rows are committed.
	var at int
	testenv.Eventually(t, 60*time.Second, "the import to reach 40 %", func() bool {
		at = e.count("SELECT progress_current FROM tasks WHERE task_no = ?", task.ID)
		return at >= rows*4/10
	})
	workerA.signal(syscall.SIGKILL, 10*time.Second)
	if at >= rows {
		t.Fatalf("the import had finished (%d rows) before worker A was killed; the test needs a bigger file", at)
	}
	began := time.Now()
	t.Logf("worker A killed with %d of %d rows committed", e.count("SELECT progress_current FROM tasks WHERE task_no = ?", task.ID), rows)

	workerB := node("worker B").start("worker")
	final := api.waitStatus(aliceToken, task.ID, 2*time.Minute, "PARTIAL_SUCCESS", "SUCCESS", "FAILED")
	if final.Status != "PARTIAL_SUCCESS" || final.Counts.Total != rows || final.Counts.Success != int64(rows-bad) || final.Counts.Failed != int64(bad) {
		t.Fatalf("after the takeover: %s %+v, want PARTIAL_SUCCESS %d/%d/%d", final.Status, final.Counts, rows, rows-bad, bad)
	}
	t.Logf("worker B finished the import %s after the kill", time.Since(began).Round(time.Millisecond))
	if n := e.count("SELECT count(*) FROM customers WHERE code LIKE 'N%'"); n != rows-bad {
		t.Fatalf("%d customers written, want %d", n, rows-bad)
	}
	if items := e.items(task.ID); len(items) != bad { // items fails on a row rejected twice
		t.Fatalf("%d rejected rows recorded, want %d", len(items), bad)
	}
	// The attempt worker A was running when it was killed is superseded by B's takeover. Under
	// load an earlier attempt of A's may have ended on a transient error (a lock wait past
	// the harness's short lock_timeout) and been retried: that one ends RETRY_WAIT.
	n := len(final.Attempts)
	if n < 2 || final.Attempts[n-2].Status != "SUPERSEDED" || final.Attempts[n-1].Trigger != "takeover" {
		t.Fatalf("attempts = %+v, want the killed one superseded and a takeover", final.Attempts)
	}
	for _, a := range final.Attempts[:n-2] {
		if a.Status != "RETRY_WAIT" {
			t.Fatalf("attempts = %+v, want only transient endings before the killed one", final.Attempts)
		}
	}
	if len(workerB.logs.matching("resuming after row")) == 0 {
		t.Fatal("worker B did not resume from the checkpoint")
	}
	// The nodes shared the bucket only: the upload is an object, no node holds a copy.
	var uploads []string
	bucketStore.List(context.Background(), storage.Uploads+"/", time.Time{}, func(i storage.Info) error { //nolint:errcheck
		uploads = append(uploads, i.Key)
		return nil
	})
	if len(uploads) != 1 {
		t.Fatalf("uploads in the bucket: %q, want the one file", uploads)
	}
	for name, dir := range dirs {
		if left := filesUnder(t, dir); len(left) != 0 && name != "worker A" { // A was killed mid-write
			t.Fatalf("%s keeps files in its data dir: %q", name, left)
		}
	}
	// The error report downloads through a presigned link too.
	report := presignedGet(t, api, final.Links["error_report"])
	if got := readReport(t, report); len(got) != bad+1 {
		t.Fatalf("error report rows = %d, want %d", len(got), bad+1)
	}

	// An export runs on worker B; its result is downloaded through the presigned URL.
	exp := api.submitExport(aliceToken, map[string]any{"type": "customers"})
	done := api.waitStatus(aliceToken, exp.ID, time.Minute, "SUCCESS", "FAILED")
	if done.Status != "SUCCESS" || done.Result.Rows != int64(rows-bad) {
		t.Fatalf("export: %s %+v", done.Status, done.Result)
	}
	sheet := readSheet(t, presignedGet(t, api, done.Links["result"]))
	if len(sheet) != rows-bad+1 {
		t.Fatalf("downloaded sheet rows = %d, want %d", len(sheet), rows-bad+1)
	}
	// The attempt that succeeded wrote it (under load an earlier one may have ended on a
	// transient error, as above).
	resultKey := storage.ResultKey(exp.ID, done.Attempt, "", ".xlsx")
	if _, err := bucketStore.Stat(context.Background(), resultKey); err != nil {
		t.Fatalf("the result object %s: %v", resultKey, err)
	}
	// Its TTL runs out: the next cleanup round deletes the object and keeps the row (410).
	e.exec("UPDATE tasks SET result_expires_at = now() - interval '1 second' WHERE task_no = ?", exp.ID)
	testenv.Eventually(t, 30*time.Second, "cleanup to delete the expired result object", func() bool {
		_, err := bucketStore.Stat(context.Background(), resultKey)
		return err != nil && strings.Contains(err.Error(), "does not exist")
	})
	if res := api.do("GET", "/api/v1/tasks/"+exp.ID+"/result", aliceToken, nil); res.status != http.StatusGone {
		t.Fatalf("download after cleanup: %d %s, want 410", res.status, res.body)
	}
}

// presignedGet asks the API for a download without following redirects, checks it answers
// 302 to the S3 gateway, and fetches the presigned URL with a plain client (no token).
func presignedGet(t *testing.T, api *proc, link string) []byte {
	t.Helper()
	req, _ := http.NewRequest("GET", api.base+link, nil)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	noFollow := &http.Client{Transport: api.client.Transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	loc, _ := url.Parse(res.Header.Get("Location"))
	if res.StatusCode != http.StatusFound || loc == nil || !strings.Contains(loc.RawQuery, "X-Amz-Signature=") {
		t.Fatalf("GET %s: %d Location %q, want 302 to a presigned URL", link, res.StatusCode, res.Header.Get("Location"))
	}
	got, err := http.Get(loc.String())
	if err != nil {
		t.Fatal(err)
	}
	defer got.Body.Close()
	body, _ := io.ReadAll(got.Body)
	if got.StatusCode != http.StatusOK || !strings.Contains(got.Header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("presigned GET: %d (%s) %.200s", got.StatusCode, got.Header.Get("Content-Disposition"), body)
	}
	return body
}
