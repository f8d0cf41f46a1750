// Package rediscluster builds the Redis Cluster client the service runs on, tuned to follow a
// failover within seconds.
//
// go-redis' cluster client learns the slot map when it starts and refreshes it on a MOVED or
// ASK reply, and otherwise only when the map is older than ClusterStateReloadInterval (60 s by
// default). When a master dies its replica is promoted, but nothing answers MOVED: the dead
// node refuses connections, the client retries it and another node, and keeps sending the
// slot's commands to the dead address until the minute is up. asynq's RedisClusterClientOpt
// exposes neither knob. Here the client reloads its slot map as soon as a command fails for a
// reason other than a Redis reply (a refused or broken connection, a timeout) or with
// CLUSTERDOWN, and at least every StateReloadInterval while it is used, so enqueues and
// progress writes reach the promoted replica within a second or two of the promotion.
package rediscluster

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// StateReloadInterval bounds how stale the slot map can get while no command fails.
const StateReloadInterval = 5 * time.Second

// Opt is an asynq.RedisConnOpt for a Redis Cluster.
type Opt struct {
	// Addrs are seed nodes; the client learns the rest from them.
	Addrs              []string
	Username, Password string
	TLSConfig          *tls.Config
}

var _ asynq.RedisConnOpt = Opt{}

// MakeRedisClient returns a *redis.ClusterClient (asynq's contract: an opaque value).
func (o Opt) MakeRedisClient() any { return New(o) }

// New returns a cluster client that follows a failover promptly (see the package comment).
func New(o Opt) *redis.ClusterClient {
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: o.Addrs, Username: o.Username, Password: o.Password,
		TLSConfig: o.TLSConfig, ClusterStateReloadInterval: StateReloadInterval})
	c.AddHook(reloadOnFailure{c})
	return c
}

// reloadOnFailure asks the client to reload its slot map after a command or pipeline failed
// as it would when its node is gone. go-redis coalesces the requests: one CLUSTER SLOTS at a
// time, at most one more after a 200 ms pause.
type reloadOnFailure struct{ c *redis.ClusterClient }

func (h reloadOnFailure) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h reloadOnFailure) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.check(ctx, err)
		return err
	}
}

func (h reloadOnFailure) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.check(ctx, err)
		return err
	}
}

func (h reloadOnFailure) check(ctx context.Context, err error) {
	if NodeLost(err) {
		h.c.ReloadState(ctx)
	}
}

// NodeLost reports whether err says a node could not be reached (a refused or broken
// connection, a timeout) or the cluster is reorganising (CLUSTERDOWN, TRYAGAIN), rather than
// being Redis' answer to the command (redis.Nil, a script's error, a wrong type).
func NodeLost(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var reply redis.Error
	if errors.As(err, &reply) {
		msg := reply.Error()
		return strings.HasPrefix(msg, "CLUSTERDOWN") || strings.HasPrefix(msg, "TRYAGAIN")
	}
	return true
}
