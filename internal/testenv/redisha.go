package testenv

// Redis deployments for the failover tests: a Sentinel set and a Redis Cluster, each made of
// real redis-server and redis-sentinel processes on free loopback ports with their files in
// the test's temp dir, stopped when the test ends. scripts/services.sh installs the programs.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisProc is one redis-server or redis-sentinel a test owns.
type RedisProc struct {
	cmd  *exec.Cmd
	out  *SyncBuffer
	done chan struct{} // closed when the process has exited
	once sync.Once
}

// StartRedisProc starts bin with args until the test ends.
func StartRedisProc(t testing.TB, bin string, args ...string) *RedisProc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	out := &SyncBuffer{Limit: 8 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s (scripts/services.sh tools installs it): %v", bin, err)
	}
	p := &RedisProc{cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		cmd.Wait() //nolint:errcheck // killed, or exited on its own: answering tells
		close(p.done)
	}()
	t.Cleanup(p.Kill)
	return p
}

// Kill SIGKILLs the process (no shutdown, no save) and waits until it is gone.
func (p *RedisProc) Kill() {
	p.once.Do(func() {
		p.cmd.Process.Kill() //nolint:errcheck // it may have exited already
		<-p.done
	})
}

// startOnFreePort starts bin with the arguments argsFor gives for a free loopback port, and
// waits until it answers there. Another process can take the port between FreePort and the
// server's bind (on a busy machine, an outgoing connection's ephemeral port): a server that
// exits before it answers is started again on another port, up to five times.
func startOnFreePort(t testing.TB, bin string, argsFor func(port int) []string) (*RedisProc, int) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		port := FreePort(t)
		p := StartRedisProc(t, bin, argsFor(port)...)
		if p.answers(fmt.Sprintf("127.0.0.1:%d", port), 15*time.Second) {
			return p, port
		}
		select {
		case <-p.done:
			if attempt < 5 {
				continue
			}
		default:
		}
		t.Fatalf("%s on port %d did not answer within 15s: %s", bin, port, p.out.String())
	}
}

// answers waits until the process answers PING at addr, and says false when it exited first
// or within has passed.
func (p *RedisProc) answers(addr string, within time.Duration) bool {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return false
		default:
		}
		if c.Ping(context.Background()).Err() == nil {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// SentinelSet is a master, its replica and three Sentinels watching them (master name
// SentinelMaster, down after 1 s).
type SentinelSet struct {
	Master      *RedisProc
	MasterAddr  string
	ReplicaAddr string
	ReplicaPort int
	Sentinels   []string
	Sentinel    *redis.SentinelClient // asks the first Sentinel
}

// SentinelMaster is the name the Sentinels of a SentinelSet know the master by.
const SentinelMaster = "tcmaster"

// NewSentinelSet starts a SentinelSet and waits until the Sentinels see the replica.
func NewSentinelSet(t testing.TB) *SentinelSet {
	t.Helper()
	sentinelBin, err := exec.LookPath("redis-sentinel")
	if err != nil {
		t.Fatalf("redis-sentinel is not installed (scripts/services.sh tools installs it): %v", err)
	}
	dir := t.TempDir()
	set := &SentinelSet{}
	server := func(port int, extra ...string) []string {
		return append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir, "--save", "", "--appendonly", "no",
			"--dbfilename", fmt.Sprintf("dump-%d.rdb", port)}, extra...)
	}
	var master int
	set.Master, master = startOnFreePort(t, "redis-server", func(port int) []string { return server(port) })
	_, replica := startOnFreePort(t, "redis-server", func(port int) []string {
		return server(port, "--replicaof", "127.0.0.1", strconv.Itoa(master))
	})
	set.MasterAddr, set.ReplicaAddr, set.ReplicaPort = fmt.Sprintf("127.0.0.1:%d", master), fmt.Sprintf("127.0.0.1:%d", replica), replica
	for i := range 3 {
		_, port := startOnFreePort(t, sentinelBin, func(port int) []string {
			conf := filepath.Join(dir, fmt.Sprintf("sentinel-%d.conf", i))
			body := fmt.Sprintf("port %d\nbind 127.0.0.1\nsentinel monitor %s 127.0.0.1 %d 2\nsentinel down-after-milliseconds %[2]s 1000\nsentinel failover-timeout %[2]s 5000\n",
				port, SentinelMaster, master)
			if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			return []string{conf}
		})
		set.Sentinels = append(set.Sentinels, fmt.Sprintf("127.0.0.1:%d", port))
	}
	set.Sentinel = redis.NewSentinelClient(&redis.Options{Addr: set.Sentinels[0]})
	t.Cleanup(func() { set.Sentinel.Close() })
	Eventually(t, 20*time.Second, "the sentinels to see the replica", func() bool {
		rs, err := set.Sentinel.Replicas(context.Background(), SentinelMaster).Result()
		return err == nil && len(rs) == 1
	})
	return set
}

