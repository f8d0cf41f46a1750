package config

import (
	"github.com/hibiken/asynq"
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

// ConnOpt returns the asynq connection options for the configured Redis deployment.
func (r Redis) ConnOpt() asynq.RedisConnOpt {
	switch r.Mode {
	case "sentinel":
		return asynq.RedisFailoverClientOpt{MasterName: r.MasterName, SentinelAddrs: r.Addrs, SentinelPassword: r.SentinelPassword,
			Username: r.Username, Password: r.Password, DB: r.DB, PoolSize: r.PoolSize}
	case "cluster":
		return asynq.RedisClusterClientOpt{Addrs: r.Addrs, Username: r.Username, Password: r.Password}
	default:
		return asynq.RedisClientOpt{Addr: r.Addr, Username: r.Username, Password: r.Password, DB: r.DB, PoolSize: r.PoolSize}
	}
}
