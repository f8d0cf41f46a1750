package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	taskrule "github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/store"
)

// benchSSE measures live progress: 100 SSE clients (half on a task's stream as a detail
// page holds, half on /api/v1/events as the list page does) on one API process, while a
// "worker" writes the task's progress the way jobs.Run does (jobs.ProgressBoard.Set: the
// Redis hash and the pub/sub notice). Latency is from the progress write (its updated_at)
// to a client having read the event; the API's resident memory is sampled throughout.
func benchSSE(ctx context.Context, b *bench) (Figure, error) {
	const (
		clients  = 100
		users    = 5 // admins: the per-user stream cap (20) times 5 covers 100 clients
		writes   = 600
		interval = 25 * time.Millisecond // 40 progress writes a second: the board's throttle allows 2 per task
	)
	if err := b.flushRedis(); err != nil {
		return Figure{}, err
	}
	var tokens []string
	for i := range users {
		tokens = append(tokens, fmt.Sprintf("bench-sse-admin-token-%02d:sseadmin%d:admin", i, i))
	}
	svc, err := b.startRoles("api", "TASKCENTER_AUTH_TOKENS="+benchToken+":ops:admin,"+strings.Join(tokens, ","))
	if err != nil {
		return Figure{}, err
	}
	defer svc.stop() //nolint:errcheck

	var sub struct{ Task taskState }
	if code, err := svc.call("POST", "/api/v1/exports", map[string]any{"type": "customers"}, &sub); err != nil || code != http.StatusAccepted {
		return Figure{}, fmt.Errorf("submit: %d %v", code, err)
	}
	st := store.New(b.db)
	task, err := st.Get(ctx, sub.Task.ID, store.Scope{Admin: true})
	if err != nil {
		return Figure{}, err
	}
	if _, err := st.ClaimTask(ctx, task.ID, "tcbench", time.Minute); err != nil {
		return Figure{}, fmt.Errorf("claim: %w", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: b.redisAddr, DB: b.redisDB})
	defer rdb.Close()
	board := jobs.NewProgressBoard(rdb)
	board.Changed(ctx, task.TaskNo, task.Owner) //nolint:errcheck

	// The clients.
	var (
		mu        sync.Mutex
		latencies []float64
		errs      []error
		ready     sync.WaitGroup
		done      sync.WaitGroup
	)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := range clients {
		path := "/api/v1/tasks/" + task.TaskNo + "/events"
		if i%2 == 1 {
			path = "/api/v1/events"
		}
		token := strings.SplitN(tokens[i%users], ":", 2)[0]
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			err := sseClient(cctx, svc.base+path, token, ready.Done, func(lat time.Duration) {
				mu.Lock()
				latencies = append(latencies, float64(lat.Microseconds())/1000)
				mu.Unlock()
			})
			if err != nil && cctx.Err() == nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	ready.Wait()
	if len(errs) > 0 {
		return Figure{}, fmt.Errorf("%d clients failed, first: %w", len(errs), errs[0])
	}
	time.Sleep(500 * time.Millisecond) // every stream registered with the hub
	idleRSS := vmRSS(svc.cmd.Process.Pid)

	// The worker's progress writes; RSS is sampled meanwhile.
	var peakRSS float64
	start := time.Now()
	for i := 1; i <= writes; i++ {
		if err := board.Set(ctx, task.TaskNo, task.Owner, int64(i), writes+1, taskrule.Counts{Total: int64(i), Success: int64(i)}); err != nil {
			return Figure{}, err
		}
		if i%40 == 0 {
			peakRSS = max(peakRSS, vmRSS(svc.cmd.Process.Pid))
		}
		time.Sleep(interval)
	}
	elapsed := time.Since(start)
	// Let the last events arrive.
	want := clients * writes
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		n := len(latencies)
		mu.Unlock()
		if n >= want {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	done.Wait()
	hwm := vmHWM(svc.cmd.Process.Pid)

	mu.Lock()
	defer mu.Unlock()
	if len(latencies) == 0 {
		return Figure{}, fmt.Errorf("no progress event arrived")
	}
	slices.Sort(latencies)
	pct := func(p float64) float64 { return latencies[min(len(latencies)-1, int(p*float64(len(latencies))))] }
	f := Figure{
		Name: "sse",
		Measure: map[string]float64{
			"clients": clients, "events": float64(len(latencies)), "delivered_ratio": float64(len(latencies)) / float64(want),
			"p50_ms": pct(0.50), "p99_ms": pct(0.99), "max_ms": latencies[len(latencies)-1],
			"events_per_second": float64(len(latencies)) / elapsed.Seconds(),
			"rss_mb_idle":       idleRSS, "rss_mb": peakRSS, "peak_rss_mb": hwm,
		},
		Target: "p99 progress write → client ≤ 1000 ms with 100 SSE clients on one API process; API RSS < 150 MB",
		Note:   fmt.Sprintf("%d progress writes at %s intervals; half the clients on the task's stream, half on /api/v1/events", writes, interval),
	}
	f.Met = f.Measure["p99_ms"] <= 1000 && hwm < 150 && f.Measure["delivered_ratio"] >= 0.99
	fmt.Fprintf(b.stdout, "sse: %d clients, %d events, p50 %.1f ms, p99 %.1f ms, max %.1f ms; API RSS idle %.0f MB, under load %.0f MB, peak %.0f MB\n",
		clients, len(latencies), f.Measure["p50_ms"], f.Measure["p99_ms"], f.Measure["max_ms"], idleRSS, peakRSS, hwm)
	return f, nil
}

// sseClient follows one stream as a browser's EventSource would, reporting each progress
// event's delay since its write.
func sseClient(ctx context.Context, url, token string, connected func(), got func(time.Duration)) error {
	once := sync.OnceFunc(connected)
	defer once()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d", url, res.StatusCode)
	}
	once()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	kind := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			kind = line[len("event: "):]
		case strings.HasPrefix(line, "data: ") && kind == "progress":
			now := time.Now()
			var v struct {
				Progress struct {
					UpdatedAt time.Time `json:"updated_at"`
				} `json:"progress"`
			}
			if json.Unmarshal([]byte(line[len("data: "):]), &v) == nil && !v.Progress.UpdatedAt.IsZero() {
				got(now.Sub(v.Progress.UpdatedAt))
			}
		case line == "":
			kind = ""
		}
	}
	return sc.Err()
}

// vmRSS is a live process's resident set in MB, from /proc.
func vmRSS(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return float64(kb) / 1024
		}
	}
	return 0
}
