package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/store"
)

// bench is one benchmark run's world: a fresh schema, an empty Redis database and a data
// dir, all removed at the end.
type bench struct {
	ctx        context.Context
	stdout     io.Writer
	bin        string
	baseURL    string // database
	schema     string
	schemaURL  string
	db         *bun.DB
	redisAddr  string
	redisDB    int
	dataDir    string
	exportRows int
	importRows int      // rows of the import benchmark's file (-import-rows)
	rounds     int      // alternating rounds of baseline and taskcenter in the export and import benchmarks
	profileDir string   // when set, CPU profiles of the measured service are saved here
	serviceEnv []string // KEY=VALUE settings given to every measured service, last (-set)
}

const benchToken = "demo-admin-token-ops0"

func newBench(ctx context.Context, getenv func(string) string, bin string, stdout io.Writer) (*bench, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("taskcenter binary %s: %w (run `make build` or `make bench`)", bin, err)
	}
	def := config.Default()
	b := &bench{ctx: ctx, stdout: stdout, bin: bin,
		baseURL:   cmp.Or(getenv("TASKCENTER_DATABASE_URL"), def.Database.URL),
		redisAddr: cmp.Or(getenv("TASKCENTER_REDIS_ADDR"), def.Redis.Addr),
	}
	admin, err := store.Open(b.baseURL, store.OpenOptions{MaxOpenConns: 2})
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	b.schema = "bench_" + strings.ToLower(rand.Text()[:10])
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+b.schema); err != nil {
		return nil, fmt.Errorf("create bench schema (is Postgres up? run `make services`): %w", err)
	}
	u, _ := url.Parse(b.baseURL)
	q := u.Query()
	q.Set("search_path", b.schema)
	u.RawQuery = q.Encode()
	b.schemaURL = u.String()
	if b.db, err = store.Open(b.schemaURL, store.OpenOptions{MaxOpenConns: 8}); err != nil {
		return nil, err
	}
	if _, err := store.Migrate(ctx, b.db); err != nil {
		return nil, err
	}
	// The highest logical database: the test suite leases from the bottom.
	ctl := redis.NewClient(&redis.Options{Addr: b.redisAddr})
	defer ctl.Close()
	b.redisDB = 15
	if v, err := ctl.ConfigGet(ctx, "databases").Result(); err == nil {
		if n, err := strconv.Atoi(v["databases"]); err == nil {
			b.redisDB = n - 1
		}
	}
	if err := b.flushRedis(); err != nil {
		return nil, err
	}
	if b.dataDir, err = os.MkdirTemp("", "tcbench-"); err != nil {
		return nil, err
	}
	fmt.Fprintf(stdout, "bench schema %s, redis db %d, data %s\n", b.schema, b.redisDB, b.dataDir)
	return b, nil
}

func (b *bench) flushRedis() error {
	c := redis.NewClient(&redis.Options{Addr: b.redisAddr, DB: b.redisDB})
	defer c.Close()
	return c.FlushDB(b.ctx).Err()
}

// emptyQueueAnd starts a measurement from an empty queue and empty tables: it flushes the
// bench's Redis database and truncates (CASCADE) the tables, named as TRUNCATE names them.
func (b *bench) emptyQueueAnd(ctx context.Context, tables string) error {
	if err := b.flushRedis(); err != nil {
		return err
	}
	_, err := b.db.ExecContext(ctx, "TRUNCATE "+tables+" CASCADE")
	return err
}

func (b *bench) close() {
	if b.db != nil {
		b.db.Close()
	}
	if admin, err := store.Open(b.baseURL, store.OpenOptions{MaxOpenConns: 1}); err == nil {
		admin.ExecContext(context.Background(), "DROP SCHEMA IF EXISTS "+b.schema+" CASCADE") //nolint:errcheck
		admin.Close()
	}
	b.flushRedis() //nolint:errcheck
	os.RemoveAll(b.dataDir)
}

// service is a taskcenter process under measurement.
type service struct {
	cmd  *exec.Cmd
	base string
	logs *bytes.Buffer
}

// startService runs the taskcenter binary with all roles against the bench schema.
func (b *bench) startService(extra ...string) (*service, error) {
	return b.startRoles("all", extra...)
}

