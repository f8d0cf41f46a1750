package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
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
// API-only process (no workers, no backlog limit), and report throughput and latency.
func benchSubmit(ctx context.Context, b *bench) (Figure, error) {
	const clients, duration = 32, 10 * time.Second
	if _, err := b.db.ExecContext(ctx, "TRUNCATE tasks CASCADE"); err != nil {
		return Figure{}, err
	}
	svc, err := b.startRoles("api", "TASKCENTER_QUEUES_EXPORTS_BACKLOG_LIMIT=0")
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
	if f := failures.Load(); f > 0 {
		return Figure{}, fmt.Errorf("%d submits failed", f)
	}
	slices.Sort(latencies)
	pct := func(p float64) float64 { return latencies[int(float64(len(latencies)-1)*p)].Seconds() * 1000 }
	rate := float64(len(latencies)) / took.Seconds()
	p99 := pct(0.99)
	return Figure{
		Name:    fmt.Sprintf("submit (%d clients, %s)", clients, duration),
		Measure: map[string]float64{"per_second": rate, "p50_ms": pct(0.5), "p99_ms": p99},
		Target:  "p99 ≤ 20 ms and ≥ 2,000 submits/s",
		Met:     p99 <= 20 && rate >= 2000,
		Note:    fmt.Sprintf("%d submits, each a committed task row and an asynq job", len(latencies)),
	}, nil
}

// benchPipeline: M no-op tasks submitted over HTTP by 32 clients, timed from the first
// submit until every task is SUCCESS, beside bare asynq enqueueing and processing M no-op
// jobs with the same concurrency in its own process.
func benchPipeline(n int) func(ctx context.Context, b *bench) (Figure, error) {
	return func(ctx context.Context, b *bench) (Figure, error) {
		const clients, concurrency = 32, 32
		raw, _, err := b.child("raw-asynq", "-n", fmt.Sprint(n), "-concurrency", fmt.Sprint(concurrency),
			"-redis", b.redisAddr, "-db", fmt.Sprint(b.redisDB))
		if err != nil {
			return Figure{}, err
		}
		if err := b.flushRedis(); err != nil {
			return Figure{}, err
		}
		if _, err := b.db.ExecContext(ctx, "TRUNCATE tasks CASCADE"); err != nil {
			return Figure{}, err
		}
		svc, err := b.startService("TASKCENTER_TYPES_BENCH_NOOP_DISABLED=false",
			fmt.Sprintf("TASKCENTER_QUEUES_BENCH_CONCURRENCY=%d", concurrency))
		if err != nil {
			return Figure{}, err
		}
		defer svc.stop() //nolint:errcheck
		client := benchClient()
		body := []byte(`{"type":"bench:noop"}`)
		var (
			next     atomic.Int64
			failures atomic.Int64
			wg       sync.WaitGroup
		)
		b.profile(svc, "pipeline", 5*time.Second)
		start := time.Now()
		for range clients {
			wg.Go(func() {
				for next.Add(1) <= int64(n) {
					if code, err := post(client, svc.base+"/api/v1/tasks", body); err != nil || code != http.StatusAccepted {
						failures.Add(1)
					}
				}
			})
		}
		wg.Wait()
		submitted := time.Since(start)
		if f := failures.Load(); f > 0 {
			return Figure{}, fmt.Errorf("%d submits failed", f)
		}
		for {
			var done int
			if err := b.db.NewRaw("SELECT count(*) FROM tasks WHERE status = 'SUCCESS'").Scan(ctx, &done); err != nil {
				return Figure{}, err
			}
			if done >= n {
				break
			}
			if time.Since(start) > 10*time.Minute {
				return Figure{}, fmt.Errorf("only %d of %d tasks finished", done, n)
			}
			time.Sleep(20 * time.Millisecond)
		}
		took := time.Since(start)
		rate := float64(n) / took.Seconds()
		ratio := rate / raw["per_second"]
		drain, err := b.drainRate(ctx, n, concurrency)
		if err != nil {
			return Figure{}, err
		}
		return Figure{
			Name:     fmt.Sprintf("pipeline %d no-op tasks", n),
			Measure:  map[string]float64{"seconds": took.Seconds(), "per_second": rate},
			Baseline: map[string]float64{"seconds": raw["seconds"], "per_second": raw["per_second"]},
			Ratio:    raw["per_second"] / rate,
			Target:   "≥ 3,000 tasks/s and ≥ 0.25× bare asynq",
			Met:      rate >= 3000 && ratio >= 0.25,
			Note: fmt.Sprintf("submits took %.2fs; throughput is %.2f× bare asynq's; workers alone drain a queued backlog at %.0f tasks/s",
				submitted.Seconds(), ratio, drain),
		}, nil
	}
}

