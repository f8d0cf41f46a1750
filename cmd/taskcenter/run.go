package main

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/httpapi"
	"github.com/taskcenter/taskcenter/httpapi/identity"
	"github.com/taskcenter/taskcenter/httpapi/live"
	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/httpapi/request"
	"github.com/taskcenter/taskcenter/internal/auth"
	"github.com/taskcenter/taskcenter/internal/batch"
	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/internal/every"
	"github.com/taskcenter/taskcenter/internal/linger"
	"github.com/taskcenter/taskcenter/internal/outage"
	"github.com/taskcenter/taskcenter/internal/sheet"
	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/cleanup"
	"github.com/taskcenter/taskcenter/jobs/export"
	"github.com/taskcenter/taskcenter/jobs/importer"
	"github.com/taskcenter/taskcenter/jobs/noop"
	"github.com/taskcenter/taskcenter/jobs/report"
	"github.com/taskcenter/taskcenter/jobs/schedule"
	"github.com/taskcenter/taskcenter/jobs/webhook"
	"github.com/taskcenter/taskcenter/monitor"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/pg"
)

const usage = `usage:
  taskcenter serve   [--config FILE] [--roles api,worker,scheduler|all]
  taskcenter migrate [--config FILE]
  taskcenter openapi   (prints the API's OpenAPI document, as served at /openapi.yaml)

The config file defaults to $TASKCENTER_CONFIG, else configs/taskcenter.yaml when present.
Every setting can be overridden by a TASKCENTER_* environment variable (see the README).`

// run is the whole program: main only adds signals and the exit code. Tests call it too.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	return runWith(ctx, args, getenv, stdout)
}

// TypeDeps are what a task type's declaration may use.
type TypeDeps struct {
	DB    *bun.DB
	Store *store.Store
	Files storage.Store
}

// TypeMaker declares a task type from the process's collaborators.
type TypeMaker func(TypeDeps) jobs.Type

// runWith is run with task types added beside the built-in ones: how a test adds a type of
// its own and runs it end to end.
func runWith(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, extra ...TypeMaker) error {
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
	case "openapi":
		_, err := stdout.Write(httpapi.OpenAPI())
		return err
	default:
		return fmt.Errorf("unknown command %q\n%s", cmd, usage)
	}
	cfg, err := config.Load(*configPath, getenv)
	if err != nil {
		return err
	}
	dataDir, _ := filepath.Abs(cfg.DataDir)
	logger := monitor.NewLogger(cfg.Log.Format, cfg.Log.Level, stdout, dataDir)
	if cmd == "migrate" {
		return migrate(ctx, cfg, logger)
	}
	r, err := parseRoles(*roles)
	if err != nil {
		return err
	}
	return serve(ctx, cfg, r, logger, extra)
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

