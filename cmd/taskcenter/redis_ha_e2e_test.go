package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskcenter/taskcenter/internal/testenv"
)

// redisProc is one redis-server or redis-sentinel this test owns.
func startRedisProc(t *testing.T, bin string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() }) //nolint:errcheck
}

func waitRedis(t *testing.T, addr string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	testenv.Eventually(t, 15*time.Second, "redis at "+addr, func() bool { return c.Ping(context.Background()).Err() == nil })
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
	sentinelBin, err := exec.LookPath("redis-sentinel")
	if err != nil {
		t.Fatalf("redis-sentinel is not installed (scripts/services.sh tools installs it): %v", err)
	}
	dir := t.TempDir()
	master, replica := freePort(t), freePort(t)
	for _, port := range []int{master, replica} {
		args := []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir, "--save", "", "--appendonly", "no",
			"--dbfilename", fmt.Sprintf("dump-%d.rdb", port)}
		if port == replica {
			args = append(args, "--replicaof", "127.0.0.1", strconv.Itoa(master))
		}
		startRedisProc(t, "redis-server", args...)
		waitRedis(t, fmt.Sprintf("127.0.0.1:%d", port))
	}
	var sentinels []string
	for i := range 3 {
		port := freePort(t)
		conf := filepath.Join(dir, fmt.Sprintf("sentinel-%d.conf", i))
		body := fmt.Sprintf("port %d\nbind 127.0.0.1\nsentinel monitor tcmaster 127.0.0.1 %d 2\nsentinel down-after-milliseconds tcmaster 1000\nsentinel failover-timeout tcmaster 5000\n", port, master)
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		startRedisProc(t, sentinelBin, conf)
		sentinels = append(sentinels, fmt.Sprintf("127.0.0.1:%d", port))
	}
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinels[0]})
	defer sc.Close()
	testenv.Eventually(t, 20*time.Second, "the sentinels to see the replica", func() bool {
		rs, err := sc.Replicas(context.Background(), "tcmaster").Result()
		return err == nil && len(rs) == 1
	})

	e := newEnv(t, map[string]string{
		"TASKCENTER_REDIS_MODE": "sentinel", "TASKCENTER_REDIS_ADDRS": strings.Join(sentinels, ","),
		"TASKCENTER_REDIS_MASTER_NAME": "tcmaster", "TASKCENTER_REDIS_DB": "0", "TASKCENTER_IMPORT_BATCH_SIZE": "200",
		"TASKCENTER_CLEANUP_SPEC": "@every 1s", "TASKCENTER_CLEANUP_ORPHAN_GRACE": "1s",
	})
	p := e.start("all")
	const rows = 20000
	content, bad := csvCustomers(rows)
	task := p.submitImport(aliceToken, "big.csv", content, nil)
	p.waitUnderWay(aliceToken, task.ID)
	began := time.Now()
	if err := sc.Failover(context.Background(), "tcmaster").Err(); err != nil {
		t.Fatalf("SENTINEL FAILOVER: %v", err)
	}
	testenv.Eventually(t, 30*time.Second, "the replica to become master", func() bool {
		addr, err := sc.GetMasterAddrByName(context.Background(), "tcmaster").Result()
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
	dir := t.TempDir()
	var nodes []string
	for range 3 {
		port := freePort(t)
		startRedisProc(t, "redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir, "--save", "",
			"--appendonly", "no", "--cluster-enabled", "yes", "--cluster-config-file", fmt.Sprintf("nodes-%d.conf", port),
			"--cluster-node-timeout", "2000")
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		waitRedis(t, addr)
		nodes = append(nodes, addr)
	}
	out, err := exec.Command("redis-cli", append(append([]string{"--cluster", "create"}, nodes...), "--cluster-replicas", "0", "--cluster-yes")...).CombinedOutput()
	if err != nil {
		t.Fatalf("create cluster: %v\n%s", err, out)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: nodes})
	defer cc.Close()
	testenv.Eventually(t, 20*time.Second, "the cluster to be ok", func() bool {
		info, err := cc.ClusterInfo(context.Background()).Result()
		return err == nil && strings.Contains(info, "cluster_state:ok")
	})

	e := newEnv(t, map[string]string{"TASKCENTER_REDIS_MODE": "cluster", "TASKCENTER_REDIS_ADDRS": strings.Join(nodes, ","),
		"TASKCENTER_REDIS_DB": "0"})
	e.seedCustomers(2000)
	p := e.start("all")
	export := p.exportThenImport(2000)
	stream := p.do("GET", "/api/v1/tasks/"+export.ID+"/events", aliceToken, nil)
	if stream.status != http.StatusOK || !strings.Contains(string(stream.body), "event: status") {
		t.Fatalf("live events on a cluster: %d %.300s", stream.status, stream.body)
	}
}
