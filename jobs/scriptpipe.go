package jobs

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskcenter/taskcenter/internal/batch"
)

// ScriptPipeliner is a Redis client that sends the Lua scripts (EVALSHA) called at the same
// moment from many goroutines in one pipeline, one round trip, and passes every other command
// through unchanged. asynq enqueues a job with one script call and has no batch enqueue, so
// giving asynq's client this one makes concurrent submits (and a batch submit's many
// enqueues) share their round trips to Redis. Each caller still gets its own reply and error,
// exactly as from EVALSHA on its own; a script Redis does not know yet answers NOSCRIPT to its
// caller, whose go-redis Script falls back to EVAL as usual.
//
// Given to asynq's servers it also remembers the lanes found empty. asynq's dequeue asks each
// lane of a queue in turn, one script call and one round trip each, so taking a
// default-priority task asked the resume and high lanes first, nearly always in vain (two
// of the three calls). A lane whose dequeue found nothing is not asked again for
// emptyLaneRecheck: the calls answer "nothing" at once, and asynq goes on to the next lane.
// So strict priority holds to within that time: a task that arrives in a higher lane while
// the workers are busy with a lower one starts at most emptyLaneRecheck later than it would
// have.
type ScriptPipeliner struct {
	redis.UniversalClient
	b *batch.Batcher[evalReq]

	mu    sync.Mutex
	empty map[string]time.Time // lane → when to ask it again
}

// emptyLaneRecheck is how long a lane found empty is not asked again by this process.
const emptyLaneRecheck = 20 * time.Millisecond

type evalReq struct {
	ctx  context.Context
	sha  string
	keys []string
	args []any
	cmd  *redis.Cmd
	done chan struct{}
}

// scriptFlushTimeout bounds a pipeline whose callers set no deadline.
const scriptFlushTimeout = 5 * time.Second

// NewScriptPipeliner wraps rdb; Stop stops it.
func NewScriptPipeliner(rdb redis.UniversalClient) *ScriptPipeliner {
	p := &ScriptPipeliner{UniversalClient: rdb, empty: map[string]time.Time{}}
	p.b = batch.New(batch.Config{MaxBatch: 256}, p.flush)
	return p
}

// EvalSha runs the script sha with whatever other script calls are in flight. It answers by
// ctx's deadline even when the pipeline it joined is held up (Redis slow or gone): the script
// may still run, as a call that timed out on its own connection may have.
func (p *ScriptPipeliner) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	lane, dequeue := dequeuedLane(keys)
	if dequeue && p.knownEmpty(lane) {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(redis.Nil)
		return cmd
	}
	cmd := p.evalSha(ctx, sha, keys, args...)
	if dequeue && errors.Is(cmd.Err(), redis.Nil) {
		p.mu.Lock()
		p.empty[lane] = time.Now().Add(emptyLaneRecheck)
		p.mu.Unlock()
	}
	return cmd
}

func (p *ScriptPipeliner) knownEmpty(lane string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	until, ok := p.empty[lane]
	if ok && !time.Now().Before(until) {
		delete(p.empty, lane)
		return false
	}
	return ok
}

// dequeuedLane recognises asynq's dequeue script (rdb.Dequeue) by its keys, the pending,
// paused, active and lease keys of one queue, and returns that queue's key prefix.
func dequeuedLane(keys []string) (string, bool) {
	if len(keys) != 4 {
		return "", false
	}
	lane, ok := strings.CutSuffix(keys[0], ":pending")
	if !ok || keys[1] != lane+":paused" || keys[2] != lane+":active" || keys[3] != lane+":lease" {
		return "", false
	}
	return lane, true
}

func (p *ScriptPipeliner) evalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	r := &evalReq{ctx: ctx, sha: sha, keys: keys, args: args, done: make(chan struct{})}
	err := p.b.Queue(ctx, r)
	if errors.Is(err, batch.ErrClosed) {
		return p.UniversalClient.EvalSha(ctx, sha, keys, args...)
	}
	if err == nil {
		select {
		case <-r.done:
			return r.cmd
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}

// Stop ends the pipeliner after answering the calls queued; later calls go straight to Redis.
// (Close is the wrapped client's, which this does not own.)
func (p *ScriptPipeliner) Stop() { p.b.Close() }

func (p *ScriptPipeliner) flush(_ context.Context, batch []*evalReq) {
	// The pipeline's context carries the most impatient caller's deadline (go-redis honours
	// it with ContextTimeoutEnabled; otherwise its read and write timeouts bound the round
	// trip). Each caller answers by its own deadline either way (EvalSha).
	deadline := time.Now().Add(scriptFlushTimeout)
	for _, r := range batch {
		if d, ok := r.ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if len(batch) == 1 {
		r := batch[0]
		r.cmd = p.UniversalClient.EvalSha(ctx, r.sha, r.keys, r.args...)
		close(r.done)
		return
	}
	pipe := p.UniversalClient.Pipeline()
	for _, r := range batch {
		r.cmd = pipe.EvalSha(ctx, r.sha, r.keys, r.args...)
	}
	pipe.Exec(ctx) //nolint:errcheck // each command carries its own error
	for _, r := range batch {
		close(r.done)
	}
}
