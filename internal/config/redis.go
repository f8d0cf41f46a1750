package config

import (
	"github.com/hibiken/asynq"

	"github.com/taskcenter/taskcenter/internal/rediscluster"
)

// Redis configures the Redis deployment asynq runs on.
type Redis struct {
	// Mode is "single", "sentinel" or "cluster". Default "single".
	Mode string `yaml:"mode"`
	// Addr is host:port of a single Redis. Default "127.0.0.1:6379".
	Addr string `yaml:"addr"`
	// Addrs lists the sentinels (mode sentinel) or the seed nodes (mode cluster).
	Addrs []string `yaml:"addrs"`
	// MasterName is the sentinel master name (mode sentinel).
	MasterName string `yaml:"master_name"`
	// Username and Password authenticate to Redis. Default none.
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// SentinelPassword authenticates to the sentinels. Default none.
	SentinelPassword string `yaml:"sentinel_password"`
	// DB is the logical database (not used in cluster mode). Default 0.
	DB int `yaml:"db"`
	// PoolSize caps connections per process. Default 10 per CPU (go-redis' default) when 0.
	PoolSize int `yaml:"pool_size"`
}

func defaultRedis() Redis { return Redis{Mode: "single", Addr: "127.0.0.1:6379"} }

// validate checks that the mode names the addresses it needs.
func (r Redis) validate(bad func(string, ...any)) {
	switch r.Mode {
	case "single":
		if r.Addr == "" {
			bad("redis.addr (TASKCENTER_REDIS_ADDR) must be host:port when redis.mode is single")
		}
	case "sentinel":
		if len(r.Addrs) == 0 || r.MasterName == "" {
			bad("redis.mode sentinel needs redis.addrs (the sentinels, TASKCENTER_REDIS_ADDRS=h1:26379,h2:26379) and redis.master_name")
		}
	case "cluster":
		if len(r.Addrs) == 0 {
			bad("redis.mode cluster needs redis.addrs (TASKCENTER_REDIS_ADDRS=h1:6379,h2:6379)")
		}
		if r.DB != 0 {
			bad("redis.db must be 0 in cluster mode")
		}
	default:
		bad("redis.mode (TASKCENTER_REDIS_MODE) must be single, sentinel or cluster, got %q", r.Mode)
	}
}

// ConnOpt returns the asynq connection options for the configured Redis deployment. Each
// follows a failover by itself: Sentinel's client asks the sentinels for the master at every
// new connection, and the cluster client reloads its slot map when a node is lost
// (internal/rediscluster).
func (r Redis) ConnOpt() asynq.RedisConnOpt {
	switch r.Mode {
	case "sentinel":
		return asynq.RedisFailoverClientOpt{MasterName: r.MasterName, SentinelAddrs: r.Addrs, SentinelPassword: r.SentinelPassword,
			Username: r.Username, Password: r.Password, DB: r.DB, PoolSize: r.PoolSize}
	case "cluster":
		return rediscluster.Opt{Addrs: r.Addrs, Username: r.Username, Password: r.Password}
	default:
		return asynq.RedisClientOpt{Addr: r.Addr, Username: r.Username, Password: r.Password, DB: r.DB, PoolSize: r.PoolSize}
	}
}
