package main

// The Redis failover rows of the fault-injection suite: the master redis-server is SIGKILLed
// under load, its replica is promoted (by Sentinel, or by the Redis Cluster itself), and the
// service must follow: enqueues and progress writes reach the new master within
// failoverBound of the promotion, the tasks submitted during the gap are enqueued as soon as
// Redis answers (by the process that took them, not by a cleanup round), and every task runs
// exactly once.

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/jobs"
)

// failoverBound is how soon after the promotion enqueues must reach the new master.
const failoverBound = 10 * time.Second

// failoverSettings is the line above the failover table: what the times depend on.
func failoverSettings() string {
	return fmt.Sprintf("Settings: Sentinel `down-after-milliseconds` 1000, `failover-timeout` 5000 (3 Sentinels, quorum 2); Redis Cluster of 3 masters "+
		"with a replica each, `cluster-node-timeout` 2000; the service's cleanup round every hour (none in the window: the gap's tasks are "+
		"handed over by the process that took them). Bound: the first enqueue, and every task submitted during the gap, reach the "+
		"new master within **%s** of the promotion.", secs(failoverBound))
}

// failoverTarget is the Redis deployment a failover scenario runs on.
type failoverTarget struct {
	name        string
	vars        map[string]string
	kill        func()
	replicaAddr string // the node that is promoted
}

func sentinelTarget(t *testing.T) failoverTarget {
	set := testenv.NewSentinelSet(t)
	return failoverTarget{name: "Sentinel", vars: sentinelVars(set), kill: set.Master.Kill, replicaAddr: set.ReplicaAddr}
}

func clusterTarget(t *testing.T) failoverTarget {
	c := testenv.NewRedisCluster(t, 3, 1)
	// The master of the exports queue's slot: asynq's keys for a queue share a hash tag.
	master, replica := c.MasterOf(t, "asynq:{exports}:pending")
	if replica == "" {
		t.Fatalf("the master %s of the exports queue has no replica", master)
	}
	return failoverTarget{name: "Redis Cluster", vars: clusterVars(c), kill: c.Procs[master].Kill, replicaAddr: replica}
}

