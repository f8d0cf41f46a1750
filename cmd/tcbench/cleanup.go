package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/cleanup"
	"github.com/taskcenter/taskcenter/store"
)

// benchCleanup: one cleanup round over a tasks table of n rows shaped like a busy month
// (mostly finished tasks spread over 60 days, some waiting, running, silent and expired),
// with Postgres' plan for each step's query.
func benchCleanup(ctx context.Context, b *bench, n int) (Figure, error) {
	fmt.Fprintf(b.stdout, "seeding %d tasks…\n", n)
	if _, err := b.db.ExecContext(ctx, "TRUNCATE tasks CASCADE"); err != nil {
		return Figure{}, err
	}
	// g % 1000: 0-939 SUCCESS, 940-969 FAILED, 970-979 CANCELLED, 980-989 PENDING,
	// 990-994 RETRY_WAIT, 995-999 RUNNING (one in ten thousand silent for an hour, one in
	// a hundred thousand for two: past its 30-minute timeout).
	if _, err := b.db.ExecContext(ctx, `
		INSERT INTO tasks (task_no, type, owner, queue, status, params, max_retry, timeout_seconds, attempt,
		                   created_at, started_at, finished_at, heartbeat_at, enqueued_at, next_retry_at, worker,
		                   result, result_expires_at, updated_at)
		SELECT 'tsk_bench' || g,
		       (ARRAY['export:customers', 'export:tasks', 'import:customers'])[1 + g % 3],
		       'user' || (g % 500), (ARRAY['exports', 'exports', 'imports'])[1 + g % 3], s.status,
		       CASE WHEN g % 3 = 2 THEN jsonb_build_object('upload', 'uploads/' || md5(g::text) || '.xlsx') ELSE '{}'::jsonb END,
		       3, 1800, CASE WHEN s.status = 'PENDING' THEN 0 ELSE 1 END,
		       t.at, t.at, CASE WHEN s.terminal THEN t.at + interval '2 minutes' END,
		       CASE WHEN s.status = 'RUNNING' THEN now() - CASE WHEN g % 100000 = 99999 THEN interval '2 hours'
		                                                       WHEN g % 10000 = 9999 THEN interval '1 hour'
		                                                       ELSE interval '1 second' END END,
		       now() - interval '10 seconds',
		       CASE WHEN s.status = 'RETRY_WAIT' THEN now() + interval '5 minutes' END,
		       CASE WHEN s.status <> 'PENDING' THEN 'w1' END,
		       CASE WHEN s.status = 'SUCCESS' AND g % 3 < 2 THEN jsonb_build_object('file', 'results/' || g || '.xlsx', 'rows', 10) END,
		       CASE WHEN s.status = 'SUCCESS' AND g % 3 < 2 THEN t.at + interval '7 days' END,
		       t.at
		FROM generate_series(1, ?) g,
		LATERAL (SELECT now() - (g % 60) * interval '1 day' - (g % 86400) * interval '1 second' AS at) t,
		LATERAL (SELECT CASE WHEN g % 1000 < 940 THEN 'SUCCESS' WHEN g % 1000 < 970 THEN 'FAILED'
		                     WHEN g % 1000 < 980 THEN 'CANCELLED' WHEN g % 1000 < 990 THEN 'PENDING'
		                     WHEN g % 1000 < 995 THEN 'RETRY_WAIT' ELSE 'RUNNING' END AS status,
		                g % 1000 < 980 AS terminal) s`, n); err != nil {
		return Figure{}, err
	}
	if _, err := b.db.ExecContext(ctx, `INSERT INTO task_runs (task_id, attempt, trigger, worker, status, started_at, finished_at)
		SELECT id, 1, 'first', 'w1', status, started_at, finished_at FROM tasks WHERE attempt > 0`); err != nil {
		return Figure{}, err
	}
	if _, err := b.db.ExecContext(ctx, "VACUUM ANALYZE"); err != nil {
		return Figure{}, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: b.redisAddr, DB: b.redisDB})
	defer rdb.Close()
	fs, err := storage.New(ctx, storage.Config{}, b.dataDir)
	if err != nil {
		return Figure{}, err
	}
	st := store.New(b.db)
	def := config.Default() // the round as shipped
	cfg := cleanup.Config{OrphanGrace: def.Cleanup.OrphanGrace, TakeoverAfter: def.Worker.TakeoverAfter, BatchSize: def.Cleanup.BatchSize,
		UploadTTL: def.Cleanup.UploadTTL, TempTTL: def.Cleanup.TempTTL, Retention: def.Cleanup.Retention,
		BacklogThreshold: def.Alerts.BacklogThreshold, BacklogFor: def.Alerts.BacklogFor, Queues: []string{"exports", "imports", "maintenance"}}
	c := cleanup.New(cfg, "tcbench", cleanup.Deps{Store: st, Files: fs,
		Enqueuer: jobs.NewEnqueuer(asynq.NewClientFromRedisClient(rdb), asynq.NewInspectorFromRedisClient(rdb), nil),
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil))})

	var rounds []time.Duration
	var first cleanup.Report
	for i := range 5 {
		start := time.Now()
		rep := c.Round(ctx)
		rounds = append(rounds, time.Since(start))
		if i == 0 {
			first = rep
		}
		if rep.Errors > 0 {
			return Figure{}, fmt.Errorf("cleanup round had %d failing steps", rep.Errors)
		}
	}
	plans, err := st.CleanupPlans(ctx, cfg.OrphanGrace, cfg.TakeoverAfter, cfg.Retention, cfg.BatchSize)
	if err != nil {
		return Figure{}, err
	}
	var seq []string
	for _, step := range slices.Sorted(maps.Keys(plans)) {
		plan := plans[step]
		fmt.Fprintf(b.stdout, "-- plan of %s:\n%s\n", step, plan)
		if strings.Contains(plan, "Seq Scan on tasks") {
			seq = append(seq, step)
		}
	}
	sorted := slices.Clone(rounds)
	slices.Sort(sorted)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	note := fmt.Sprintf("rounds %v; first round: %d orphans enqueued, %d timed out, %d results expired, %d tasks deleted, step ms %v; index scans for every step",
		rounds, first.Orphans, first.TimedOut, first.ResultsExpired, first.RetentionPurged, first.TookMS)
	if len(seq) > 0 {
		note = fmt.Sprintf("sequential scan of tasks in: %s", strings.Join(seq, ", "))
	}
	return Figure{
		Name:    fmt.Sprintf("cleanup round, %d tasks", n),
		Measure: map[string]float64{"ms": ms(rounds[0]), "median_ms": ms(sorted[len(sorted)/2])},
		Target:  "≤ 100 ms, index scans for each step",
		Met:     rounds[0] <= 100*time.Millisecond && len(seq) == 0,
		Note:    note,
	}, nil
}
