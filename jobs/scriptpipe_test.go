package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/taskcenter/taskcenter/internal/testenv"
)

// dequeueCounter counts asynq's dequeue script calls per lane that reach Redis, alone or in
// a pipeline.
type dequeueCounter struct {
	mu    sync.Mutex
	asked map[string]int
}

func (c *dequeueCounter) note(cmd redis.Cmder) {
	args := cmd.Args()
	if len(args) < 7 || !strings.EqualFold(args[0].(string), "evalsha") {
		return
	}
	keys := make([]string, 4)
	for i := range keys {
		keys[i], _ = args[3+i].(string)
	}
	if lane, ok := dequeuedLane(keys); ok {
		c.mu.Lock()
		c.asked[lane]++
		c.mu.Unlock()
	}
}

func (c *dequeueCounter) count(lane string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.asked["asynq:{"+lane+"}"]
}

func (c *dequeueCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *dequeueCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.note(cmd)
		return next(ctx, cmd)
	}
}

func (c *dequeueCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.note(cmd)
		}
		return next(ctx, cmds)
	}
}

var _ redis.Hook = (*dequeueCounter)(nil)

// asynq's dequeue asks every lane in turn, the empty higher ones first. Through the
// pipeliner a lane found empty is not asked again for emptyLaneRecheck: draining a backlog of
// default-priority jobs asks the empty resume and high lanes about once per recheck interval,
// not once per job; and a job that then arrives in the high lane is still taken before the
// rest of the backlog.
func TestScriptPipelinerSkipsLanesFoundEmpty(t *testing.T) {
	t.Parallel()
	rd := testenv.NewRedis(t)
	counter := &dequeueCounter{asked: map[string]int{}}
	rd.Client.AddHook(counter)
	p := NewScriptPipeliner(rd.Client)
	defer p.Stop()
	ctx := context.Background()
	client := asynq.NewClientFromRedisClient(p)
	const backlog = 400
	for range backlog {
		if _, err := client.EnqueueContext(ctx, asynq.NewTask("test:normal", nil), asynq.Queue("work")); err != nil {
			t.Fatal(err)
		}
	}

	var (
		mu    sync.Mutex
		order []string
		first = make(chan struct{})
	)
	srv := asynq.NewServerFromRedisClient(p, asynq.Config{
		Concurrency: 1, Queues: LaneWeights("work"), StrictPriority: true, TaskCheckInterval: 10 * time.Millisecond,
		LogLevel: asynq.FatalLevel,
	})
	mux := asynq.NewServeMux()
	record := asynq.HandlerFunc(func(_ context.Context, task *asynq.Task) error {
		mu.Lock()
		order = append(order, task.Type())
		if len(order) == 1 {
			close(first)
		}
		mu.Unlock()
		return nil
	})
	mux.Handle("test:normal", record)
	mux.Handle("test:high", record)
	start := time.Now()
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	<-first
	if _, err := client.EnqueueContext(ctx, asynq.NewTask("test:high", nil), asynq.Queue("work.high")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the backlog and the high job to run", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == backlog+1
	})
	elapsed := time.Since(start)
	mu.Lock()
	pos := -1
	for i, typ := range order {
		if typ == "test:high" {
			pos = i
		}
	}
	mu.Unlock()
	if pos < 0 || pos == backlog {
		t.Fatalf("the high job ran at position %d of %d: not before the rest of the backlog", pos, backlog+1)
	}
	// One fetcher asks the lanes in turn, so a lane marked empty is asked at most once per
	// recheck interval, plus the call that found the high job.
	bound := int(elapsed/emptyLaneRecheck) + 3
	for _, lane := range []string{"work.resume", "work.high"} {
		if n := counter.count(lane); n > bound || n >= backlog {
			t.Errorf("lane %s asked %d times in %s for %d jobs; want at most %d", lane, n, elapsed.Round(time.Millisecond), backlog+1, bound)
		}
	}
	if n := counter.count("work"); n < backlog {
		t.Errorf("lane work asked %d times for %d jobs", n, backlog)
	}
}

