// Package testenv gives each test its own Redis logical database on the real servers `make
// test` starts, so tests run in parallel without seeing each other, and says where those
// servers are. A test's own Postgres database is store/storetest's NewPostgres: it needs the
// store's migrations, and testenv stays below the packages whose tests it serves.
package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/config"
)

// DatabaseURL is the server tests create their databases (or schemas) on.
func DatabaseURL() string {
	if u := os.Getenv("TASKCENTER_DATABASE_URL"); u != "" {
		return u
	}
	return config.Default().Database.URL
}

// RedisAddr is the server tests lease logical databases on.
func RedisAddr() string {
	if a := os.Getenv("TASKCENTER_REDIS_ADDR"); a != "" {
		return a
	}
	return config.Default().Redis.Addr
}

// FreePort returns a loopback port nothing listens on right now, for a server the test starts
// itself.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Redis is one test's private logical database.
type Redis struct {
	Addr   string
	DB     int
	Client *redis.Client
}

// leaseTTL bounds how long a crashed test run can hold a database.
const leaseTTL = 15 * time.Minute

// NewRedis leases a logical database nobody else uses, empties it, and gives it back when the
// test ends. Leases live in database 0, so concurrent `go test` processes share the pool.
func NewRedis(t testing.TB) *Redis {
	t.Helper()
	ctx := context.Background()
	ctl := redis.NewClient(&redis.Options{Addr: RedisAddr(), DB: 0})
	defer ctl.Close()
	if err := ctl.Ping(ctx).Err(); err != nil {
		t.Fatalf("testenv: Redis at %s is not reachable (run `make services`): %v", RedisAddr(), err)
	}
	count := 16
	if v, err := ctl.ConfigGet(ctx, "databases").Result(); err == nil {
		if n, err := strconv.Atoi(v["databases"]); err == nil {
			count = n
		}
	}
	owner := fmt.Sprintf("%d/%s", os.Getpid(), t.Name())
	deadline := time.Now().Add(3 * time.Minute)
	for {
		for db := 1; db < count; db++ {
			key := fmt.Sprintf("taskcenter:testlease:%d", db)
			ok, err := ctl.SetNX(ctx, key, owner, leaseTTL).Result()
			if err != nil {
				t.Fatalf("testenv: lease redis db: %v", err)
			}
			if !ok {
				continue
			}
			c := redis.NewClient(&redis.Options{Addr: RedisAddr(), DB: db})
			if err := c.FlushDB(ctx).Err(); err != nil {
				t.Fatalf("testenv: flush redis db %d: %v", db, err)
			}
			t.Cleanup(func() {
				c.FlushDB(context.Background())
				c.Close()
				r := redis.NewClient(&redis.Options{Addr: RedisAddr(), DB: 0})
				r.Del(context.Background(), key)
				r.Close()
			})
			return &Redis{Addr: RedisAddr(), DB: db, Client: c}
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: all %d Redis databases are leased by other tests", count-1)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Eventually polls cond until it holds or the deadline passes, then fails with what.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// FreshMinute returns once db's clock has at least 20 seconds left in its minute (waiting
// for the next minute when it has less): the audit trail counts refusals per minute by that
// clock, and a minute turning in the middle of a test would rightly split one count in two
// rows. A test step that needs it takes a few seconds.
func FreshMinute(t testing.TB, db *bun.DB) {
	t.Helper()
	var left float64
	if err := db.QueryRow(`SELECT 60 - extract(second FROM clock_timestamp())`).Scan(&left); err != nil {
		t.Fatalf("testenv: read the database's clock: %v", err)
	}
	if left < 20 {
		time.Sleep(time.Duration(left*float64(time.Second)) + 100*time.Millisecond)
	}
}
