package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/testenv"
)

// sentinelVars configures the service for a Sentinel set.
func sentinelVars(s *testenv.SentinelSet) map[string]string {
	return map[string]string{"TASKCENTER_REDIS_MODE": "sentinel", "TASKCENTER_REDIS_ADDRS": strings.Join(s.Sentinels, ","),
		"TASKCENTER_REDIS_MASTER_NAME": testenv.SentinelMaster, "TASKCENTER_REDIS_DB": "0"}
}

// clusterVars configures the service for a Redis Cluster.
func clusterVars(c *testenv.RedisCluster) map[string]string {
	return map[string]string{"TASKCENTER_REDIS_MODE": "cluster", "TASKCENTER_REDIS_ADDRS": strings.Join(c.Nodes, ","), "TASKCENTER_REDIS_DB": "0"}
}

// csvCustomers is an import file of n rows, every 97th with a bad phone.
func csvCustomers(n int) (content []byte, bad int) {
	var b bytes.Buffer
	b.WriteString("code,name,phone\n")
	for i := 1; i <= n; i++ {
		phone := fmt.Sprintf("139%08d", i)
		if i%97 == 0 {
			phone, bad = "12345", bad+1
		}
		fmt.Fprintf(&b, "S%07d,name %d,%s\n", i, i, phone)
	}
	return b.Bytes(), bad
}

// A master, a replica and three Sentinels, for real. An import runs; mid-import Sentinel
// fails the master over; the import finishes with exact counts, and afterwards progress on
// the new master, live events and the console work.
func TestImportSurvivesASentinelFailover(t *testing.T) {
	t.Parallel()
	set := testenv.NewSentinelSet(t)
	sc, replica := set.Sentinel, set.ReplicaPort
	e := newEnv(t, merge(sentinelVars(set), map[string]string{"TASKCENTER_IMPORT_BATCH_SIZE": "200",
		"TASKCENTER_CLEANUP_SPEC": "@every 1s", "TASKCENTER_CLEANUP_ORPHAN_GRACE": "1s"}))
	p := e.start("all")
	const rows = 20000
	content, bad := csvCustomers(rows)
	task := p.submitImport(aliceToken, "big.csv", content, nil)
	p.waitUnderWay(aliceToken, task.ID)
	began := time.Now()
	if err := sc.Failover(context.Background(), testenv.SentinelMaster).Err(); err != nil {
		t.Fatalf("SENTINEL FAILOVER: %v", err)
	}
	testenv.Eventually(t, 30*time.Second, "the replica to become master", func() bool {
		addr, err := sc.GetMasterAddrByName(context.Background(), testenv.SentinelMaster).Result()
		return err == nil && addr[1] == strconv.Itoa(replica)
	})
	t.Logf("failover done %s after it was asked", time.Since(began).Round(time.Millisecond))
	final := p.waitStatus(aliceToken, task.ID, 3*time.Minute, "PARTIAL_SUCCESS", "SUCCESS", "FAILED")
	if final.Status != "PARTIAL_SUCCESS" || final.Counts.Total != rows || final.Counts.Failed != int64(bad) || final.Counts.Success != int64(rows-bad) {
		t.Fatalf("after the failover: %s %+v", final.Status, final.Counts)
	}
	if n := e.count("SELECT count(*) FROM customers WHERE code LIKE 'S%'"); n != rows-bad {
		t.Fatalf("%d customers written, want %d", n, rows-bad)
	}
	t.Logf("import finished %s after the failover", time.Since(began).Round(time.Millisecond))

	// After the failover: a new task runs, its progress is on the new master, its live events
	// arrive, the console reads the queues.
	next := p.submitExport(aliceToken, map[string]any{"type": "customers"})
	stream := p.do("GET", "/api/v1/tasks/"+next.ID+"/events", aliceToken, nil)
	if stream.status != http.StatusOK || !strings.Contains(string(stream.body), "event: status") {
		t.Fatalf("live events after the failover: %d %.300s", stream.status, stream.body)
	}
	if res := p.do("GET", "/monitor/api/queues", adminToken, nil); res.status != http.StatusOK {
		t.Fatalf("console after the failover: %d", res.status)
	}
}

// Three masters in a Redis Cluster (asynq's cluster mode): exports and imports run to the end,
// progress and live events work (keys carry hash tags; one key per script).
func TestTasksRunOnARedisCluster(t *testing.T) {
	t.Parallel()
	cluster := testenv.NewRedisCluster(t, 3, 0)
	e := newEnv(t, clusterVars(cluster))
	e.seedCustomers(2000)
	p := e.start("all")
	export := p.exportThenImport(2000)
	stream := p.do("GET", "/api/v1/tasks/"+export.ID+"/events", aliceToken, nil)
	if stream.status != http.StatusOK || !strings.Contains(string(stream.body), "event: status") {
		t.Fatalf("live events on a cluster: %d %.300s", stream.status, stream.body)
	}
}
