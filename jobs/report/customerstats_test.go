package report

import (
	"slices"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/xlsxsafe/xlsxtest"
	"github.com/taskcenter/taskcenter/jobs/jobstest"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/storetest"
)

// Each sheet of the report declares the range of its cells: a reader that trusts the
// dimension (openpyxl read-only) sees every breakdown whole.
func TestCustomerStatsSheetsDeclareTheirRange(t *testing.T) {
	t.Parallel()
	w := jobstest.New(t, storage.Config{})

	// Four cities, three levels; two imports today.
	storetest.Exec(t, w.PG.DB, `INSERT INTO customers (code, name, phone, city, level)
		SELECT 'C' || i, 'n', '13800138000', (ARRAY['Shanghai','Beijing','Shenzhen','Hangzhou'])[1 + i % 4],
			(ARRAY['gold','silver','normal'])[1 + i % 3]
		FROM generate_series(1, 24) AS i`)
	for range 2 {
		w.Create(t, store.NewTask{Type: "import:customers", Owner: "alice", Queue: "imports", MaxRetry: 3, TimeoutSeconds: 600})
	}

	typ := CustomerStatsTaskType(w.PG.DB, w.Files, Config{ResultTTL: time.Hour})
	var res ResultData
	if done := w.RunExport(t, typ.Handler, "alice", CustomerStatsParams{Days: 30, Scope: store.Scope{Owner: "alice"}}, &res); res.File == "" {
		t.Fatalf("report without a file: %s", done.Result)
	}
	got := xlsxtest.SheetRanges(t, w.Path(res.File))
	// By city, by level, imports by day: a header each, then a row per city, level and day.
	want := []string{"A1:B4=A1:B4", "A1:B5=A1:B5", "A1:E2=A1:E2"}
	if !slices.Equal(got, want) {
		t.Fatalf("sheets declared=used %q, want %q", got, want)
	}
}