func migrate(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	db, err := store.Open(cmp.Or(cfg.Database.MigrateURL, cfg.Database.URL), store.OpenOptions{MaxOpenConns: 2, Pooler: cfg.Database.MigrateURL == "" && cfg.Database.Pooler != ""})
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
		if !pg.IsUnavailable(err) {
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

// process is one running taskcenter: the shared connections and the roles it runs.
type process struct {
	cfg       config.Config
	logger    *slog.Logger
	workerID  string
	db        *bun.DB
	rdb       redis.UniversalClient
	st        *store.Store
	files     storage.Store
	enqueuer  *jobs.Enqueuer
	retry     *jobs.Reenqueuer // this process's failed enqueues, tried again every second
	board     *jobs.ProgressBoard
	submitter *jobs.Submitter
	creator   *jobs.Creator
	scripts   *jobs.ScriptPipeliner
	metrics   *monitor.Metrics
	alerter   *monitor.Alerter
	inspector *asynq.Inspector
	oidc      *auth.Provider // the company identity provider, with the api role; nil when off
	// Each dependency's availability, its own log lines and its own dependency label
	// (observe). idpDep and storeDep are nil when the process does not use them.
	redisDep *outage.Tracker
	pgDep    *outage.Tracker
	idpDep   *outage.Tracker
	storeDep *outage.Tracker
	policies map[string]jobs.TypePolicy
	// queues are the queues something runs in: an enabled type's, or the maintenance round's.
	// A queue only disabled types use gets no workers and no console lane.
	queues []string
	types  *jobs.Registry
	// extraTypes are task types added by whoever runs the program (tests), beside the built-in.
	extraTypes []TypeMaker
	imports    sheet.Limits
	cleanup    cleanup.Config

	// listeners are the addresses the process serves, bound before anything starts (bind).
	listeners map[string]net.Listener

	wg          sync.WaitGroup
	errs        chan error
	stopping    []func()
	scratchOnce sync.Once
}

func serve(ctx context.Context, cfg config.Config, roles roleSet, logger *slog.Logger, extra []TypeMaker) error {
	p := &process{cfg: cfg, workerID: cfg.Worker.ID, errs: make(chan error, 4), extraTypes: extra}
	if p.workerID == "" {
		host, _ := os.Hostname()
		p.workerID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	p.logger = logger.With("worker", p.workerID)
	p.logger.Info("starting taskcenter", "roles", roles.String())
	if err := p.bind(roles); err != nil {
		return err
	}
	defer p.closeListeners() // the ones never served: a start that failed half-way
	closeDB, err := p.openDatabase(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	rdb, ok := cfg.Redis.ConnOpt().MakeRedisClient().(redis.UniversalClient)
	if !ok {
		return errors.New("redis: unsupported connection options")
	}
	p.rdb = rdb
	defer rdb.Close()
	p.observe(roles)
	if p.files, err = openStorage(ctx, cfg, p.storeDep); err != nil {
		return err
	}
	p.logger.Info("storage ready", "backend", p.files.Backend(), "scratch", p.files.TempDir())
	if p.cleanup, err = cleanupConfig(cfg); err != nil {
		return err
	}
	if err := p.wire(); err != nil {
		return err
	}
	defer p.scripts.Stop()  // after every role has stopped enqueuing
	defer p.board.Close()   // after every role has stopped: publishes what is queued
	defer p.creator.Close() // after every role has stopped submitting
	defer p.alerter.Close(5 * time.Second)
	p.startProbes(ctx)
	if err := p.startRoles(roles); err != nil {
		// Stop what did start before the deferred closes pull Redis and Postgres from under it.
		p.stop()
		return err
	}
	return p.runUntilStopped(ctx)
}

// bind listens on every address the process serves — the API's with the api role, the
// metrics address when set — before anything else starts: a port that is taken is a
// configuration error, reported at once ("http.addr (TASKCENTER_HTTP_ADDR): listen tcp
// 127.0.0.1:8080: bind: address already in use") rather than after the database wait, and
// with no worker or scheduler started that would have to be stopped again. Connections that
// arrive before the process serves wait in the listen backlog.
func (p *process) bind(roles roleSet) error {
	p.listeners = map[string]net.Listener{}
	for _, l := range []struct {
		name, key, env, addr string
		on                   bool
	}{
		{"http", "http.addr", "TASKCENTER_HTTP_ADDR", p.cfg.HTTP.Addr, roles.api},
		{"metrics", "metrics.addr", "TASKCENTER_METRICS_ADDR", p.cfg.Metrics.Addr, p.cfg.Metrics.Addr != ""},
	} {
		if !l.on {
			continue
		}
		ln, err := net.Listen("tcp", l.addr)
		if err != nil {
			p.closeListeners()
			return fmt.Errorf("%s (%s): %w", l.key, l.env, err)
		}
		p.listeners[l.name] = ln
	}
	return nil
}

// closeListeners closes the listeners no server took over.
func (p *process) closeListeners() {
	for name, ln := range p.listeners {
		ln.Close()
		delete(p.listeners, name)
	}
}

// openDatabase opens the task database's pool, migrates the schema through a pool of its
// own, and checks the session limits reached the server; it returns what closes the pool.
func (p *process) openDatabase(ctx context.Context) (func(), error) {
	cfg := p.cfg
	dbOpts := store.OpenOptions{MaxOpenConns: cfg.Database.MaxOpenConns, Pooler: cfg.Database.Pooler != "",
		IdleInTransactionTimeout: cfg.Database.IdleInTransactionTimeout, LockTimeout: cfg.Database.LockTimeout}
	db, err := store.Open(cfg.Database.URL, dbOpts)
	if err != nil {
		return nil, err
	}
	p.db = db
	// Migrations get a pool of their own without the session limits: replicas starting
	// together queue on the migration lock, and a migration may wait for a table lock, longer
	// than a lock_timeout meant for task rows allows.
	migrateDB, err := store.Open(cmp.Or(cfg.Database.MigrateURL, cfg.Database.URL),
		store.OpenOptions{MaxOpenConns: 2, Pooler: cfg.Database.MigrateURL == "" && cfg.Database.Pooler != ""})
	if err != nil {
		db.Close()
		return nil, err
	}
	defer migrateDB.Close()
	if err := waitForDatabase(ctx, migrateDB, p.logger); err != nil {
		db.Close()
		return nil, fmt.Errorf("prepare database: %w", err)
	}
	lctx, cancel := context.WithTimeout(ctx, cfg.Database.QueryTimeout)
	err = store.CheckSessionLimits(lctx, db, dbOpts)
	cancel()
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("database session limits: %w", err)
	}
	return func() { db.Close() }, nil
}

// observe makes the metrics and a tracker for each dependency the process uses, before
// anything reports to them: Redis and Postgres always, the object store on s3, the identity
// provider with the api role when it is configured (which also makes the provider).
func (p *process) observe(roles roleSet) {
	cfg := p.cfg
	p.st = store.New(p.db)
	p.inspector = asynq.NewInspectorFromRedisClient(p.rdb)
	var lanes []string
	for _, q := range slices.Sorted(maps.Keys(cfg.Queues)) {
		lanes = append(lanes, jobs.Lanes(q)...)
	}
	p.metrics = monitor.NewMetrics(p.inspector, lanes, p.st)
	p.redisDep = outage.New("redis", p.logger, p.metrics)
	p.pgDep = outage.New("postgres", p.logger, p.metrics)
	if cfg.Storage.Backend == storage.BackendS3 {
		p.storeDep = outage.New("object_store", p.logger, p.metrics)
	}
	if o := cfg.Auth.OIDC; roles.api && o.Enabled() {
		p.idpDep = outage.New("identity_provider", p.logger, p.metrics)
		p.oidc = auth.NewProvider(auth.OIDCConfig{Issuer: o.Issuer, Audience: o.Audience, ClientID: o.ClientID,
			ClientSecret: o.ClientSecret, RedirectURL: o.RedirectURL, Scopes: o.Scopes, JWKSURL: o.JWKSURL, JWKSFile: o.JWKSFile,
			Algorithms: o.Algorithms, Leeway: o.Leeway, JWKSRefreshInterval: o.JWKSRefreshInterval, JWKSMaxAge: o.JWKSMaxAge,
			UserClaim: o.UserClaim, AdminClaim: o.AdminClaim, AdminValues: o.AdminValues, Name: o.Name, MapSubjects: o.MapSubjects,
			Health: p.idpDep})
	}
}

// dependency is t as a jobs.Dependency: nil (not a nil *Tracker) when the process does not
// use the dependency.
func dependency(t *outage.Tracker) jobs.Dependency {
	if t == nil {
		return nil
	}
	return t
}

// startProbes follows each dependency for its outage tracker until the process stops: what
// notices an outage, and its end, when no call is made. Redis and Postgres every second; the
// object store and the identity provider, which are shared with others and asked for more
// each time, every 5 and 10 seconds. The object store's probe only makes a request: every
// request to the S3 service reports to its tracker on its own (openStorage).
func (p *process) startProbes(ctx context.Context) {
	probeCtx, stopProbes := context.WithCancel(context.WithoutCancel(ctx))
	p.wg.Go(func() {
		p.redisDep.Probe(probeCtx, time.Second, func(ctx context.Context) error { return p.rdb.Ping(ctx).Err() })
	})
	p.wg.Go(func() {
		p.pgDep.Probe(probeCtx, time.Second, func(ctx context.Context) error { return store.Ping(ctx, p.db) })
	})
	if p.storeDep != nil {
		p.wg.Go(func() {
			every.Run(probeCtx, 5*time.Second, func(ctx context.Context) {
				pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				p.files.Ping(pctx) //nolint:errcheck // reported by the store's requests
				cancel()
			})
		})
	}
	if p.idpDep != nil {
		p.wg.Go(func() { p.idpDep.Probe(probeCtx, 10*time.Second, p.oidc.Ping) })
	}
	p.stopping = append(p.stopping, stopProbes)
}

// startRoles starts the workers, the API (or, without it, metrics alone) and the scheduler
// the process runs, and the Reenqueuer that retries their failed enqueues.
func (p *process) startRoles(roles roleSet) error {
	retryCtx, stopRetry := context.WithCancel(context.Background())
	p.wg.Go(func() { p.retry.Run(retryCtx) })
	p.stopping = append(p.stopping, stopRetry)
	if roles.worker {
		if err := p.startWorkers(); err != nil {
			return err
		}
	}
	if roles.api {
		if err := p.startAPI(); err != nil {
			return err
		}
	}
	if p.cfg.Metrics.Addr != "" {
		p.serveOn("metrics", p.metricsOnly())
	}
	if roles.scheduler {
		return p.startScheduler()
	}
	return nil
}

// runUntilStopped waits for a shutdown or a component's failure, then stops every role at
// once (HTTP drains while workers finish their batches) and waits for them.
func (p *process) runUntilStopped(ctx context.Context) error {
	var runErr error
	select {
	case <-ctx.Done():
		p.logger.Info("shutting down")
	case runErr = <-p.errs:
		p.logger.Error("a component failed; shutting down", "err", runErr)
	}
	p.stop()
	p.logger.Info("bye")
	return runErr
}

// stop stops every role that started, at once, and waits for them.
func (p *process) stop() {
	var stopWG sync.WaitGroup
	for _, stop := range p.stopping {
		stopWG.Go(stop)
	}
	stopWG.Wait()
	p.wg.Wait()
}

// wire builds what every role shares: the asynq client, progress board, submitter and alerts
// (the store and the metrics are observe's).
func (p *process) wire() error {
	cfg := p.cfg
	// asynq enqueues a job with one Lua script call; concurrent enqueues share a pipeline.
	p.scripts = jobs.NewScriptPipeliner(p.rdb)
	client := asynq.NewClientFromRedisClient(p.scripts)
	p.imports = sheet.Limits{MaxUncompressed: cfg.Import.MaxUncompressedBytes, MaxEntries: cfg.Import.MaxEntries, MaxRows: cfg.Import.MaxRows,
		MaxCellChars: cfg.Import.MaxCellChars, MaxColumns: cfg.Import.MaxColumns, MaxRowBytes: cfg.Import.MaxRowBytes,
		MaxSharedStrings: cfg.Import.MaxSharedStrings}
	p.registerTypes()
	var names []string
	for _, t := range p.types.All() {
		names = append(names, t.Name)
	}
	if unknown := cfg.UnknownTypes(names); len(unknown) > 0 {
		return fmt.Errorf("the config sets types this build does not know: %s (known: %s)", strings.Join(unknown, ", "), strings.Join(names, ", "))
	}
	runtimes := map[string]time.Duration{}
	submitTypes := map[string]jobs.SubmitPolicy{}
	p.policies = map[string]jobs.TypePolicy{}
	served := map[string]bool{cfg.Cleanup.Queue: true}
	for _, typ := range p.types.All() {
		pol := typ.Policy
		t, err := cfg.ResolveType(typ.Name, config.TaskType{Queue: typ.Queue, MaxRetry: pol.MaxRetry, RetryBase: pol.RetryBase,
			Timeout: pol.Timeout, MaxRuntime: pol.MaxRuntime, StallAfter: pol.StallAfter, Priority: typ.Priority, Disabled: typ.Disabled})
		if err != nil {
			return err
		}
		if t.Disabled {
			continue
		}
		name := typ.Name
		served[t.Queue] = true
		runtimes[name] = t.MaxRuntime
		q := cfg.Queues[t.Queue]
		submitTypes[name] = jobs.SubmitPolicy{Queue: t.Queue, MaxRetry: t.MaxRetry, TimeoutSeconds: int(t.Timeout.Seconds()), Priority: t.Priority,
			RetryBase: t.RetryBase, MaxRuntime: t.MaxRuntime, StallAfter: t.StallAfter, MaxWaitingPerOwner: q.MaxWaitingPerOwner}
		p.policies[name] = jobs.TypePolicy{MaxRetry: t.MaxRetry, RetryBase: t.RetryBase, MaxRuntime: t.MaxRuntime, StallAfter: t.StallAfter,
			MaxRunningPerOwner: q.MaxRunningPerOwner}
	}
	queues := slices.Sorted(maps.Keys(served))
	p.queues = queues
	p.alerter = monitor.NewAlerter(monitor.AlertConfig{WebhookURL: cfg.Alerts.WebhookURL, WebhookTimeout: cfg.Alerts.WebhookTimeout,
		WebhookRetries: cfg.Alerts.WebhookRetries}, p.metrics, p.logger)
	p.enqueuer = jobs.NewEnqueuer(client, p.inspector, runtimes)
	p.board = jobs.NewProgressBoard(p.rdb)
	limits := map[string]int{}
	for name, q := range cfg.Queues {
		limits[name] = q.BacklogLimit
	}
	// Concurrent single submits share one insert statement and one commit.
	// A submit never waits for company: it goes with whatever is queued behind the flush in
	// flight, so grouping costs no latency.
	p.creator = jobs.NewCreator(p.st, batch.Config{MaxBatch: cfg.Worker.BatchMax, Observer: p.metrics.Writes("submit")}, p.logger)
	p.retry = jobs.NewReenqueuer(p.st, p.enqueuer, jobs.ReenqueueInterval, p.logger)
	p.submitter = jobs.NewSubmitter(p.st, p.enqueuer, submitTypes, limits, p.metrics, p.logger, p.redisDep).
		WithBoard(p.board).WithCreator(p.creator).WithReenqueuer(p.retry).WithNotifyPayload(webhook.BuildPayload)
	p.cleanup.Queues = queues
	return nil
}

// registerTypes declares every task type this build knows. Adding a type is one file that
// declares its jobs.Type and one line here (README "Adding a task type").
func (p *process) registerTypes() {
	cfg := p.cfg
	p.types = jobs.NewRegistry()
	exportCfg := export.Config{PageSize: cfg.Export.PageSize, ResultTTL: cfg.Export.ResultTTL, MaxRows: cfg.Export.MaxRows}
	p.types.Register(export.CustomersTaskType(p.db, p.files, exportCfg))
	p.types.Register(export.TasksTaskType(p.db, p.files, exportCfg))
	importCfg := importer.Config{Limits: p.imports, BatchSize: cfg.Import.BatchSize, ReportTTL: cfg.Import.ReportTTL}
	p.types.Register(importer.TaskType(p.st, p.files, importCfg))
	p.types.Register(importer.UndoTaskType(p.st, p.files, importCfg))
	p.types.Register(report.CustomerStatsTaskType(p.db, p.files, report.Config{ResultTTL: cfg.Export.ResultTTL}))
	p.types.Register(noop.TaskType())
	for _, extra := range p.extraTypes {
		p.types.Register(extra(TypeDeps{DB: p.db, Store: p.st, Files: p.files}))
	}
}

// startWorkers registers every task type and starts one asynq server per queue.
func (p *process) startWorkers() error {
	cfg := p.cfg
	var claims *jobs.ClaimBatcher
	var completer *jobs.Completer
	if cfg.Worker.BatchMax > 1 {
		batch := func(kind string) batch.Config {
			return batch.Config{MaxBatch: cfg.Worker.BatchMax, MaxWait: cfg.Worker.BatchWait, Observer: p.metrics.Writes(kind)}
		}
		claims = jobs.NewClaimBatcher(p.st, p.workerID, cfg.Worker.TakeoverAfter, batch("claim"))
		completer = jobs.NewCompleter(p.st, batch("end"), p.logger)
	}
	rt := jobs.NewRuntime(jobs.RuntimeConfig{
		WorkerID: p.workerID, HeartbeatInterval: cfg.Worker.HeartbeatInterval, TakeoverAfter: cfg.Worker.TakeoverAfter,
		ProgressInterval: cfg.Worker.ProgressInterval, Types: p.policies,
	}, jobs.RuntimeDeps{Store: p.st, Enqueuer: p.enqueuer, Board: p.board, Files: p.files, Alerter: p.alerter, Observer: p.metrics, Logger: p.logger,
		Claims: claims, Completer: completer, Reenqueuer: p.retry})
	for _, t := range p.types.All() {
		if _, on := p.policies[t.Name]; on && t.Handler != nil {
			rt.Register(t.Handler)
		}
	}

	concurrency := map[string]jobs.QueueConfig{}
	for _, name := range p.queues {
		q := cfg.Queues[name]
		concurrency[name] = jobs.QueueConfig{Concurrency: q.Concurrency, StrictPriority: q.Priority != "weighted"}
	}
	cleaner := cleanup.New(p.cleanup, p.workerID, cleanup.Deps{Store: p.st, Enqueuer: p.enqueuer, Files: p.files,
		Observer: p.metrics, Alerter: p.alerter, TaskAlerter: p.alerter, Board: p.board, Logger: p.logger})
	p.sweepScratch(cleaner)
	workers := jobs.NewWorkers(p.scripts, concurrency, cfg.Worker.ShutdownTimeout, cfg.Worker.PollInterval, p.logger, p.redisDep)
	firer := schedule.NewFirer(p.st, p.submitter, p.types, cfg.Schedules, p.logger)
	if err := workers.Start(rt, map[string]asynq.Handler{cleanup.Type: cleaner, schedule.FireType: firer}); err != nil {
		return err
	}
	// Webhooks: fan the outbox out and deliver (webhooks.*; with no allowed_hosts, no URL is
	// allowed).
	hookPolicy, _ := webhook.NewPolicy(cfg.Webhooks.AllowedHosts) // validated with the config
	hooks := webhook.New(webhook.Config{PollInterval: cfg.Webhooks.PollInterval, Concurrency: cfg.Webhooks.Concurrency,
		PerSubscription: cfg.Webhooks.PerSubscription, Timeout: cfg.Webhooks.Timeout, RetryBase: cfg.Webhooks.RetryBase,
		RetryMax: cfg.Webhooks.RetryMax, MaxAge: cfg.Webhooks.MaxAge, Retention: cfg.Webhooks.Retention}, webhook.Deps{Store: p.st, Policy: hookPolicy, Alerter: p.alerter, Logger: p.logger,
		Observer: p.metrics})
	hooks.Start()
	p.stopping = append(p.stopping, hooks.Stop)
	p.stopping = append(p.stopping, func() {
		workers.Stop()
		rt.Drain()
		workers.Shutdown()
		// asynq stops waiting for handlers after its shutdown timeout; the attempts' terminal
		// writes (a hand-back, a result) still get a bounded moment to commit.
		if !rt.Wait(15 * time.Second) {
			p.logger.Warn("some attempts had not recorded how they ended at exit; they will be taken over")
		}
		rt.Close()
		if claims != nil {
			claims.Close()
			completer.Close()
		}
		p.logger.Info("workers stopped")
	})
	return nil
}

// startAPI serves the REST API, /metrics, the console and pprof on the API address.
func (p *process) startAPI() error {
	cfg := p.cfg
	// Error reports rendered in another language for one download live in scratch.
	p.sweepScratch(nil)
	hookPolicy, _ := webhook.NewPolicy(cfg.Webhooks.AllowedHosts) // validated with the config
	// Identity: the company identity provider (made with its tracker, observe), the trusted
	// gateway, API tokens, audit.
	th := cfg.Auth.TrustedHeader
	gateway, _ := auth.NewGateway(th.User, th.Role, th.AdminValues, th.Proxies) // validated with the config
	gateway.WithSubjects(th.MapSubjects)
	authDeps := httpapi.AuthDeps{Gateway: gateway, Throttle: cfg.Auth.Throttle, TokenDefaultTTL: cfg.Auth.APITokens.DefaultTTL, TokenMaxTTL: cfg.Auth.APITokens.MaxTTL,
		AuditLog: cfg.Auth.Audit.Log, OIDC: p.oidc}
	api := httpapi.New(httpapi.Deps{
		Auth: authDeps, Schedules: cfg.Schedules,
		Types: p.types, Uploads: importer.NewUploads(importer.UploadsDeps{Store: p.st, Files: p.files, Limits: p.imports,
			Submitter: p.submitter, Notifications: hookPolicy, QueryTimeout: cfg.Database.QueryTimeout}), Store: p.st, Submitter: p.submitter, Board: p.board, Files: p.files, Tokens: cfg.Auth.Tokens,
		Logger: p.logger, QueryTimeout: cfg.Database.QueryTimeout, Observe: p.metrics.ObserveHTTP, Webhooks: hookPolicy,
		Postgres: dependency(p.pgDep), IdentityProvider: dependency(p.idpDep), ObjectStore: dependency(p.storeDep),
		Import: httpapi.ImportLimits{MaxUploadBytes: cfg.Import.MaxUploadBytes, File: p.imports, MaxConcurrentUploads: cfg.Import.MaxConcurrentUploads,
			UndoTTL: cfg.Import.UndoTTL},
		Body: request.BodyLimits{IdleTimeout: cfg.HTTP.BodyIdleTimeout, MinRate: cfg.HTTP.BodyMinRate, RateWindow: cfg.HTTP.BodyRateWindow},
		Ready: func(ctx context.Context) map[string]error {
			return map[string]error{"postgres": store.Ping(ctx, p.db), "redis": p.rdb.Ping(ctx).Err(), "storage": p.files.Ping(ctx)}
		},
		// Live event streams and the web page.
		Redis: p.rdb,
		Web: httpapi.WebConfig{Disabled: !cfg.Web.Enabled, SessionTTL: cfg.Web.SessionTTL, LoginFailures: cfg.Web.LoginFailures,
			LoginWindow: cfg.Web.LoginWindow, SessionKey: []byte(cfg.Web.SessionKey), ConsoleLink: map[bool]string{false: "-"}[cfg.Console.Enabled]},
		Events: live.Limits{MaxPerUser: cfg.Events.MaxStreamsPerUser, KeepAlive: cfg.Events.KeepAlive, Poll: cfg.Events.PollInterval,
			Retry: cfg.Events.Retry, Buffer: cfg.Events.Buffer, WriteTimeout: cfg.Events.WriteTimeout},
	})
	p.stopping = append(p.stopping, api.Close) // ends the streams, so the HTTP drain does not wait for them
	mounts := []httpapi.Mount{profilingMount(api.Identity())}
	if cfg.Metrics.Token != "" {
		mounts = append(mounts, httpapi.Mount{Pattern: "GET /metrics", Handler: bearerOnly(cfg.Metrics.Token, p.metrics.Handler())})
	}
	if cfg.Console.Enabled {
		adminUsers := map[string]string{}
		for _, t := range cfg.Auth.Tokens {
			if t.Role == config.RoleAdmin {
				adminUsers[t.Token] = t.User
			}
		}
		console := monitor.NewConsole(cfg.Redis.ConnOpt(), monitor.ConsoleConfig{Username: cfg.Console.Username,
			Password: cfg.Console.Password, ReadOnly: cfg.Console.ReadOnly, AdminTokens: cfg.AdminTokens(), AdminUsers: adminUsers,
			SessionTTL: cfg.Console.SessionTTL, LoginFailures: cfg.Console.LoginFailures, LoginWindow: cfg.Console.LoginWindow,
			Tasks: p.st, Logger: p.logger, Web: api.Identity(), Page: api.ConsoleLoginPage(), Audit: p.st, Gateway: gateway, ThrottleKey: api.Identity().ThrottleKey()})
		mounts = append(mounts, httpapi.Mount{Pattern: monitor.ConsolePath + "/", Handler: console.Handler()})
		p.stopping = append(p.stopping, func() {
			if err := console.Close(); err != nil {
				p.logger.Warn("close console", "err", err)
			}
		})
	}
	p.serveOn("http", api.Handler(mounts...))
	return nil
}

// sweepScratch sweeps this node's scratch dir while the process runs (once per process,
// whichever role asks first): scratch is never shared, so the cleanup round, which runs on
// one node per slot, cannot sweep it for the others.
func (p *process) sweepScratch(c *cleanup.Cleaner) {
	p.scratchOnce.Do(func() {
		if c == nil {
			c = cleanup.New(p.cleanup, p.workerID, cleanup.Deps{Store: p.st, Files: p.files, Logger: p.logger})
		}
		sw := cleanup.NewScratchSweeper(c, cleanup.ScratchInterval(p.cleanup.TempTTL))
		sw.Start()
		p.stopping = append(p.stopping, sw.Stop)
	})
}

// openStorage opens the configured store: the data dir, or the S3 bucket (checked: the
// endpoint answers, the credentials work, the bucket exists or is created), whose every
// request is reported to health (nil: none). Scratch files live under the data dir either way.
func openStorage(ctx context.Context, cfg config.Config, health *outage.Tracker) (storage.Store, error) {
	st := cfg.Storage
	sc := storage.Config{Backend: st.Backend, Endpoint: st.Endpoint, Bucket: st.Bucket, Region: st.Region,
		AccessKey: st.AccessKey, SecretKey: st.SecretKey, PathStyle: st.PathStyle, TLS: st.TLS, Presign: st.Presign,
		PresignTTL: st.PresignTTL, PresignEndpoint: st.PresignEndpoint, CreateBucket: st.CreateBucket, PartSize: st.PartSize}
	if health != nil {
		sc.Health = health
	}
	return storage.New(ctx, sc, cfg.DataDir)
}

// bearerOnly serves h to requests bearing token, 401 to the rest.
func bearerOnly(token string, h http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="taskcenter metrics"`)
			problem.New(http.StatusUnauthorized, "unauthorized", "send the metrics token: Authorization: Bearer <metrics.token>").Write(w)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// metricsOnly serves /metrics and /healthz on the metrics address, in every process.
func (p *process) metricsOnly() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", p.metrics.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, `{"status":"ok"}`) })
	return mux
}

// serveOn serves h on the listener bind made for name until shutdown, draining in-flight
// requests.
func (p *process) serveOn(name string, h http.Handler) {
	// Every address answers an oversized request head with 431, and lingers after its last
	// answer so a client still sending reads it instead of a reset (internal/linger).
	ln := linger.Listen(p.listeners[name], linger.Config{})
	delete(p.listeners, name) // the server closes it from now on
	srv := &http.Server{Handler: h, ReadHeaderTimeout: p.cfg.HTTP.ReadHeaderTimeout, MaxHeaderBytes: p.cfg.HTTP.MaxHeaderBytes,
		IdleTimeout: 2 * time.Minute}
	p.logger.Info(name+" listening", "addr", ln.Addr().String())
	p.wg.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.errs <- fmt.Errorf("%s server: %w", name, err)
		}
	})
	p.stopping = append(p.stopping, func() {
		sctx, cancel := context.WithTimeout(context.Background(), p.cfg.HTTP.ShutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			p.logger.Warn(name+" shutdown", "err", err)
		}
		p.logger.Info(name + " stopped")
	})
}

// startScheduler runs asynq's periodic task manager over the provider of periodic work: the
// cleanup round and the users' schedules, re-read from Postgres every sync interval.
func (p *process) startScheduler() error {
	cfg := p.cfg
	provider := schedule.NewProvider(p.st, schedule.Cleanup{Spec: cfg.Cleanup.Spec, Timezone: cfg.Cleanup.Timezone, Queue: cfg.Cleanup.Queue},
		cfg.Cleanup.Queue, p.logger)
	// The scheduler gets its own connection: asynq's scheduler closes its client on
	// shutdown and complains about a shared one.
	mgr, err := asynq.NewPeriodicTaskManager(asynq.PeriodicTaskManagerOpts{
		PeriodicTaskConfigProvider: provider, RedisConnOpt: cfg.Redis.ConnOpt(), SyncInterval: cfg.Cleanup.ScheduleSync,
		SchedulerOpts: &asynq.SchedulerOpts{Location: p.cleanup.Location,
			Logger: jobs.AsynqLogger(p.logger.With("component", "scheduler"), p.redisDep), LogLevel: asynq.WarnLevel},
	})
	if err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	if err := mgr.Start(); err != nil {
		return fmt.Errorf("start scheduler: %w", err)
	}
	p.logger.Info("scheduler started", "cleanup_spec", cfg.Cleanup.Spec, "timezone", cfg.Cleanup.Timezone, "schedule_sync", cfg.Cleanup.ScheduleSync)
	p.stopping = append(p.stopping, func() {
		mgr.Shutdown()
		p.logger.Info("scheduler stopped")
	})
	return nil
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
		BatchSize: cfg.Cleanup.BatchSize, UploadTTL: cfg.Cleanup.UploadTTL, TempTTL: cfg.Cleanup.TempTTL, Retention: cfg.Cleanup.Retention, ArchiveRetention: cfg.Cleanup.ArchiveRetention,
		BacklogThreshold: cfg.Alerts.BacklogThreshold, BacklogFor: cfg.Alerts.BacklogFor, AuditRetention: cfg.Auth.Audit.Retention,
		UndoTTL: cfg.Import.UndoTTL,
	}, nil
}

// profilingMount serves Go's pprof profiles under /debug/pprof/ to admin tokens only.
func profilingMount(id *identity.Service) httpapi.Mount {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return httpapi.Mount{Pattern: "/debug/pprof/", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !id.AuthenticateAdmin(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="taskcenter"`)
			http.Error(w, "admin token required", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	})}
}