// redisMasterKilled SIGKILLs the master under an import and a stream of export submits.
func redisMasterKilled(t *testing.T, row *chaosRow, target func(*testing.T) failoverTarget) {
	const exportN = 200
	tg := target(t)
	row.fault = fmt.Sprintf("%s: master redis-server SIGKILLed under load, replica promoted (1 import of %d rows running, an export submitted every 100 ms)",
		tg.name, chaosImportRows)
	// No cleanup round in the window: what hands the gap's tasks over is the submitting process.
	// The deployment is configured by tg.vars (mode, addresses); the harness's single-Redis
	// address is not used in those modes.
	e := newChaosEnv(t, nil, &testenv.Redis{Addr: "unused:0"}, merge(tg.vars, map[string]string{"TASKCENTER_CLEANUP_SPEC": "@every 1h"}))
	e.seedCustomers(exportN)
	imp := genImport(t, "F", chaosImportRows)
	p := e.start("all")

	watcher := failoverClient(t, tg.vars)
	it := p.submitImport(aliceToken, imp.name, imp.content, nil)
	waitChaos(t, 60*time.Second, "the import to reach 20%", func() (bool, error) {
		tk, err := e.tasksNow(it.ID)
		return err == nil && len(tk) == 1 && tk[0].Status == "RUNNING" && tk[0].Total > 0 && float64(tk[0].Current) >= 0.2*float64(tk[0].Total), err
	})

	// The promotion is the moment the replica says it is a master.
	var promoted atomic.Int64
	ctx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	replica := redis.NewClient(&redis.Options{Addr: tg.replicaAddr, MaxRetries: -1})
	defer replica.Close()
	go func() {
		for ctx.Err() == nil {
			if role, err := replica.Do(ctx, "ROLE").Slice(); err == nil && len(role) > 0 && role[0] == "master" {
				promoted.Store(time.Now().UnixNano())
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()

	// The import's live progress, read from whichever node is master, carries the time of
	// each write: the first one stamped after the promotion is the first that reached it.
	var progressed atomic.Int64
	board := jobs.NewProgressBoard(watcher)
	defer board.Close()
	go func() {
		for ctx.Err() == nil {
			if at := promoted.Load(); at != 0 {
				rctx, cancel := context.WithTimeout(ctx, time.Second)
				live, ok, err := board.Get(rctx, it.ID)
				cancel()
				if err == nil && ok && live.Progress.UpdatedAt.UnixNano() >= at {
					progressed.Store(live.Progress.UpdatedAt.UnixNano())
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	var exports []string
	submit := func() {
		res := p.do("POST", "/api/v1/exports", aliceToken, map[string]any{"type": "customers"})
		if res.status != http.StatusAccepted {
			row.fail("a submit during the failover answered %d %.200s", res.status, res.body)
			return
		}
		var sub struct{ Task taskJSON }
		res.json(t, &sub)
		exports = append(exports, sub.Task.ID)
	}
	for range 5 {
		submit()
	}
	killedAt := time.Now()
	tg.kill()
	var gap []string // submitted between the kill and the promotion
	for promoted.Load() == 0 && time.Since(killedAt) < time.Minute {
		submit()
		gap = append(gap, exports[len(exports)-1])
		time.Sleep(100 * time.Millisecond)
	}
	if promoted.Load() == 0 {
		t.Fatalf("the replica %s was not promoted within a minute of the kill", tg.replicaAddr)
	}
	promotedAt := time.Unix(0, promoted.Load())
	// Keep submitting until one submit's own enqueue reached the new master, and a while after.
	for time.Since(promotedAt) < failoverBound+2*time.Second {
		submit()
		time.Sleep(100 * time.Millisecond)
	}

	final := e.waitTerminal(3*time.Minute, append([]string{it.ID}, exports...)...)
	row.affected = 1 + len(exports)
	o := e.checkImport(final[0], imp)
	row.lost, row.dup = o.lost, o.dup
	if o.exact {
		row.recovered++
	} else {
		row.fail("import not recovered exactly: %s", o.detail)
	}
	for _, tk := range final[1:] {
		runs := e.mustRuns(tk.ID)
		switch {
		case tk.Status == "SUCCESS" && len(runs) == 1:
			row.recovered++
		case len(runs) > 1:
			row.dup++
			row.fail("export %s ran %d times (%s)", tk.TaskNo, len(runs), describeRuns(runs))
		default:
			row.lost++
			row.fail("export %s ended %s", tk.TaskNo, tk.Status)
		}
	}

	// When the jobs reached the new master: a task's enqueued_at is stamped at insert when its
	// submit's enqueue succeeded, and when the Reenqueuer handed it over otherwise.
	var firstEnqueue, lastGap sql.NullTime
	if err := e.pg.DB.NewRaw("SELECT min(enqueued_at) FROM tasks WHERE task_no = ANY(?::text[]) AND enqueued_at >= ?", pgTextArray(exports), promotedAt).
		Scan(context.Background(), &firstEnqueue); err != nil {
		t.Fatalf("read the first enqueue: %v", err)
	}
	if err := e.pg.DB.NewRaw("SELECT max(enqueued_at) FROM tasks WHERE task_no = ANY(?::text[])", pgTextArray(gap)).
		Scan(context.Background(), &lastGap); err != nil {
		t.Fatalf("read the gap's enqueues: %v", err)
	}
	if !firstEnqueue.Valid || !lastGap.Valid {
		t.Fatalf("no enqueue recorded after the promotion (first %v, gap %v)", firstEnqueue, lastGap)
	}
	toPromotion, toEnqueue, gapDone := promotedAt.Sub(killedAt), firstEnqueue.Time.Sub(promotedAt), lastGap.Time.Sub(promotedAt)
	if toEnqueue > failoverBound {
		row.fail("the first enqueue after the promotion came %s after it, more than %s", secs(toEnqueue), secs(failoverBound))
	}
	if gapDone > failoverBound {
		row.fail("the tasks submitted during the gap were handed over %s after the promotion, more than %s", secs(gapDone), secs(failoverBound))
	}
	stopWatch()
	progress := "— (the import ended first)"
	if at := progressed.Load(); at != 0 {
		progress = secs(time.Unix(0, at).Sub(promotedAt))
	}
	row.recovery = fmt.Sprintf("kill → promotion %s; promotion → first enqueue %s, → every gap task enqueued %s, → first progress write %s",
		secs(toPromotion), secs(toEnqueue), secs(gapDone), progress)
	var last time.Time
	for _, tk := range final {
		if tk.FinishedAt != nil && tk.FinishedAt.After(last) {
			last = *tk.FinishedAt
		}
	}
	row.finished = secs(last.Sub(killedAt))
	row.detail = fmt.Sprintf("%d exports submitted, %d of them between the kill and the promotion (every submit answered 202); import attempts: %s; %s",
		len(exports), len(gap), describeRuns(e.mustRuns(final[0].ID)), o.detail)
	t.Logf("%s: %s", tg.name, row.recovery)
	e.checkFiles(row)
}

// failoverClient is a client of the deployment as the service configures it.
func failoverClient(t *testing.T, vars map[string]string) redis.UniversalClient {
	t.Helper()
	r := config.Redis{Mode: vars["TASKCENTER_REDIS_MODE"], Addrs: strings.Split(vars["TASKCENTER_REDIS_ADDRS"], ","),
		MasterName: vars["TASKCENTER_REDIS_MASTER_NAME"]}
	c := r.ConnOpt().MakeRedisClient().(redis.UniversalClient)
	t.Cleanup(func() { c.Close() })
	return c
}
