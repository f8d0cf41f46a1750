package export

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

// An export read in several pages declares the range of every row it wrote: a reader that
// trusts the dimension (openpyxl read-only) sees the whole export, not its first cell.
func TestExportDeclaresItsRange(t *testing.T) {
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
	const customers = 2_500
	if _, err := pg.DB.ExecContext(ctx, `INSERT INTO customers (code, name, phone, email, city, level)
		SELECT 'C' || i, 'name ' || i, '13800138000', 'c' || i || '@example.com', 'Shanghai', 'gold'
		FROM generate_series(1, ?) AS i`, customers); err != nil {
		t.Fatal(err)
	}

	client := asynq.NewClientFromRedisClient(rd.Client)
	rt := jobs.NewRuntime(jobs.RuntimeConfig{WorkerID: "test", HeartbeatInterval: time.Hour, TakeoverAfter: time.Hour,
		ProgressInterval: time.Millisecond, Types: map[string]jobs.TypePolicy{CustomersType: {MaxRetry: 1, RetryBase: time.Second, MaxRuntime: time.Minute}}},
		jobs.RuntimeDeps{Store: st, Enqueuer: jobs.NewEnqueuer(client, asynq.NewInspectorFromRedisClient(rd.Client), nil),
			Board: jobs.NewProgressBoard(rd.Client), Files: fs, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	rt.Register(NewCustomers(pg.DB, fs, Config{PageSize: 1000, ResultTTL: time.Hour, MaxRows: 10_000}))
	t.Cleanup(rt.Close)

	params, _ := json.Marshal(CustomerParams{})
	task, _, err := st.Create(ctx, store.NewTask{TaskNo: "tsk_" + rand.Text(), Type: CustomersType, Owner: "alice",
		Queue: "exports", MaxRetry: 1, TimeoutSeconds: 600, Params: params})
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(map[string]any{"task_id": task.ID, "task_no": task.TaskNo, "attempt": task.Attempt})
	rt.ProcessTask(ctx, asynq.NewTask(CustomersType, payload)) //nolint:errcheck // the row says how it ended
	done, err := st.GetByID(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	var res ResultData
	if err := json.Unmarshal(done.Result, &res); err != nil || done.Status != store.StatusSuccess || res.Rows != customers {
		t.Fatalf("export %s: %s (%v)", done.Status, done.Result, err)
	}
	// Eight columns; the header and a row per customer.
	if got, want := xlsxtest.SheetRanges(t, filepath.Join(root, filepath.FromSlash(res.File))), []string{"A1:H2501=A1:H2501"}; !slices.Equal(got, want) {
		t.Fatalf("declared=used %q, want %q", got, want)
	}
}
