package store_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/storetest"
)

// BenchmarkHotPath is the Postgres side of one no-op task as the workers write it: created
// in batches of 250, claimed and ended in batches of 16, by 4 goroutines at a
// time (what a worker process's batchers do). It reports the time and WAL per task, so a
// change to the statements or the schema can be weighed without the rest of the pipeline:
//
//	go test -run '^$' -bench HotPath -benchtime 20000x ./store/
//
// HOTPATH_BATCH sets the rows per claim and end statement (default 16).
func BenchmarkHotPath(b *testing.B) {
	pg := storetest.NewPostgres(b)
	s := store.New(pg.DB)
	ctx := context.Background()
	const createBatch, workers = 250, 4
	batch := 16
	if v, _ := strconv.Atoi(os.Getenv("HOTPATH_BATCH")); v > 0 {
		batch = v
	}
	ids := make([]int64, 0, b.N)
	for len(ids) < b.N {
		n := min(createBatch, b.N-len(ids))
		nts := make([]store.NewTask, n)
		for i := range nts {
			nts[i] = store.NewTask{TaskNo: "tsk_" + rand.Text(), Type: "bench:noop", Owner: "bench", Queue: "bench",
				Priority: 5, MaxRetry: 3, TimeoutSeconds: 60, Params: json.RawMessage(`{}`)}
		}
		created, err := s.CreateMany(ctx, nts)
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range created {
			ids = append(ids, c.Task.ID)
		}
	}
	wal := func() int64 {
		var n int64
		if err := pg.DB.NewRaw("SELECT wal_bytes FROM pg_stat_wal").Scan(ctx, &n); err != nil {
			b.Fatal(err)
		}
		return n
	}
	wal0 := wal()
	b.ResetTimer()
	start := time.Now()
	var (
		wg             sync.WaitGroup
		next           = make(chan []int64)
		claimNs, endNs atomic.Int64
	)
	for range workers {
		wg.Go(func() {
			for chunk := range next {
				t0 := time.Now()
				res, err := s.ClaimTasks(ctx, chunk, "bench-worker", time.Minute)
				claimNs.Add(int64(time.Since(t0)))
				if err != nil {
					b.Error(err)
					return
				}
				endings := make([]store.Ending, 0, len(chunk))
				for _, id := range chunk {
					c := res[id].Claimed
					if c == nil {
						b.Errorf("task %d not claimed: %v", id, res[id].Err)
						return
					}
					endings = append(endings, store.FinishedEnding(c.Lease, store.Outcome{Status: store.StatusSuccess}))
				}
				t1 := time.Now()
				ended, err := s.EndAttempts(ctx, endings)
				endNs.Add(int64(time.Since(t1)))
				if err != nil || len(ended) != len(chunk) {
					b.Errorf("end: %d of %d ended, %v", len(ended), len(chunk), err)
					return
				}
			}
		})
	}
	for i := 0; i < len(ids); i += batch {
		next <- ids[i:min(i+batch, len(ids))]
	}
	close(next)
	wg.Wait()
	b.StopTimer()
	took := time.Since(start)
	b.ReportMetric(float64(took.Microseconds())/float64(b.N), "µs/task")
	b.ReportMetric(float64(wal()-wal0)/float64(b.N), "WALbytes/task")
	flushes := float64((b.N + batch - 1) / batch)
	b.ReportMetric(float64(claimNs.Load())/1e3/flushes, "µs/claim-flush")
	b.ReportMetric(float64(endNs.Load())/1e3/flushes, "µs/end-flush")
}
