package export

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/xlsxsafe/xlsxtest"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/jobstest"
	"github.com/taskcenter/taskcenter/store"
)

// An export read in several pages declares the range of every row it wrote: a reader that
// trusts the dimension (openpyxl read-only) sees the whole export, not its first cell.
func TestExportDeclaresItsRange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := jobstest.New(t, storage.Config{})
	const customers = 2_500
	if _, err := w.PG.DB.ExecContext(ctx, `INSERT INTO customers (code, name, phone, email, city, level)
		SELECT 'C' || i, 'name ' || i, '13800138000', 'c' || i || '@example.com', 'Shanghai', 'gold'
		FROM generate_series(1, ?) AS i`, customers); err != nil {
		t.Fatal(err)
	}

	rt := w.Runtime(NewCustomers(w.PG.DB, w.Files, Config{PageSize: 1000, ResultTTL: time.Hour, MaxRows: 10_000}),
		jobs.TypePolicy{MaxRetry: 1, RetryBase: time.Second, MaxRuntime: time.Minute})

	params, _ := json.Marshal(CustomerParams{})
	task, _, err := w.Store.Create(ctx, store.NewTask{TaskNo: "tsk_" + rand.Text(), Type: CustomersType, Owner: "alice",
		Queue: "exports", MaxRetry: 1, TimeoutSeconds: 600, Params: params})
	if err != nil {
		t.Fatal(err)
	}
	done := w.Deliver(rt, task)
	var res ResultData
	if err := json.Unmarshal(done.Result, &res); err != nil || done.Status != store.StatusSuccess || res.Rows != customers {
		t.Fatalf("export %s: %s (%v)", done.Status, done.Result, err)
	}
	// Eight columns; the header and a row per customer.
	if got, want := xlsxtest.SheetRanges(t, filepath.Join(w.Root, filepath.FromSlash(res.File))), []string{"A1:H2501=A1:H2501"}; !slices.Equal(got, want) {
		t.Fatalf("declared=used %q, want %q", got, want)
	}
}
