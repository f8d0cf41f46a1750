package rediscluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskcenter/taskcenter/internal/rediscluster"
	"github.com/taskcenter/taskcenter/internal/testenv"
)

// When a master dies and its replica is promoted, writes to its slots reach the replica
// within seconds of the promotion: the client reloads its slot map as soon as a command
// finds the node gone, where go-redis on its own (and asynq's RedisClusterClientOpt) would
// keep sending them to the dead address until its 60 s reload.
func TestWritesFollowAPromotedReplica(t *testing.T) {
	t.Parallel()
	cluster := testenv.NewRedisCluster(t, 3, 1)
	client := rediscluster.New(rediscluster.Opt{Addrs: cluster.Nodes})
	t.Cleanup(func() { client.Close() })
	ctx := context.Background()
	const key = "rediscluster-test:{promoted}"
	if err := client.Set(ctx, key, "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	master, replica := cluster.MasterOf(t, key)
	cluster.Procs[master].Kill()
	testenv.WaitMaster(t, replica, 30*time.Second)
	testenv.Eventually(t, 10*time.Second, "a write to reach the promoted replica", func() bool {
		return client.Set(ctx, key, "after", 0).Err() == nil
	})
	direct := redis.NewClient(&redis.Options{Addr: replica})
	t.Cleanup(func() { direct.Close() })
	if got, err := direct.Get(ctx, key).Result(); err != nil || got != "after" {
		t.Fatalf("the promoted replica %s holds %q (%v), want the write made after the promotion", replica, got, err)
	}
}
