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
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskcenter/taskcenter/internal/testenv"
)

// redisProc is one redis-server or redis-sentinel this test owns, stopped when it ends.
type redisProc struct {
	cmd      *exec.Cmd
	killOnce sync.Once
}

func startRedisProc(t *testing.T, bin string, args ...string) *redisProc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	p := &redisProc{cmd: cmd}
	t.Cleanup(p.kill)
	return p
}

// kill SIGKILLs the process (no shutdown, no save) and waits until it is gone.
func (p *redisProc) kill() {
	p.killOnce.Do(func() {
		p.cmd.Process.Kill() //nolint:errcheck // it may have exited already
		p.cmd.Wait()         //nolint:errcheck // killed
	})
}

func waitRedis(t *testing.T, addr string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	testenv.Eventually(t, 15*time.Second, "redis at "+addr, func() bool { return c.Ping(context.Background()).Err() == nil })
}

// sentinelSet is a master, its replica and three Sentinels watching them (master name
// tcmaster, down after 1 s), all this test's own.
type sentinelSet struct {
	master      *redisProc
	masterAddr  string
	replicaAddr string
	replicaPort int
	sentinels   []string
	sentinel    *redis.SentinelClient
}

func startSentinelSet(t *testing.T) *sentinelSet {
	t.Helper()
	sentinelBin, err := exec.LookPath("redis-sentinel")
	if err != nil {
		t.Fatalf("redis-sentinel is not installed (scripts/services.sh tools installs it): %v", err)
	}
	dir := t.TempDir()
	master, replica := freePort(t), freePort(t)
	set := &sentinelSet{masterAddr: fmt.Sprintf("127.0.0.1:%d", master), replicaAddr: fmt.Sprintf("127.0.0.1:%d", replica), replicaPort: replica}
	for _, port := range []int{master, replica} {
		args := []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir, "--save", "", "--appendonly", "no",
			"--dbfilename", fmt.Sprintf("dump-%d.rdb", port)}
		if port == replica {
			args = append(args, "--replicaof", "127.0.0.1", strconv.Itoa(master))
		}
		proc := startRedisProc(t, "redis-server", args...)
		if port == master {
			set.master = proc
		}
		waitRedis(t, fmt.Sprintf("127.0.0.1:%d", port))
	}
	for i := range 3 {
		port := freePort(t)
		conf := filepath.Join(dir, fmt.Sprintf("sentinel-%d.conf", i))
		body := fmt.Sprintf("port %d\nbind 127.0.0.1\nsentinel monitor tcmaster 127.0.0.1 %d 2\nsentinel down-after-milliseconds tcmaster 1000\nsentinel failover-timeout tcmaster 5000\n", port, master)
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		startRedisProc(t, sentinelBin, conf)
		set.sentinels = append(set.sentinels, fmt.Sprintf("127.0.0.1:%d", port))
	}
	set.sentinel = redis.NewSentinelClient(&redis.Options{Addr: set.sentinels[0]})
	t.Cleanup(func() { set.sentinel.Close() })
	testenv.Eventually(t, 20*time.Second, "the sentinels to see the replica", func() bool {
		rs, err := set.sentinel.Replicas(context.Background(), "tcmaster").Result()
		return err == nil && len(rs) == 1
	})
	return set
}

// env is the service's configuration for the set.
func (s *sentinelSet) env() map[string]string {
	return map[string]string{"TASKCENTER_REDIS_MODE": "sentinel", "TASKCENTER_REDIS_ADDRS": strings.Join(s.sentinels, ","),
		"TASKCENTER_REDIS_MASTER_NAME": "tcmaster", "TASKCENTER_REDIS_DB": "0"}
}

// redisCluster is a Redis Cluster this test owns: masters nodes holding the slots, each
// with replicas replicas (cluster-node-timeout 2 s).
type redisCluster struct {
	nodes  []string
	procs  map[string]*redisProc
	client *redis.ClusterClient
}

func startRedisCluster(t *testing.T, masters, replicas int) *redisCluster {
	t.Helper()
	dir := t.TempDir()
	c := &redisCluster{procs: map[string]*redisProc{}}
	for range masters * (1 + replicas) {
		port := freePort(t)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		c.procs[addr] = startRedisProc(t, "redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir, "--save", "",
			"--appendonly", "no", "--cluster-enabled", "yes", "--cluster-config-file", fmt.Sprintf("nodes-%d.conf", port),
			"--cluster-node-timeout", "2000")
		waitRedis(t, addr)
		c.nodes = append(c.nodes, addr)
	}
	out, err := exec.Command("redis-cli", append(append([]string{"--cluster", "create"}, c.nodes...),
		"--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")...).CombinedOutput()
	if err != nil {
		t.Fatalf("create cluster: %v\n%s", err, out)
	}
	c.client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.nodes})
	t.Cleanup(func() { c.client.Close() })
	testenv.Eventually(t, 30*time.Second, "the cluster to be ok, every node knowing every other", func() bool {
		for _, addr := range c.nodes {
			n := redis.NewClient(&redis.Options{Addr: addr})
			info, err := n.ClusterInfo(context.Background()).Result()
			n.Close()
			if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d\r", len(c.nodes))) {
				return false
			}
		}
		return true
	})
	return c
}

// env is the service's configuration for the cluster.
func (c *redisCluster) env() map[string]string {
	return map[string]string{"TASKCENTER_REDIS_MODE": "cluster", "TASKCENTER_REDIS_ADDRS": strings.Join(c.nodes, ","), "TASKCENTER_REDIS_DB": "0"}
}

// masterOf returns the address of the master holding key's slot and of one of its replicas
// ("" when it has none).
func (c *redisCluster) masterOf(t *testing.T, key string) (master, replica string) {
	t.Helper()
	ctx := context.Background()
	slot, err := c.client.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	slots, err := c.client.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range slots {
		if int64(s.Start) <= slot && slot <= int64(s.End) {
			master = s.Nodes[0].Addr
			if len(s.Nodes) > 1 {
				replica = s.Nodes[1].Addr
			}
			return master, replica
		}
	}
	t.Fatalf("no node holds slot %d", slot)
	return "", ""
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
	set := startSentinelSet(t)
	sc, replica := set.sentinel, set.replicaPort
	e := newEnv(t, merge(set.env(), map[string]string{"TASKCENTER_IMPORT_BATCH_SIZE": "200",
		"TASKCENTER_CLEANUP_SPEC": "@every 1s", "TASKCENTER_CLEANUP_ORPHAN_GRACE": "1s"}))
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
	cluster := startRedisCluster(t, 3, 0)
	e := newEnv(t, cluster.env())
	e.seedCustomers(2000)
	p := e.start("all")
	export := p.exportThenImport(2000)
	stream := p.do("GET", "/api/v1/tasks/"+export.ID+"/events", aliceToken, nil)
	if stream.status != http.StatusOK || !strings.Contains(string(stream.body), "event: status") {
		t.Fatalf("live events on a cluster: %d %.300s", stream.status, stream.body)
	}
}