// rawAsynq is the baseline: enqueue n no-op jobs with 32 goroutines and process them with
// an asynq server of the given concurrency; time from the first enqueue to the last done.
func rawAsynq(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("raw-asynq", flag.ContinueOnError)
	n := fs.Int("n", 20000, "jobs")
	concurrency := fs.Int("concurrency", 8, "server concurrency")
	addr := fs.String("redis", "127.0.0.1:6379", "redis address")
	db := fs.Int("db", 15, "redis database")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opt := asynq.RedisClientOpt{Addr: *addr, DB: *db}
	client := asynq.NewClient(opt)
	defer client.Close()
	var processed atomic.Int64
	done := make(chan struct{})
	srv := asynq.NewServer(opt, asynq.Config{Concurrency: *concurrency, Queues: map[string]int{"bare": 1},
		TaskCheckInterval: 100 * time.Millisecond, LogLevel: asynq.WarnLevel})
	mux := asynq.NewServeMux()
	mux.HandleFunc("noop", func(context.Context, *asynq.Task) error {
		if processed.Add(1) == int64(*n) {
			close(done)
		}
		return nil
	})
	if err := srv.Start(mux); err != nil {
		return err
	}
	defer srv.Shutdown()
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		errs atomic.Int64
	)
	start := time.Now()
	for range 32 {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(*n); i = next.Add(1) {
				if _, err := client.Enqueue(asynq.NewTask("noop", []byte(`{}`)), asynq.Queue("bare"), asynq.TaskID(fmt.Sprint("noop-", i))); err != nil {
					errs.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if errs.Load() > 0 {
		return fmt.Errorf("%d enqueues failed", errs.Load())
	}
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		return fmt.Errorf("only %d of %d jobs processed", processed.Load(), *n)
	}
	took := time.Since(start)
	return json.NewEncoder(stdout).Encode(map[string]float64{"seconds": took.Seconds(), "per_second": float64(*n) / took.Seconds(),
		"peak_rss_mb": vmHWM(os.Getpid())})
}

// drainRate submits n no-op tasks to an API-only process, then starts a worker-only process
// and measures how fast it drains them: the worker side of the pipeline on its own.
func (b *bench) drainRate(ctx context.Context, n, concurrency int) (float64, error) {
	if err := b.flushRedis(); err != nil {
		return 0, err
	}
	if _, err := b.db.ExecContext(ctx, "TRUNCATE tasks CASCADE"); err != nil {
		return 0, err
	}
	env := []string{"TASKCENTER_TYPES_BENCH_NOOP_DISABLED=false", fmt.Sprintf("TASKCENTER_QUEUES_BENCH_CONCURRENCY=%d", concurrency)}
	api, err := b.startRoles("api", env...)
	if err != nil {
		return 0, err
	}
	client := benchClient()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				post(client, api.base+"/api/v1/tasks", []byte(`{"type":"bench:noop"}`)) //nolint:errcheck
			}
		})
	}
	wg.Wait()
	api.stop() //nolint:errcheck
	worker, err := b.startRoles("all", env...)
	if err != nil {
		return 0, err
	}
	defer worker.stop() //nolint:errcheck
	b.profile(worker, "drain", 4*time.Second)
	start := time.Now()
	for {
		var done int
		if err := b.db.NewRaw("SELECT count(*) FROM tasks WHERE status = 'SUCCESS'").Scan(ctx, &done); err != nil {
			return 0, err
		}
		if done >= n {
			return float64(n) / time.Since(start).Seconds(), nil
		}
		if time.Since(start) > 10*time.Minute {
			return 0, fmt.Errorf("drained only %d of %d", done, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
