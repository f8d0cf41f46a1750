package main

// Private Redis and Postgres servers for the fault-injection suite (chaos_test.go). The
// faults that restart or wipe a server (Redis FLUSHALL, Redis killed and restarted, Postgres
// restarted) must not touch the shared servers every other test uses, so each such scenario
// starts its own server on a free loopback port with its data in a fresh temp dir, and
// stops it when the test ends.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/storetest"
)

// privateRedis is a redis-server this test owns: appendonly on, fsync every second (the
// production setting of scripts/services.sh), so a kill loses at most the last second.
type privateRedis struct {
	t      *testing.T
	dir    string
	port   int
	Addr   string
	cmd    *exec.Cmd
	exited chan error
	Client *redis.Client
}

func startPrivateRedis(t *testing.T) *privateRedis {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server is not installed (scripts/services.sh up installs it): %v", err)
	}
	r := &privateRedis{t: t, dir: t.TempDir(), port: testenv.FreePort(t)}
	r.Addr = fmt.Sprintf("127.0.0.1:%d", r.port)
	r.start()
	r.Client = redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() {
		r.Client.Close()
		r.kill()
	})
	return r
}

func (r *privateRedis) start() {
	r.t.Helper()
	cmd := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(r.port), "--dir", r.dir,
		"--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--databases", "4",
		"--daemonize", "no", "--logfile", filepath.Join(r.dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("start redis-server: %v", err)
	}
	r.cmd, r.exited = cmd, make(chan error, 1)
	go func() { r.exited <- cmd.Wait() }()
	c := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(15 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(r.dir, "redis.log"))
			r.t.Fatalf("private redis on %s did not start:\n%s", r.Addr, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill SIGKILLs the server (no shutdown save) and waits for it to be gone.
func (r *privateRedis) kill() {
	if r.cmd == nil {
		return
	}
	r.cmd.Process.Signal(syscall.SIGKILL) //nolint:errcheck // it may have exited already
	<-r.exited
	r.cmd = nil
}

// restart kills the server and starts it again on the same port and data dir after down;
// it replays its append-only file.
func (r *privateRedis) restart(down time.Duration) {
	r.t.Helper()
	r.kill()
	time.Sleep(down)
	r.start()
}

// testenv returns the server as a testenv.Redis (database 0) for newChaosEnv.
func (r *privateRedis) testenv() *testenv.Redis {
	return &testenv.Redis{Addr: r.Addr, DB: 0, Client: r.Client}
}

// privatePostgres is a Postgres cluster this test owns, run as the `postgres` OS user when
// the test runs as root (Postgres refuses root), as scripts/services.sh does.
type privatePostgres struct {
	t      *testing.T
	bin    string
	dir    string // owned by the cluster's OS user: data/, socket, log
	port   int
	osUser string // "" when not root: run as ourselves
	URL    string
	opts   string
}

func startPrivatePostgres(t *testing.T) *privatePostgres {
	t.Helper()
	p := &privatePostgres{t: t, bin: pgBinDir(t), port: testenv.FreePort(t)}
	dir, err := os.MkdirTemp("", "taskcenter-chaos-pg-")
	if err != nil {
		t.Fatal(err)
	}
	p.dir = dir
	t.Cleanup(func() { os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, Postgres needs the `postgres` OS user (scripts/services.sh up creates it): %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		p.osUser = "postgres"
	}
	data := filepath.Join(dir, "data")
	p.pg("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale")
	p.opts = fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c max_connections=200", p.port, dir)
	p.pg("pg_ctl", "-D", data, "-l", filepath.Join(dir, "postgres.log"), "-w", "-t", "60", "-o", p.opts, "start")
	t.Cleanup(func() {
		p.run("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop") //nolint:errcheck // best effort
	})
	p.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.port)
	return p
}

// pgBinDir finds initdb and pg_ctl the way scripts/services.sh does.
func pgBinDir(t *testing.T) string {
	t.Helper()
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		d := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi < vj
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i]
		}
	}
	t.Fatal("no initdb found (scripts/services.sh up installs postgresql)")
	return ""
}

// run runs a Postgres program as the cluster's OS user, from / (which that user can enter).
func (p *privatePostgres) run(prog string, args ...string) ([]byte, error) {
	name := filepath.Join(p.bin, prog)
	var cmd *exec.Cmd
	if p.osUser != "" {
		cmd = exec.Command("runuser", append([]string{"-u", p.osUser, "--", name}, args...)...)
	} else {
		cmd = exec.Command(name, args...)
	}
	cmd.Dir = "/"
	return cmd.CombinedOutput()
}

func (p *privatePostgres) pg(prog string, args ...string) {
	p.t.Helper()
	if out, err := p.run(prog, args...); err != nil {
		log, _ := os.ReadFile(filepath.Join(p.dir, "postgres.log"))
		p.t.Fatalf("%s %s: %v\n%s\n%s", prog, strings.Join(args, " "), err, out, log)
	}
}

// restart restarts the cluster with pg_ctl: mode "fast" (clients disconnected, clean
// shutdown) or "immediate" (the server processes quit at once; crash recovery at start).
func (p *privatePostgres) restart(mode string) {
	p.t.Helper()
	p.pg("pg_ctl", "-D", filepath.Join(p.dir, "data"), "-l", filepath.Join(p.dir, "postgres.log"),
		"-m", mode, "-w", "-t", "60", "-o", p.opts, "restart")
}

// testenv opens the cluster's postgres database, applies the migrations, and returns it as
// a storetest.Postgres (schema public) for newChaosEnv.
func (p *privatePostgres) testenv() *storetest.Postgres {
	p.t.Helper()
	db, err := store.Open(p.URL, store.OpenOptions{MaxOpenConns: 8})
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := store.Migrate(ctx, db); err != nil {
		p.t.Fatalf("migrate private postgres: %v", err)
	}
	return &storetest.Postgres{URL: p.URL, Schema: "public", DB: db}
}