// Only asynq's dequeue script is recognised: its four keys of one queue, in its order.
func TestDequeuedLaneRecognisesOnlyTheDequeueScript(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		keys []string
		lane string
	}{
		{[]string{"asynq:{q}:pending", "asynq:{q}:paused", "asynq:{q}:active", "asynq:{q}:lease"}, "asynq:{q}"},
		{[]string{"asynq:{q}:pending", "asynq:{q}:paused", "asynq:{q}:active"}, ""},
		{[]string{"asynq:{q}:pending", "asynq:{r}:paused", "asynq:{q}:active", "asynq:{q}:lease"}, ""},
		{[]string{"asynq:{q}:t:1", "asynq:{q}:pending", "asynq:{q}:active", "asynq:{q}:lease"}, ""},
		{[]string{"asynq:{q}:active", "asynq:{q}:lease", "asynq:{q}:t:1", "asynq:{q}:processed"}, ""},
	} {
		lane, ok := dequeuedLane(tc.keys)
		if lane != tc.lane || ok != (tc.lane != "") {
			t.Errorf("dequeuedLane(%v) = %q, %v; want %q", tc.keys, lane, ok, tc.lane)
		}
	}
}

// Script calls made together share a pipeline; each caller gets its own reply, a script
// Redis has not seen yet still runs (NOSCRIPT, then EVAL), and asynq through the pipeliner
// still tells a duplicate job id apart.
func TestScriptPipelinerAnswersEachCaller(t *testing.T) {
	t.Parallel()
	rd := testenv.NewRedis(t)
	p := NewScriptPipeliner(rd.Client)
	defer p.Stop()
	ctx := context.Background()
	echo := redis.NewScript(`redis.call('SET', KEYS[1], ARGV[1]) return ARGV[1]`)
	var wg sync.WaitGroup
	errs := make([]error, 64)
	for i := range 64 {
		wg.Go(func() {
			want := fmt.Sprintf("v%d", i)
			got, err := echo.Run(ctx, p, []string{"k:" + want}, want).Text()
			if err == nil && got != want {
				err = fmt.Errorf("got %q", got)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if v, _ := rd.Client.Get(ctx, "k:v63").Result(); v != "v63" {
		t.Fatalf("k:v63 = %q", v)
	}
	client := asynq.NewClientFromRedisClient(p)
	job := asynq.NewTask("test:work", nil)
	if _, err := client.EnqueueContext(ctx, job, asynq.TaskID("same"), asynq.Queue("work")); err != nil {
		t.Fatal(err)
	}
	if _, err := client.EnqueueContext(ctx, job, asynq.TaskID("same"), asynq.Queue("work")); !errors.Is(err, asynq.ErrTaskIDConflict) {
		t.Fatalf("second enqueue of one id: %v; want ErrTaskIDConflict", err)
	}
	// A caller whose deadline has passed is answered with the deadline, not held.
	dctx, cancel := context.WithTimeout(ctx, time.Nanosecond)
	defer cancel()
	time.Sleep(time.Millisecond)
	if err := echo.Run(dctx, p, []string{"k:late"}, "x").Err(); err == nil {
		t.Fatal("a call past its deadline succeeded")
	}
}

// A caller answers by its own deadline when the pipeline it joined is held up (Redis gone
// mid-request): a submit's enqueue keeps its bound however long another caller's script waits.
func TestScriptPipelinerCallerAnswersByItsDeadline(t *testing.T) {
	t.Parallel()
	rd := testenv.NewRedis(t)
	proxy := testenv.NewProxy(t, rd.Addr)
	client := redis.NewClient(&redis.Options{Addr: proxy.Addr(), DB: rd.DB, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second})
	defer client.Close()
	p := NewScriptPipeliner(client)
	defer p.Stop()
	ctx := context.Background()
	stuck := redis.NewScript(`return 'stuck-marker'`)
	if err := stuck.Load(ctx, client).Err(); err != nil {
		t.Fatal(err)
	}
	held := proxy.Hold([]byte(stuck.Hash()))
	go stuck.Run(ctx, p, []string{"k"}) //nolint:errcheck // held: answers only when the pipeline's own deadline passes
	<-held
	quick := redis.NewScript(`return 1`)
	qctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := quick.Run(qctx, p, []string{"k"}).Err()
	if took := time.Since(start); err == nil || took > time.Second {
		t.Fatalf("call behind a held pipeline: err %v after %s; want its deadline's error within about 200ms", err, took)
	}
}
