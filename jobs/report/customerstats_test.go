package report

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/internal/xlsxsafe/xlsxtest"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/store"
)

// Each sheet of the report declares the range of its cells: a reader that trusts the
// dimension (openpyxl read-only) sees every breakdown whole.
func TestCustomerStatsSheetsDeclareTheirRange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := testenv.NewPostgres(t)
	rd := testenv.NewRedis(t)
	root := t.TempDir()
	fs, err := storage.New(t.Context(), storage.Config{}, root)
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(pg.DB)

	// Four cities, three levels; two imports today.
	if _, err := pg.DB.ExecContext(ctx, `INSERT INTO customers (code, name, phone, city, level)
		SELECT 'C' || i, 'n', '13800138000', (ARRAY['Shanghai','Beijing','Shenzhen','Hangzhou'])[1 + i % 4],
			(ARRAY['gold','silver','normal'])[1 + i % 3]
		FROM generate_series(1, 24) AS i`); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, _, err := st.Create(ctx, store.NewTask{TaskNo: "tsk_" + rand.Text(), Type: "import:customers", Owner: "alice",
			Queue: "imports", MaxRetry: 3, TimeoutSeconds: 600}); err != nil {
			t.Fatal(err)
		}
	}

	typ := CustomerStatsTaskType(pg.DB, fs, Config{ResultTTL: time.Hour})
	client := asynq.NewClientFromRedisClient(rd.Client)
	rt := jobs.NewRuntime(jobs.RuntimeConfig{WorkerID: "test", HeartbeatInterval: time.Hour, TakeoverAfter: time.Hour,
		ProgressInterval: time.Millisecond, Types: map[string]jobs.TypePolicy{CustomerStatsType: {MaxRetry: 1, RetryBase: time.Second, MaxRuntime: time.Minute}}},
		jobs.RuntimeDeps{Store: st, Enqueuer: jobs.NewEnqueuer(client, asynq.NewInspectorFromRedisClient(rd.Client), nil),
			Board: jobs.NewProgressBoard(rd.Client), Files: fs, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	rt.Register(typ.Handler)
	t.Cleanup(rt.Close)

	params, _ := json.Marshal(CustomerStatsParams{Days: 30, Scope: store.Scope{Owner: "alice"}})
	task, _, err := st.Create(ctx, store.NewTask{TaskNo: "tsk_" + rand.Text(), Type: CustomerStatsType, Owner: "alice",
		Queue: "exports", MaxRetry: 1, TimeoutSeconds: 600, Params: params})
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(map[string]any{"task_id": task.ID, "task_no": task.TaskNo, "attempt": task.Attempt})
	rt.ProcessTask(ctx, asynq.NewTask(CustomerStatsType, payload)) //nolint:errcheck // the row says how it ended
	done, err := st.GetByID(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	var res ResultData
	if err := json.Unmarshal(done.Result, &res); err != nil || done.Status != store.StatusSuccess || res.File == "" {
		t.Fatalf("report %s: %s (%v)", done.Status, done.Result, err)
	}
	got := xlsxtest.SheetRanges(t, filepath.Join(root, filepath.FromSlash(res.File)))
	// By city, by level, imports by day: a header each, then a row per city, level and day.
	want := []string{"A1:B4=A1:B4", "A1:B5=A1:B5", "A1:E2=A1:E2"}
	if !slices.Equal(got, want) {
		t.Fatalf("sheets declared=used %q, want %q", got, want)
	}
}
