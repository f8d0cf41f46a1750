package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/httpapi"
	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/internal/files"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/cleanup"
	"github.com/taskcenter/taskcenter/jobs/export"
	"github.com/taskcenter/taskcenter/jobs/importer"
	"github.com/taskcenter/taskcenter/store"
)

const usage = `usage:
  taskcenter serve   [--config FILE] [--roles api,worker,scheduler|all]
  taskcenter migrate [--config FILE]

The config file defaults to $TASKCENTER_CONFIG, else configs/taskcenter.yaml when present.
Every setting can be overridden by a TASKCENTER_* environment variable (see the README).`

// run is the whole program: main only adds signals and the exit code. Tests call it too.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	cmd, rest := args[0], args[1:]
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stdout)
	configPath := fs.String("config", defaultConfigPath(getenv), "config file")
	roles := fs.String("roles", "all", "comma-separated roles to run: api, worker, scheduler, or all")
	switch cmd {
	case "serve", "migrate":
		if err := fs.Parse(rest); err != nil {
			return err
		}
	case "-h", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return nil
	default:
		return fmt.Errorf("unknown command %q\n%s", cmd, usage)
	}
	cfg, err := config.Load(*configPath, getenv)
	if err != nil {
		return err
	}
	logger := newLogger(cfg.Log, stdout)
	if cmd == "migrate" {
		return migrate(ctx, cfg, logger)
	}
	r, err := parseRoles(*roles)
	if err != nil {
		return err
	}
	return serve(ctx, cfg, r, logger)
}

func defaultConfigPath(getenv func(string) string) string {
	if p := getenv("TASKCENTER_CONFIG"); p != "" {
		return p
	}
	if _, err := os.Stat("configs/taskcenter.yaml"); err == nil {
		return "configs/taskcenter.yaml"
	}
	return ""
}

type roleSet struct{ api, worker, scheduler bool }