// startRoles runs the taskcenter binary with the given roles and extra env.
func (b *bench) startRoles(roles string, extra ...string) (*service, error) {
	cmd := exec.CommandContext(b.ctx, b.bin, "serve", "--roles", roles)
	cmd.Env = append(os.Environ(),
		"TASKCENTER_CONFIG=configs/taskcenter.yaml",
		"TASKCENTER_DATABASE_URL="+b.schemaURL,
		"TASKCENTER_REDIS_ADDR="+b.redisAddr,
		"TASKCENTER_REDIS_DB="+strconv.Itoa(b.redisDB),
		"TASKCENTER_DATA_DIR="+b.dataDir,
		"TASKCENTER_HTTP_ADDR=127.0.0.1:0",
		"TASKCENTER_LOG_LEVEL="+cmp.Or(os.Getenv("TCBENCH_LOG_LEVEL"), "info"),
		"TASKCENTER_METRICS_ADDR=",
	)
	cmd.Env = append(cmd.Env, extra...)
	cmd.Env = append(cmd.Env, b.serviceEnv...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &service{cmd: cmd, logs: &bytes.Buffer{}}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.Contains(line, `"http listening"`) {
				var rec struct{ Addr string }
				json.Unmarshal([]byte(line), &rec) //nolint:errcheck
				addr <- rec.Addr
			}
			if strings.Contains(line, `"level":"ERROR"`) || strings.Contains(line, `"level":"WARN"`) {
				s.logs.WriteString(line + "\n")
			}
		}
	}()
	select {
	case a := <-addr:
		s.base = "http://" + a
		return s, nil
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		return nil, fmt.Errorf("taskcenter did not start listening within 30s")
	}
}

// stop ends the service with SIGTERM and returns its peak RSS in MB (VmHWM, read before
// it exits).
func (s *service) stop() (float64, error) {
	hwm := vmHWM(s.cmd.Process.Pid)
	s.cmd.Process.Signal(syscall.SIGTERM)
	err := s.cmd.Wait()
	return hwm, err
}

// vmHWM is a live process's peak resident set in MB, from /proc.
func vmHWM(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(line, "VmHWM:"), "kB")))
			return float64(kb) / 1024
		}
	}
	return 0
}

// call sends an API request and decodes the JSON answer into out.
func (s *service) call(method, path string, body any, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		bs, _ := json.Marshal(body)
		rd = bytes.NewReader(bs)
	}
	req, _ := http.NewRequest(method, s.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+benchToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if out != nil {
		if err := json.NewDecoder(res.Body).Decode(out); err != nil {
			return res.StatusCode, err
		}
	} else {
		io.Copy(io.Discard, res.Body)
	}
	return res.StatusCode, nil
}

type taskState struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
	// Result is an import's or an undo's result: what it did to the customers.
	Result *struct {
		DryRun  bool             `json:"dry_run"`
		Summary map[string]int64 `json:"summary"`
	} `json:"result"`
}

// waitTerminal polls a task every 20 ms until it ends, and returns its final state.
func (s *service) waitTerminal(id string, within time.Duration) (taskState, error) {
	return s.pollTerminal(id, within, 20*time.Millisecond)
}

// pollTerminal polls a task every interval until it ends, and returns its final state.
func (s *service) pollTerminal(id string, within, interval time.Duration) (taskState, error) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		var t taskState
		if _, err := s.call("GET", "/api/v1/tasks/"+id, nil, &t); err != nil {
			return t, err
		}
		switch t.Status {
		case "SUCCESS", "PARTIAL_SUCCESS", "FAILED", "TIMEOUT", "CANCELLED":
			return t, nil
		}
		time.Sleep(interval)
	}
	return taskState{}, fmt.Errorf("task %s did not finish within %s", id, within)
}

// profile saves a CPU profile of the service over the next d, in the background.
func (b *bench) profile(s *service, name string, d time.Duration) {
	if b.profileDir == "" {
		return
	}
	go func() {
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", s.base, int(d.Seconds())), nil)
		req.Header.Set("Authorization", "Bearer "+benchToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return
		}
		defer res.Body.Close()
		os.MkdirAll(b.profileDir, 0o755) //nolint:errcheck
		f, err := os.Create(filepath.Join(b.profileDir, name+".pprof"))
		if err != nil {
			return
		}
		defer f.Close()
		io.Copy(f, res.Body) //nolint:errcheck
	}()
}

// child runs this binary in a raw baseline mode and returns its report and peak RSS.
func (b *bench) child(mode string, args ...string) (map[string]float64, float64, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, 0, err
	}
	cmd := exec.CommandContext(b.ctx, self, append([]string{mode}, args...)...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", mode, err)
	}
	var report map[string]float64
	if err := json.Unmarshal(out.Bytes(), &report); err != nil {
		return nil, 0, fmt.Errorf("%s printed %q: %w", mode, out.String(), err)
	}
	return report, report["peak_rss_mb"], nil
}

func numCPU() int { return runtime.NumCPU() }

// writeOnce writes a generated input file through a 1 MiB buffer, unless path already holds
// one: the files are large and the same from run to run, so a data dir kept between runs
// skips writing them again.
func writeOnce(path string, write func(w *bufio.Writer) error) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	if err := write(w); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