// RedisCluster is a Redis Cluster: masters nodes holding the slots, each with replicas
// replicas (cluster-node-timeout 2 s, so a dead master's replica is promoted in seconds).
type RedisCluster struct {
	Nodes  []string
	Procs  map[string]*RedisProc // by address
	Client *redis.ClusterClient  // go-redis' own, with its defaults
}

// NewRedisCluster starts a cluster and waits until every node knows every other and every
// master its replicas.
func NewRedisCluster(t testing.TB, masters, replicas int) *RedisCluster {
	t.Helper()
	dir := t.TempDir()
	c := &RedisCluster{Procs: map[string]*RedisProc{}}
	for range masters * (1 + replicas) {
		p, port := startOnFreePort(t, "redis-server", func(port int) []string {
			return []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir, "--save", "",
				"--appendonly", "no", "--cluster-enabled", "yes", "--cluster-config-file", fmt.Sprintf("nodes-%d.conf", port),
				"--cluster-node-timeout", "2000"}
		})
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		c.Procs[addr] = p
		c.Nodes = append(c.Nodes, addr)
	}
	out, err := exec.Command("redis-cli", append(append([]string{"--cluster", "create"}, c.Nodes...),
		"--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")...).CombinedOutput()
	if err != nil {
		t.Fatalf("create cluster: %v\n%s", err, out)
	}
	c.Client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Nodes})
	t.Cleanup(func() { c.Client.Close() })
	Eventually(t, 30*time.Second, "the cluster to be ok, every node knowing every other and every master its replicas", func() bool {
		for _, addr := range c.Nodes {
			n := redis.NewClient(&redis.Options{Addr: addr})
			info, err := n.ClusterInfo(context.Background()).Result()
			slots, serr := n.ClusterSlots(context.Background()).Result()
			n.Close()
			if err != nil || serr != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d\r", len(c.Nodes))) {
				return false
			}
			for _, s := range slots {
				if len(s.Nodes) != 1+replicas {
					return false
				}
			}
		}
		return true
	})
	return c
}

// MasterOf returns the address of the master holding key's slot and of one of its replicas
// ("" when it has none).
func (c *RedisCluster) MasterOf(t testing.TB, key string) (master, replica string) {
	t.Helper()
	ctx := context.Background()
	slot, err := c.Client.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	slots, err := c.Client.ClusterSlots(ctx).Result()
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

// WaitMaster waits until the node at addr says it is a master (ROLE) and returns when it
// first said so.
func WaitMaster(t testing.TB, addr string, within time.Duration) time.Time {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	var at time.Time
	Eventually(t, within, addr+" to be promoted", func() bool {
		role, err := c.Do(context.Background(), "ROLE").Slice()
		if err == nil && len(role) > 0 && role[0] == "master" {
			at = time.Now()
			return true
		}
		return false
	})
	return at
}