func (r roleSet) String() string {
	var out []string
	for name, on := range map[string]bool{"api": r.api, "worker": r.worker, "scheduler": r.scheduler} {
		if on {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func parseRoles(s string) (roleSet, error) {
	var r roleSet
	for part := range strings.SplitSeq(s, ",") {
		switch strings.TrimSpace(part) {
		case "all":
			r = roleSet{true, true, true}
		case "api":
			r.api = true
		case "worker":
			r.worker = true
		case "scheduler":
			r.scheduler = true
		default:
			return r, fmt.Errorf("--roles: unknown role %q; use api, worker, scheduler or all", part)
		}
	}
	return r, nil
}

func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		// Durations read better as "1.5s" than as nanoseconds.
		if a.Value.Kind() == slog.KindDuration {
			return slog.String(a.Key, a.Value.Duration().String())
		}
		return a
	}}
	if c.Format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

func migrate(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	db, err := store.Open(cfg.Database.URL, store.OpenOptions{MaxOpenConns: 2})
	if err != nil {
		return err
	}
	defer db.Close()
	applied, err := store.Migrate(ctx, db)
	if err != nil {
		return err
	}
	logger.Info("migrations applied", "count", len(applied), "names", applied)
	return nil
}

// waitForDatabase migrates once Postgres answers: a process started before its database
// waits instead of crash-looping.
func waitForDatabase(ctx context.Context, db *bun.DB, logger *slog.Logger) error {
	for wait := time.Second; ; wait = min(wait*2, 15*time.Second) {
		applied, err := store.Migrate(ctx, db)
		if err == nil {
			if len(applied) > 0 {
				logger.Info("migrations applied", "names", applied)
			}
			return nil
		}
		if !store.IsUnavailable(err) {
			return err
		}
		logger.Warn("waiting for Postgres", "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

func serve(ctx context.Context, cfg config.Config, roles roleSet, logger *slog.Logger) error {
	workerID := cfg.Worker.ID
	if workerID == "" {
		host, _ := os.Hostname()
		workerID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	logger = logger.With("worker", workerID)
	logger.Info("starting taskcenter", "roles", roles.String())

	db, err := store.Open(cfg.Database.URL, store.OpenOptions{MaxOpenConns: cfg.Database.MaxOpenConns})
	if err != nil {
		return err
	}
	defer db.Close()
	if err := waitForDatabase(ctx, db, logger); err != nil {
		return fmt.Errorf("prepare database: %w", err)
	}
	rdb, ok := cfg.Redis.ConnOpt().MakeRedisClient().(redis.UniversalClient)
	if !ok {
		return errors.New("redis: unsupported connection options")
	}
	defer rdb.Close()
	fileStore, err := files.New(cfg.DataDir)
	if err != nil {
		return err
	}

	st := store.New(db)
	client := asynq.NewClientFromRedisClient(rdb)
	inspector := asynq.NewInspectorFromRedisClient(rdb)
	runtimes := map[string]time.Duration{}
	submitTypes := map[string]jobs.SubmitPolicy{}
	policies := map[string]jobs.TypePolicy{}
	for name, t := range cfg.Types {
		if t.Disabled {
			continue
		}
		runtimes[name] = t.MaxRuntime
		submitTypes[name] = jobs.SubmitPolicy{Queue: t.Queue, MaxRetry: t.MaxRetry, TimeoutSeconds: int(t.Timeout.Seconds())}
		policies[name] = jobs.TypePolicy{MaxRetry: t.MaxRetry, RetryBase: t.RetryBase, MaxRuntime: t.MaxRuntime}
	}
	enqueuer := jobs.NewEnqueuer(client, inspector, runtimes)
	board := jobs.NewProgressBoard(rdb)
	limits := map[string]int{}
	for name, q := range cfg.Queues {
		limits[name] = q.BacklogLimit
	}
	submitter := jobs.NewSubmitter(st, enqueuer, submitTypes, limits, logger)

	importLimits := importer.Limits{MaxUncompressed: cfg.Import.MaxUncompressedBytes, MaxEntries: 10_000, MaxRows: cfg.Import.MaxRows}
	cleanupCfg, err := cleanupConfig(cfg)
	if err != nil {
		return err
	}

	var (
		wg       sync.WaitGroup
		errs     = make(chan error, 4)
		stopping []func()
	)

	if roles.worker {
		rt := jobs.NewRuntime(jobs.RuntimeConfig{
			WorkerID: workerID, HeartbeatInterval: cfg.Worker.HeartbeatInterval, TakeoverAfter: cfg.Worker.TakeoverAfter,
			ProgressInterval: cfg.Worker.ProgressInterval, Types: policies,
		}, jobs.RuntimeDeps{Store: st, Enqueuer: enqueuer, Board: board, Files: fileStore, Alerter: logAlerter{logger}, Logger: logger})
		exportCfg := export.Config{PageSize: cfg.Export.PageSize, ResultTTL: cfg.Export.ResultTTL, MaxRows: cfg.Export.MaxRows}
		register := func(h jobs.Handler) {
			if _, on := policies[h.Type()]; on {
				rt.Register(h)
			}
		}
		register(export.NewCustomers(db, fileStore, exportCfg))
		register(export.NewTasks(db, fileStore, exportCfg))
		register(importer.New(st, fileStore, importer.Config{Limits: importLimits, BatchSize: cfg.Import.BatchSize, ReportTTL: cfg.Import.ReportTTL}))

		concurrency := map[string]int{}
		for name, q := range cfg.Queues {
			concurrency[name] = q.Concurrency
		}
		cleaner := cleanup.New(cleanupCfg, st, enqueuer, fileStore, workerID, nil, logger)
		workers := jobs.NewWorkers(rdb, concurrency, cfg.Worker.ShutdownTimeout, cfg.Worker.PollInterval, logger)
		if err := workers.Start(rt, map[string]asynq.Handler{cleanup.Type: cleaner}); err != nil {
			return err
		}
		stopping = append(stopping, func() {
			workers.Stop()
			rt.Drain()
			workers.Shutdown()
			logger.Info("workers stopped")
		})
	}

	if roles.api {
		api := httpapi.New(httpapi.Deps{
			Store: st, Submitter: submitter, Enqueuer: enqueuer, Board: board, Files: fileStore, Tokens: cfg.Auth.Tokens,
			Logger: logger, QueryTimeout: cfg.Database.QueryTimeout,
			Import: httpapi.ImportLimits{MaxUploadBytes: cfg.Import.MaxUploadBytes, File: importLimits},
			Ready: func(ctx context.Context) map[string]error {
				return map[string]error{"postgres": store.Ping(ctx, db), "redis": rdb.Ping(ctx).Err()}
			},
		})
		ln, err := net.Listen("tcp", cfg.HTTP.Addr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", cfg.HTTP.Addr, err)
		}
		srv := &http.Server{Handler: api.Handler(profilingMount(api)), ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout, IdleTimeout: 2 * time.Minute}
		logger.Info("http listening", "addr", ln.Addr().String())
		wg.Go(func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("http server: %w", err)
			}
		})
		stopping = append(stopping, func() {
			sctx, cancel := context.WithTimeout(context.Background(), cfg.HTTP.ShutdownTimeout)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil {
				logger.Warn("http shutdown", "err", err)
			}
			logger.Info("http stopped")
		})
	}

	if roles.scheduler {
		// The scheduler gets its own connection: asynq's scheduler closes its client on
		// shutdown and complains about a shared one.
		scheduler := asynq.NewScheduler(cfg.Redis.ConnOpt(), &asynq.SchedulerOpts{
			Location: cleanupCfg.Location, Logger: jobs.AsynqLogger(logger.With("component", "scheduler")), LogLevel: asynq.WarnLevel,
		})
		if _, err := scheduler.Register(cfg.Cleanup.Spec, asynq.NewTask(cleanup.Type, nil),
			asynq.Queue(cfg.Cleanup.Queue), asynq.MaxRetry(0), asynq.Timeout(10*time.Minute)); err != nil {
			return fmt.Errorf("register cleanup schedule: %w", err)
		}
		if err := scheduler.Start(); err != nil {
			return fmt.Errorf("start scheduler: %w", err)
		}
		logger.Info("scheduler started", "cleanup_spec", cfg.Cleanup.Spec, "timezone", cfg.Cleanup.Timezone)
		stopping = append(stopping, func() {
			scheduler.Shutdown()
			logger.Info("scheduler stopped")
		})
	}

	var runErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case runErr = <-errs:
		logger.Error("a component failed; shutting down", "err", runErr)
	}
	// Stop every role at once: HTTP drains while workers finish their batches.
	var stopWG sync.WaitGroup
	for _, stop := range stopping {
		stopWG.Go(stop)
	}
	stopWG.Wait()
	wg.Wait()
	logger.Info("bye")
	return runErr
}

func cleanupConfig(cfg config.Config) (cleanup.Config, error) {
	schedule, err := cleanup.ParseSpec(cfg.Cleanup.Spec)
	if err != nil {
		return cleanup.Config{}, err
	}
	loc, err := time.LoadLocation(cfg.Cleanup.Timezone)
	if err != nil {
		return cleanup.Config{}, err
	}
	return cleanup.Config{
		Schedule: schedule, Location: loc, OrphanGrace: cfg.Cleanup.OrphanGrace, TakeoverAfter: cfg.Worker.TakeoverAfter,
		BatchSize: cfg.Cleanup.BatchSize, UploadTTL: cfg.Cleanup.UploadTTL, TempTTL: cfg.Cleanup.TempTTL, Retention: cfg.Cleanup.Retention,
	}, nil
}

// profilingMount serves Go's pprof profiles under /debug/pprof/ to admin tokens only.
func profilingMount(api *httpapi.Server) httpapi.Mount {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return httpapi.Mount{Pattern: "/debug/pprof/", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !api.AuthenticateAdmin(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="taskcenter"`)
			http.Error(w, "admin token required", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	})}
}

// logAlerter writes alerts to the log.
type logAlerter struct{ logger *slog.Logger }

func (a logAlerter) TaskFailed(ctx context.Context, al jobs.Alert) {
	a.logger.ErrorContext(ctx, "ALERT task failed after retries", "alert", "task_failed", "task_no", al.TaskNo,
		"type", al.Type, "owner", al.Owner, "attempts", al.Attempts, "message", al.Message)
}
