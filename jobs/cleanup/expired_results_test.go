package cleanup_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/store"
)

func TestRoundExpiresResultFilesAndKeepsTheRecord(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100)
	ctx := context.Background()
	old, oldFile := f.succeeded(mustDuration("-1s"))
	live, liveFile := f.succeeded(time.Hour)
	if rep := f.cleaner.Round(ctx); rep.ResultsExpired != 1 {
		t.Fatalf("report = %+v", rep)
	}
	if exists(oldFile) || !exists(liveFile) {
		t.Fatalf("expired file exists=%v, live file exists=%v", exists(oldFile), exists(liveFile))
	}
	got := f.Get(old.ID)
	var res map[string]any
	json.Unmarshal(got.Result, &res)
	if got.Status != store.StatusSuccess || res["file"] != nil || res["rows"] != 7.0 || res["expired"] != true {
		t.Fatalf("expired task = %s %s", got.Status, got.Result)
	}
	if f.Get(live.ID).Result == nil {
		t.Fatal("the live result was touched")
	}
	if rep := f.cleaner.Round(ctx); rep.ResultsExpired != 0 {
		t.Fatalf("an expired result was processed twice: %+v", rep)
	}
}

// An import's error report expires like an export's result: the file is deleted after its
// TTL and the row keeps the summary, marked expired (the API answers 410).
func TestRoundExpiresImportErrorReports(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100)
	ctx := context.Background()
	tk, lease := f.running("w")
	rel := storage.Results + "/" + tk.TaskNo + "-a1-errors.xlsx"
	p := f.file(rel, 0)
	exp := time.Now().Add(-time.Second)
	if _, err := f.S.EndFinished(ctx, lease, store.Outcome{Status: store.StatusPartialSuccess, ResultExpiresAt: &exp,
		Result: json.RawMessage(`{"error_report":"` + rel + `","summary":{"total":3,"success":2,"failed":1}}`)}); err != nil {
		t.Fatal(err)
	}
	if rep := f.cleaner.Round(ctx); rep.ResultsExpired != 1 {
		t.Fatalf("report = %+v, want the error report expired", rep)
	}
	if exists(p) {
		t.Fatal("the expired error report is still on disk")
	}
	var res map[string]any
	json.Unmarshal(f.Get(tk.ID).Result, &res) //nolint:errcheck
	if res["error_report"] != nil || res["expired"] != true || res["summary"] == nil {
		t.Fatalf("result after expiry = %v", res)
	}
}

func mustDuration(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}
