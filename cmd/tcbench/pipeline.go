package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// benchClient is an HTTP client for many concurrent keep-alive requests.
func benchClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}}
}

// post sends a JSON POST with the bench token and returns the status.
func post(c *http.Client, url string, body []byte) (int, error) {
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+benchToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, res.Body) //nolint:errcheck
	res.Body.Close()
	return res.StatusCode, nil
}

// benchSubmit: 32 concurrent clients submit exports over HTTP for a fixed time against an
// API-only process (no workers), and report throughput and latency. The queue's backlog limit
// and the owner's waiting cap are on, set above what the run reaches, so both checks are in
// the path without refusing anything.
func benchSubmit(ctx context.Context, b *bench) (Figure, error) {
	const clients, duration = 32, 10 * time.Second
	if _, err := b.db.ExecContext(ctx, "TRUNCATE tasks CASCADE"); err != nil {
		return Figure{}, err
	}
	svc, err := b.startRoles("api", "TASKCENTER_QUEUES_EXPORTS_BACKLOG_LIMIT=10000000",
		"TASKCENTER_QUEUES_EXPORTS_MAX_WAITING_PER_OWNER=10000000")
	if err != nil {
		return Figure{}, err
	}
	defer svc.stop() //nolint:errcheck
	client := benchClient()
	body := []byte(`{"type":"customers"}`)
	// Warm up connections and caches.
	for range clients {
		post(client, svc.base+"/api/v1/exports", body) //nolint:errcheck
	}
	var (
		mu        sync.Mutex
		latencies []time.Duration
		failures  atomic.Int64
		wg        sync.WaitGroup
	)
	deadline := time.Now().Add(duration)
	b.profile(svc, "submit", duration)
	cpu0 := sampleCPU(svc.cmd.Process.Pid)
	start := time.Now()
	for range clients {
		wg.Go(func() {
			var mine []time.Duration
			for time.Now().Before(deadline) {
				t0 := time.Now()
				code, err := post(client, svc.base+"/api/v1/exports", body)
				if err != nil || code != http.StatusAccepted {
					failures.Add(1)
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	took := time.Since(start)
	cpu := sampleCPU(svc.cmd.Process.Pid).since(cpu0, len(latencies))
	if f := failures.Load(); f > 0 {
		return Figure{}, fmt.Errorf("%d submits failed", f)
	}
	slices.Sort(latencies)
	pct := func(p float64) float64 { return latencies[int(float64(len(latencies)-1)*p)].Seconds() * 1000 }
	rate := float64(len(latencies)) / took.Seconds()
	p99 := pct(0.99)
	return Figure{
		Name: fmt.Sprintf("submit (%d clients, %s)", clients, duration),
		Measure: map[string]float64{"per_second": rate, "p50_ms": pct(0.5), "p90_ms": pct(0.9), "p99_ms": p99, "max_ms": pct(1),
			"cpu_ms_per_submit_taskcenter": cpu.taskcenter, "cpu_ms_per_submit_postgres": cpu.postgres, "cpu_ms_per_submit_redis": cpu.redis},
		Target: "p99 ≤ 20 ms and ≥ 2,000 submits/s",
		Met:    p99 <= 20 && rate >= 2000,
		Note: fmt.Sprintf("%d submits, each a committed task row and an asynq job; CPU per submit: taskcenter %.2f ms, Postgres %.2f ms, Redis %.2f ms",
			len(latencies), cpu.taskcenter, cpu.postgres, cpu.redis),
	}, nil
}

// benchPipeline measures the no-op pipeline beside bare asynq in the same run:
//   - bare asynq as its users run it: a client enqueues n no-op jobs from 16 goroutines, then a
//     server with concurrency 32 drains them on the same Redis; its processed rate;
//   - taskcenter end to end, HTTP submit → SUCCESS, with single submits (32 clients) and with
//     batch submits (POST /api/v1/tasks:batch, 500 per request, 8 clients);
//   - taskcenter's workers alone, draining n tasks submitted beforehand;
//
// with the CPU each spends per task (taskcenter, Postgres and Redis processes, from /proc) and
// the share of HOT updates on the tasks table.
func benchPipeline(ctx context.Context, b *bench, n int) (Figure, error) {
	const concurrency = 32
	// drainChild runs asynq's own drain in a child process: bare (floor ""), or with a lease
	// floor in its handler (leasefloor.go): lean, the least Postgres any fenced lease
	// needs; model, the least statements on taskcenter's own tables.
	drainChild := func(floor string) (map[string]float64, error) {
		if err := b.flushRedis(); err != nil {
			return nil, err
		}
		args := []string{"-n", fmt.Sprint(n), "-concurrency", fmt.Sprint(concurrency), "-redis", b.redisAddr, "-db", fmt.Sprint(b.redisDB)}
		if floor != "" {
			args = append(args, "-pg", b.schemaURL, "-floor", floor)
		}
		out, _, err := b.child("raw-asynq", args...)
		return out, err
	}
	// The references run before and after taskcenter's runs: on a shared host the ceiling
	// drifts within minutes, so each reference is the mean of its two, and a drift of bare
	// asynq over 25 % is reported (the ratios of such a run say little).
	kinds := []string{"", floorLean, floorModel}
	references := func() ([]map[string]float64, error) {
		out := make([]map[string]float64, len(kinds))
		for i, k := range kinds {
			m, err := drainChild(k)
			if err != nil {
				return nil, err
			}
			out[i] = m
		}
		return out, nil
	}
	before, err := references()
	if err != nil {
		return Figure{}, err
	}
	raw := before[0]
	env := []string{"TASKCENTER_TYPES_BENCH_NOOP_DISABLED=false", fmt.Sprintf("TASKCENTER_QUEUES_BENCH_CONCURRENCY=%d", concurrency)}
	single, err := b.endToEnd(ctx, n, env, false)
	if err != nil {
		return Figure{}, err
	}
	batch, err := b.endToEnd(ctx, n, env, true)
	if err != nil {
		return Figure{}, err
	}
	drain, err := b.drainRate(ctx, n, env)
	if err != nil {
		return Figure{}, err
	}
	afterRefs, err := references()
	if err != nil {
		return Figure{}, err
	}
	after := afterRefs[0]
	mean := func(i int) map[string]float64 {
		m := make(map[string]float64, len(before[i]))
		for k, v := range before[i] {
			m[k] = (v + afterRefs[i][k]) / 2
		}
		return m
	}
	floor, model := mean(1), mean(2)
	bareBefore, bareAfter := raw["processed_per_second"], after["processed_per_second"]
	bare := (bareBefore + bareAfter) / 2
	drift := math.Abs(bareBefore-bareAfter) / min(bareBefore, bareAfter)
	steadiness := fmt.Sprintf("bare asynq %.0f/s before and %.0f/s after taskcenter's runs", bareBefore, bareAfter)
	if drift > 0.25 {
		steadiness += fmt.Sprintf(" — the host drifted %.0f %% during the run: its ratios are unreliable, run again", 100*drift)
	}
	measure := map[string]float64{
		"single_per_second": single.rate, "batch_per_second": batch.rate, "workers_per_second": drain.rate,
		"single_ratio": single.rate / bare, "batch_ratio": batch.rate / bare, "workers_ratio": drain.rate / bare,
		"cpu_ms_per_task_taskcenter": batch.cpu.taskcenter, "cpu_ms_per_task_postgres": batch.cpu.postgres,
		"cpu_ms_per_task_redis": batch.cpu.redis, "hot_update_share": batch.hot,
		"workers_cpu_ms_per_task_taskcenter": drain.cpu.taskcenter, "workers_cpu_ms_per_task_postgres": drain.cpu.postgres,
		"workers_cpu_ms_per_task_redis": drain.cpu.redis,
	}
	for i, name := range map[int]string{1: "lease_floor", 2: "model_floor"} {
		m := mean(i)
		measure[name+"_per_second"] = m["processed_per_second"]
		measure[name+"_ratio"] = m["processed_per_second"] / bare
		measure[name+"_per_second_before"] = before[i]["processed_per_second"]
		measure[name+"_per_second_after"] = afterRefs[i]["processed_per_second"]
		for _, part := range []string{"process", "postgres", "redis"} {
			measure[name+"_cpu_ms_per_task_"+part] = m["cpu_ms_per_task_"+part]
		}
	}
	met := batch.rate >= 0.5*bare && single.rate >= 0.3*bare && drain.rate >= 0.6*bare
	return Figure{
		Name:    fmt.Sprintf("pipeline %d no-op tasks", n),
		Measure: measure,
		Baseline: map[string]float64{"processed_per_second": bare, "processed_per_second_before": bareBefore,
			"processed_per_second_after": bareAfter, "enqueue_per_second": raw["enqueue_per_second"],
			"drain_cpu_ms_per_task_process": raw["cpu_ms_per_task_process"], "drain_cpu_ms_per_task_redis": raw["cpu_ms_per_task_redis"]},
		Ratio:  batch.rate / bare,
		Target: "batch ≥ 0.5×, single ≥ 0.3×, workers alone ≥ 0.6× bare asynq",
		Met:    met,
		Note: fmt.Sprintf("single %.0f/s (%.2f×), batch %.0f/s (%.2f×), workers %.0f/s (%.2f×) vs bare asynq %.0f/s (%s); CPU per task (batch run): "+
			"taskcenter %.2f ms, Postgres %.2f ms, Redis %.2f ms; CPU per task (workers alone): taskcenter %.2f ms, Postgres %.2f ms, "+
			"Redis %.2f ms; bare asynq's drain: its process %.2f ms, Redis %.2f ms; HOT %.0f%% of task updates; "+
			"lease floor (bare asynq whose jobs claim and end a 6-column row in grouped fenced updates; mean of before and after) %.0f/s (%.2f×), "+
			"CPU per task: its process %.2f ms, Postgres %.2f ms, Redis %.2f ms; model floor (the same on taskcenter's own tables: "+
			"the wide task row with its indexes, a run row and an outbox event per transition) %.0f/s (%.2f×), CPU per task: "+
			"its process %.2f ms, Postgres %.2f ms, Redis %.2f ms",
			single.rate, single.rate/bare, batch.rate, batch.rate/bare, drain.rate, drain.rate/bare, bare, steadiness,
			batch.cpu.taskcenter, batch.cpu.postgres, batch.cpu.redis, drain.cpu.taskcenter, drain.cpu.postgres, drain.cpu.redis,
			raw["cpu_ms_per_task_process"], raw["cpu_ms_per_task_redis"], 100*batch.hot,
			floor["processed_per_second"], floor["processed_per_second"]/bare, floor["cpu_ms_per_task_process"],
			floor["cpu_ms_per_task_postgres"], floor["cpu_ms_per_task_redis"],
			model["processed_per_second"], model["processed_per_second"]/bare, model["cpu_ms_per_task_process"],
			model["cpu_ms_per_task_postgres"], model["cpu_ms_per_task_redis"]),
	}, nil
}

// pipelineRun is one measured pipeline run.
type pipelineRun struct {
	rate float64
	cpu  cpuPerTask
	hot  float64 // n_tup_hot_upd / n_tup_upd on tasks during the run
}

// endToEnd submits n no-op tasks over HTTP and times the first submit to the last SUCCESS.
func (b *bench) endToEnd(ctx context.Context, n int, env []string, batched bool) (pipelineRun, error) {
	if err := b.emptyQueueAnd(ctx, "tasks"); err != nil {
		return pipelineRun{}, err
	}
	svc, err := b.startService(env...)
	if err != nil {
		return pipelineRun{}, err
	}
	defer svc.stop() //nolint:errcheck
	client := benchClient()
	updBefore, hotBefore := b.taskUpdates(ctx)
	cpu0 := sampleCPU(svc.cmd.Process.Pid)
	name := "pipeline-single"
	if batched {
		name = "pipeline-batch"
	}
	b.profile(svc, name, 5*time.Second)
	start := time.Now()
	if err := submitNoops(client, svc.base, n, batched); err != nil {
		return pipelineRun{}, err
	}
	last, err := b.waitDone(ctx, n, start)
	if err != nil {
		return pipelineRun{}, err
	}
	took := last.Sub(start)
	cpu := sampleCPU(svc.cmd.Process.Pid).since(cpu0, n)
	svc.stop() //nolint:errcheck // its Postgres backends flush their table statistics as they exit
	return pipelineRun{rate: float64(n) / took.Seconds(), cpu: cpu, hot: b.hotShareSince(ctx, updBefore, hotBefore)}, nil
}

// submitNoops submits n bench:noop tasks: one per request from 32 clients, or 500 per batch
// request from 8 clients.
func submitNoops(client *http.Client, base string, n int, batched bool) error {
	var (
		next     atomic.Int64
		failures atomic.Int64
		wg       sync.WaitGroup
	)
	if !batched {
		body := []byte(`{"type":"bench:noop"}`)
		for range 32 {
			wg.Go(func() {
				for next.Add(1) <= int64(n) {
					if code, err := post(client, base+"/api/v1/tasks", body); err != nil || code != http.StatusAccepted {
						failures.Add(1)
					}
				}
			})
		}
	} else {
		const per = 500
		items := make([]map[string]any, per)
		for i := range items {
			items[i] = map[string]any{"type": "bench:noop"}
		}
		full, _ := json.Marshal(map[string]any{"tasks": items})
		for range 8 {
			wg.Go(func() {
				for {
					end := next.Add(per)
					begin := end - per
					if begin >= int64(n) {
						return
					}
					body := full
					if end > int64(n) {
						part, _ := json.Marshal(map[string]any{"tasks": items[:int64(n)-begin]})
						body = part
					}
					if code, err := post(client, base+"/api/v1/tasks:batch", body); err != nil || code != http.StatusOK {
						failures.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	if f := failures.Load(); f > 0 {
		return fmt.Errorf("%d submits failed", f)
	}
	return nil
}

// waitDone waits until n tasks are SUCCESS and returns when the last of them finished (its
// finished_at). The count is polled only every 200 ms, so the watching costs Postgres little
// (every 20 ms it took a quarter of a core, on the measured system's two): the end time comes
// from the rows, not from when the poll noticed.
func (b *bench) waitDone(ctx context.Context, n int, start time.Time) (time.Time, error) {
	for {
		var done int
		if err := b.db.NewRaw("SELECT count(*) FROM tasks WHERE status = 'SUCCESS'").Scan(ctx, &done); err != nil {
			return time.Time{}, err
		}
		if done >= n {
			var last time.Time
			err := b.db.NewRaw("SELECT max(finished_at) FROM tasks WHERE status = 'SUCCESS'").Scan(ctx, &last)
			return last, err
		}
		if time.Since(start) > 10*time.Minute {
			return time.Time{}, fmt.Errorf("only %d of %d tasks finished", done, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// hotShareSince is the share of the tasks table's updates since the counters were upd0 and
// hot0 that were HOT. Call it after the service stopped: a backend's statistics reach
// pg_stat_user_tables when it exits (or up to 10 s after it goes idle).
func (b *bench) hotShareSince(ctx context.Context, upd0, hot0 int64) float64 {
	for range 20 { // the exiting backends' flush is asynchronous to our connection
		if upd, _ := b.taskUpdates(ctx); upd > upd0 {
			time.Sleep(200 * time.Millisecond)
			if u2, h2 := b.taskUpdates(ctx); u2 == upd {
				return float64(h2-hot0) / float64(u2-upd0)
			}
			continue
		}
		time.Sleep(100 * time.Millisecond)
	}
	return 0
}

// taskUpdates reads the tasks table's update counters (all, and HOT).
func (b *bench) taskUpdates(ctx context.Context) (upd, hot int64) {
	b.db.ExecContext(ctx, "SELECT pg_stat_force_next_flush()")                                                                             //nolint:errcheck
	b.db.QueryRowContext(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relid = 'tasks'::regclass`).Scan(&upd, &hot) //nolint:errcheck
	return upd, hot
}

// cpuSample is the CPU time, in clock ticks, the measured processes have used.
type cpuSample struct{ taskcenter, postgres, redis int64 }

// cpuPerTask is CPU milliseconds per task, per process kind.
type cpuPerTask struct{ taskcenter, postgres, redis float64 }

// sampleCPU reads utime+stime of the taskcenter process and of every postgres and
// redis-server process on the machine (other load on the machine is counted too).
func sampleCPU(pid int) cpuSample {
	s := cpuSample{taskcenter: procCPU(pid)}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p))
		switch strings.TrimSpace(string(comm)) {
		case "postgres":
			s.postgres += procCPU(p)
		case "redis-server":
			s.redis += procCPU(p)
		}
	}
	return s
}

func (s cpuSample) since(before cpuSample, tasks int) cpuPerTask {
	const tick = 10.0 // ms per clock tick (USER_HZ 100)
	per := func(a, b int64) float64 { return float64(a-b) * tick / float64(tasks) }
	return cpuPerTask{taskcenter: per(s.taskcenter, before.taskcenter), postgres: per(s.postgres, before.postgres), redis: per(s.redis, before.redis)}
}

// procCPU is a process's utime+stime in clock ticks (0 when it is gone).
func procCPU(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command (which may hold spaces) start after the last ')'.
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return ut + st
}

// drainRate submits n no-op tasks (in batches) to an API-only process, then starts a
// worker-only process and measures how fast it drains them: the worker side alone.
func (b *bench) drainRate(ctx context.Context, n int, env []string) (pipelineRun, error) {
	if err := b.emptyQueueAnd(ctx, "tasks"); err != nil {
		return pipelineRun{}, err
	}
	api, err := b.startRoles("api", env...)
	if err != nil {
		return pipelineRun{}, err
	}
	if err := submitNoops(benchClient(), api.base, n, true); err != nil {
		return pipelineRun{}, err
	}
	api.stop() //nolint:errcheck
	worker, err := b.startRoles("all", env...)
	if err != nil {
		return pipelineRun{}, err
	}
	defer worker.stop() //nolint:errcheck
	b.profile(worker, "drain", 4*time.Second)
	cpu0 := sampleCPU(worker.cmd.Process.Pid)
	start := time.Now()
	last, err := b.waitDone(ctx, n, start)
	if err != nil {
		return pipelineRun{}, err
	}
	return pipelineRun{rate: float64(n) / last.Sub(start).Seconds(), cpu: sampleCPU(worker.cmd.Process.Pid).since(cpu0, n)}, nil
}
