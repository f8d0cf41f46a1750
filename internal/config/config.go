// Package config loads taskcenter's configuration: built-in defaults, then a YAML file, then
// TASKCENTER_* environment variables, validated once at start-up.
package config

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/robfig/cron/v3"

	"github.com/taskcenter/taskcenter/internal/allowlist"
)

// Config is the whole configuration of a taskcenter process. Every field can be set in the
// YAML file and overridden by an environment variable named after its YAML path, upper-cased,
// with every non-alphanumeric character turned into '_' and prefixed TASKCENTER_; for example
// queues.exports.concurrency is TASKCENTER_QUEUES_EXPORTS_CONCURRENCY.
type Config struct {
	// typeEntries are the file's types: entries as written, and getenv the environment they
	// were loaded with: ResolveType overlays them on a type's declared defaults.
	typeEntries map[string]any
	getenv      func(string) string

	// DataDir holds uploads, results and temporary files. Default "./data". With
	// storage.backend s3 it holds only this node's scratch files.
	DataDir string `yaml:"data_dir"`
	// Storage is where the files the service keeps live: the data dir (local) or an S3
	// bucket shared by every node (s3).
	Storage Storage `yaml:"storage"`
	// HTTP configures the API listener.
	HTTP HTTP `yaml:"http"`
	// Database is the Postgres source of truth.
	Database Database `yaml:"database"`
	// Redis carries asynq's queues and the progress hashes.
	Redis Redis `yaml:"redis"`
	// Auth lists the bearer tokens the API accepts.
	Auth Auth `yaml:"auth"`
	// Worker tunes the job runtime shared by every task type.
	Worker Worker `yaml:"worker"`
	// Queues maps a queue name to its worker pool. Each queue gets its own asynq server.
	// Default: imports (2), exports (4), maintenance (1), bench (8). The file's entries are
	// merged into the defaults key by key, and within an entry field by field: a file that
	// lists one queue keeps the others, and a field it leaves out keeps its default.
	Queues map[string]Queue `yaml:"queues"`
	// Types maps a task type to its queue and policy. Merged into the defaults like Queues:
	// listing one type does not remove the others (use disabled: true for that), and every
	// field left out keeps its documented default.
	Types map[string]TaskType `yaml:"types"`
	// Export tunes the report exports.
	Export Export `yaml:"export"`
	// Import tunes spreadsheet imports.
	Import Import `yaml:"import"`
	// Cleanup tunes the scheduled maintenance round.
	Cleanup Cleanup `yaml:"cleanup"`
	// Alerts configures alert delivery and the backlog alert.
	Alerts Alerts `yaml:"alerts"`
	// Console configures the asynqmon console at /monitor/.
	Console Console `yaml:"console"`
	// Metrics configures where Prometheus metrics are served.
	Metrics Metrics `yaml:"metrics"`
	// Log selects the log format and level.
	Log Log `yaml:"log"`
	// Webhooks configures the signed completion webhooks users subscribe to.
	Webhooks Webhooks `yaml:"webhooks"`
	// Web configures the end-user page at / (sign-in, my tasks, live progress).
	Web Web `yaml:"web"`
	// Events bounds the live event streams (GET /api/v1/events, the page's progress).
	Events Events `yaml:"events"`
}

// Default returns the built-in defaults: a working one-box set-up.
func Default() Config {
	return Config{
		DataDir: "./data",
		Storage: Storage{Backend: "local", Endpoint: "127.0.0.1:7070", Bucket: "taskcenter", Region: "us-east-1", PathStyle: true,
			Presign: true, PresignTTL: 5 * time.Minute, PartSize: 16 << 20},
		HTTP: HTTP{
			Addr:              ":8080",
			ReadHeaderTimeout: 10 * time.Second,
			ShutdownTimeout:   20 * time.Second,
			BodyIdleTimeout:   30 * time.Second,
			BodyMinRate:       16 << 10,
			BodyRateWindow:    10 * time.Second,
		},
		Database: Database{
			URL:          "postgres://taskcenter:taskcenter@127.0.0.1:5432/taskcenter?sslmode=disable",
			MaxOpenConns: 40,
			QueryTimeout: 5 * time.Second,
		},
		Redis: Redis{Mode: "single", Addr: "127.0.0.1:6379"},
		Worker: Worker{
			HeartbeatInterval: 5 * time.Second,
			TakeoverAfter:     30 * time.Second,
			ProgressInterval:  500 * time.Millisecond,
			ShutdownTimeout:   25 * time.Second,
			PollInterval:      100 * time.Millisecond,
			BatchMax:          128,
			BatchWait:         2 * time.Millisecond,
		},
		Queues: map[string]Queue{
			"imports":     {Concurrency: 2, Priority: "strict"},
			"exports":     {Concurrency: 4, Priority: "strict"},
			"maintenance": {Concurrency: 1, Priority: "strict"},
			"bench":       {Concurrency: 8, Priority: "strict"},
		},
		Types: map[string]TaskType{
			"export:customers": defaultType("exports"),
			"export:tasks":     defaultType("exports"),
			"import:customers": defaultType("imports"),
			"bench:noop": {Queue: "bench", MaxRetry: 0, RetryBase: time.Second, Timeout: 5 * time.Minute, MaxRuntime: time.Minute,
				StallAfter: time.Minute, Priority: 5, Disabled: true},
		},
		Export: Export{PageSize: 2000, ResultTTL: 7 * 24 * time.Hour, MaxRows: 1_000_000},
		Import: Import{MaxUploadBytes: 100 << 20, MaxUncompressedBytes: 1 << 30, MaxRows: 1_000_000, BatchSize: 1000, MaxConcurrentUploads: 4,
			MaxEntries: 10_000, MaxCellChars: 32_767, MaxColumns: 16_384, MaxRowBytes: 8 << 20, MaxSharedStrings: 1 << 24,
			ReportTTL: 7 * 24 * time.Hour},
		Alerts:  Alerts{WebhookTimeout: 5 * time.Second, WebhookRetries: 3, BacklogThreshold: 500, BacklogFor: 5 * time.Minute},
		Console: Console{Enabled: true, ReadOnly: true, SessionTTL: 12 * time.Hour, LoginFailures: 5, LoginWindow: time.Minute},
		Metrics: Metrics{Addr: ":9091"},
		Webhooks: Webhooks{Timeout: 10 * time.Second, RetryBase: 10 * time.Second, RetryMax: time.Hour, MaxAge: 24 * time.Hour,
			Concurrency: 16, PerSubscription: 4, PollInterval: time.Second, Retention: 7 * 24 * time.Hour},
		Cleanup: Cleanup{Spec: "* * * * *", Timezone: "UTC", Queue: "maintenance", OrphanGrace: time.Minute, BatchSize: 500,
			UploadTTL: 24 * time.Hour, TempTTL: 6 * time.Hour, Retention: 30 * 24 * time.Hour, ArchiveRetention: 365 * 24 * time.Hour,
			ScheduleSync: 10 * time.Second},
		Auth: Auth{
			OIDC: OIDC{Scopes: []string{"openid", "profile", "email"}, Algorithms: slices.Clone(SignatureAlgorithms), Leeway: 30 * time.Second,
				JWKSRefreshInterval: 10 * time.Second, JWKSMaxAge: time.Hour, UserClaim: "sub", AdminClaim: "groups"},
			TrustedHeader: TrustedHeader{AdminValues: []string{"admin"}},
			APITokens:     APITokens{DefaultTTL: 90 * 24 * time.Hour, MaxTTL: 365 * 24 * time.Hour},
			Audit:         Audit{Retention: 365 * 24 * time.Hour, Log: true},
		},
		Log: Log{Format: "json", Level: "info"},
		Web: Web{Enabled: true, SessionTTL: 12 * time.Hour, LoginFailures: 5, LoginWindow: time.Minute},
		Events: Events{MaxStreamsPerUser: 20, KeepAlive: 15 * time.Second, PollInterval: 1500 * time.Millisecond, Retry: 3 * time.Second,
			Buffer: 256, WriteTimeout: 10 * time.Second},
	}
}

// Load reads defaults, then the YAML file at path (skipped when path is empty), then the
// environment through getenv, and validates the result.
func Load(path string, getenv func(string) string) (Config, error) {
	cfg := Default()
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return Config{}, fmt.Errorf("read config: %w", err)
		}
		if err := yaml.UnmarshalWithOptions(b, &cfg, yaml.Strict()); err != nil {
			return Config{}, fmt.Errorf("config file %s: %s", path, yaml.FormatError(err, false, true))
		}
		// Decoding a map replaces it whole; merge the file's entries into the defaults instead.
		if err := mergeMaps(&cfg, b); err != nil {
			return Config{}, fmt.Errorf("config file %s: %w", path, err)
		}
	}
	if err := applyEnv(&cfg, "TASKCENTER", getenv); err != nil {
		return Config{}, err
	}
	cfg.getenv = getenv
	cfg.fillTypeDefaults()
	cfg.Database.fillDefaults(cfg.Worker)
	if st := &cfg.Storage; st.Backend == "s3" && st.AccessKey == "" && st.SecretKey == "" && st.LocalEndpoint() {
		st.AccessKey, st.SecretKey = DevAccessKey, DevSecretKey
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Validate checks every field and cross-field rule, and reports all problems at once in
// words an operator can act on.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if c.DataDir == "" {
		bad("data_dir (TASKCENTER_DATA_DIR) must be set to a writable directory")
	}
	if _, err := allowlist.Parse(c.Webhooks.AllowedHosts); err != nil {
		bad("webhooks.allowed_hosts: %v (TASKCENTER_WEBHOOKS_ALLOWED_HOSTS)", err)
	}
	if w := c.Webhooks; w.Timeout <= 0 || w.RetryBase <= 0 || w.RetryMax < w.RetryBase || w.MaxAge < w.RetryBase || w.Concurrency < 1 ||
		w.PerSubscription < 1 || w.PollInterval <= 0 || w.Retention < w.MaxAge {
		bad("webhooks: timeout, retry_base and poll_interval must be positive, retry_max and max_age at least retry_base, concurrency and per_subscription at least 1, retention at least max_age")
	}
	if c.HTTP.Addr == "" {
		bad("http.addr (TASKCENTER_HTTP_ADDR) must be set, e.g. :8080")
	}
	c.Database.validate(c.Worker, bad)
	if c.HTTP.BodyIdleTimeout <= 0 || c.HTTP.BodyRateWindow <= 0 || c.HTTP.BodyMinRate < 0 {
		bad("http.body_idle_timeout and http.body_rate_window must be positive and http.body_min_rate 0 or more")
	}
	if c.Import.MaxConcurrentUploads < 1 {
		bad("import.max_concurrent_uploads must be at least 1, got %d", c.Import.MaxConcurrentUploads)
	}
	if c.Console.LoginFailures < 1 || c.Console.LoginWindow <= 0 {
		bad("console.login_failures must be at least 1 and console.login_window positive")
	}
	if w := c.Web; w.SessionTTL <= 0 || w.LoginFailures < 1 || w.LoginWindow <= 0 {
		bad("web.session_ttl and web.login_window must be positive and web.login_failures at least 1")
	}
	if k := c.Web.SessionKey; k != "" && len(k) < 32 {
		bad("web.session_key (TASKCENTER_WEB_SESSION_KEY) must be at least 32 characters, got %d", len(k))
	}
	if e := c.Events; e.MaxStreamsPerUser < 1 || e.Buffer < 1 || e.KeepAlive <= 0 || e.PollInterval <= 0 || e.Retry <= 0 || e.WriteTimeout <= 0 {
		bad("events: max_streams_per_user and buffer must be at least 1, keep_alive, poll_interval, retry and write_timeout positive")
	}
	c.validateStorage(bad)
	if c.Database.Pooler != "" && c.Database.Pooler != "pgbouncer" {
		bad("database.pooler must be empty (direct) or pgbouncer, got %q", c.Database.Pooler)
	}
	if c.Database.MigrateURL != "" {
		if u, err := url.Parse(c.Database.MigrateURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
			bad("database.migrate_url (TASKCENTER_DATABASE_MIGRATE_URL) must be a postgres:// URL")
		}
	}
	if c.Database.MaxOpenConns < 2 {
		bad("database.max_open_conns must be at least 2, got %d", c.Database.MaxOpenConns)
	}
	switch c.Redis.Mode {
	case "single":
		if c.Redis.Addr == "" {
			bad("redis.addr (TASKCENTER_REDIS_ADDR) must be host:port when redis.mode is single")
		}
	case "sentinel":
		if len(c.Redis.Addrs) == 0 || c.Redis.MasterName == "" {
			bad("redis.mode sentinel needs redis.addrs (the sentinels, TASKCENTER_REDIS_ADDRS=h1:26379,h2:26379) and redis.master_name")
		}
	case "cluster":
		if len(c.Redis.Addrs) == 0 {
			bad("redis.mode cluster needs redis.addrs (TASKCENTER_REDIS_ADDRS=h1:6379,h2:6379)")
		}
		if c.Redis.DB != 0 {
			bad("redis.db must be 0 in cluster mode")
		}
	default:
		bad("redis.mode (TASKCENTER_REDIS_MODE) must be single, sentinel or cluster, got %q", c.Redis.Mode)
	}
	if len(c.Auth.Tokens) == 0 && !c.Auth.OIDC.Enabled() && c.Auth.TrustedHeader.User == "" {
		bad("auth.tokens (TASKCENTER_AUTH_TOKENS=token:user:role,...) must list at least one token, unless auth.oidc.issuer or auth.trusted_header.user lets users in")
	}
	c.validateAuth(bad)
	seen := map[string]bool{}
	for i, t := range c.Auth.Tokens {
		hex, hashed := strings.CutPrefix(t.Token, "sha256:")
		switch {
		case hashed && !isHexSHA256(hex):
			bad("auth.tokens[%d] (user %q): a hashed token is sha256: and 64 hex digits (echo -n TOKEN | sha256sum)", i, t.User)
		case !hashed && len(t.Token) < 16:
			bad("auth.tokens[%d] (user %q): token must be at least 16 characters", i, t.User)
		case seen[t.Token]:
			bad("auth.tokens[%d] (user %q): the same token is listed twice", i, t.User)
		}
		seen[t.Token] = true
		if t.User == "" {
			bad("auth.tokens[%d]: user must be set", i)
		}
		if t.Role != RoleUser && t.Role != RoleAdmin {
			bad("auth.tokens[%d] (user %q): role must be user or admin, got %q", i, t.User, t.Role)
		}
	}
	w := c.Worker
	if w.HeartbeatInterval <= 0 {
		bad("worker.heartbeat_interval must be positive")
	} else if w.TakeoverAfter < 3*w.HeartbeatInterval {
		bad("worker.takeover_after (%s) must be at least 3× worker.heartbeat_interval (%s), or live tasks get taken over", w.TakeoverAfter, w.HeartbeatInterval)
	}
	if w.ProgressInterval <= 0 {
		bad("worker.progress_interval must be positive")
	}
	if w.ShutdownTimeout <= 0 {
		bad("worker.shutdown_timeout must be positive")
	}
	if w.BatchMax < 1 || w.BatchWait < 0 || w.BatchWait > time.Second {
		bad("worker.batch_max must be at least 1 and worker.batch_wait between 0 and 1s")
	}
	if w.PollInterval < 10*time.Millisecond {
		bad("worker.poll_interval must be at least 10ms, got %s", w.PollInterval)
	}
	if len(c.Queues) == 0 {
		bad("queues must define at least one queue")
	}
	for name, q := range c.Queues {
		if q.Concurrency < 1 {
			bad("queues.%s.concurrency must be at least 1, got %d", name, q.Concurrency)
		}
		if q.Priority != "strict" && q.Priority != "weighted" {
			bad("queues.%s.priority must be strict or weighted, got %q", name, q.Priority)
		}
		if q.MaxRunningPerOwner < 0 || q.MaxWaitingPerOwner < 0 {
			bad("queues.%s.max_running_per_owner and max_waiting_per_owner must be 0 (no cap) or positive", name)
		}
		if q.BacklogLimit < 0 {
			bad("queues.%s.backlog_limit must be 0 (no limit) or positive, got %d", name, q.BacklogLimit)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Types)) {
		t := c.Types[name]
		if _, ok := c.Queues[t.Queue]; !ok {
			bad("types.%s.queue %q is not defined under queues (have %s)", name, t.Queue, strings.Join(slices.Sorted(maps.Keys(c.Queues)), ", "))
		}
		if t.MaxRetry < 0 {
			bad("types.%s.max_retry must be 0 or more", name)
		}
		if t.Priority < 1 || t.Priority > 9 {
			bad("types.%s.priority must be from 1 (first) to 9 (last), got %d", name, t.Priority)
		}
		if !t.Disabled && t.Timeout <= w.TakeoverAfter {
			bad("types.%s.timeout (%s) must be longer than worker.takeover_after (%s)", name, t.Timeout, w.TakeoverAfter)
		}
		if t.StallAfter != 0 && t.StallAfter < 2*w.HeartbeatInterval {
			bad("types.%s.stall_after (%s) must be 0 (off) or at least 2× worker.heartbeat_interval (%s)", name, t.StallAfter, w.HeartbeatInterval)
		}
	}
	if c.Export.PageSize < 1 || c.Export.PageSize > 50_000 {
		bad("export.page_size must be between 1 and 50000, got %d", c.Export.PageSize)
	}
	if c.Export.ResultTTL <= 0 {
		bad("export.result_ttl must be positive, e.g. 168h")
	}
	if c.Export.MaxRows < 1 || c.Export.MaxRows > 1_048_575 {
		bad("export.max_rows must be between 1 and 1048575 (an .xlsx sheet's limit), got %d", c.Export.MaxRows)
	}
	im := c.Import
	if im.MaxUploadBytes < 1<<10 {
		bad("import.max_upload_bytes must be at least 1024, got %d", im.MaxUploadBytes)
	}
	if im.MaxUncompressedBytes < im.MaxUploadBytes {
		bad("import.max_uncompressed_bytes (%d) must be at least import.max_upload_bytes (%d)", im.MaxUncompressedBytes, im.MaxUploadBytes)
	}
	if im.MaxRows < 1 || im.MaxRows > 1_048_575 {
		bad("import.max_rows must be between 1 and 1048575 (an .xlsx sheet's limit), got %d", im.MaxRows)
	}
	if im.MaxEntries < 1 || im.MaxCellChars < 1 || im.MaxColumns < 1 || im.MaxColumns > 16_384 || im.MaxRowBytes < 1<<10 || im.MaxSharedStrings < 1 {
		bad("import.max_entries, max_cell_chars, max_shared_strings must be positive, max_columns 1..16384, max_row_bytes at least 1024")
	}
	if im.BatchSize < 1 || im.BatchSize > 10_000 {
		bad("import.batch_size must be between 1 and 10000, got %d", im.BatchSize)
	}
	if im.ReportTTL <= 0 {
		bad("import.report_ttl must be positive, e.g. 168h")
	}
	cl := c.Cleanup
	if _, err := cron.ParseStandard(cl.Spec); err != nil {
		bad("cleanup.spec (TASKCENTER_CLEANUP_SPEC) %q is not a cron spec such as \"* * * * *\" or \"@every 30s\": %v", cl.Spec, err)
	}
	if _, err := time.LoadLocation(cl.Timezone); err != nil {
		bad("cleanup.timezone %q is not a time zone such as UTC or Asia/Shanghai", cl.Timezone)
	}
	if _, ok := c.Queues[cl.Queue]; !ok {
		bad("cleanup.queue %q is not defined under queues", cl.Queue)
	}
	if cl.BatchSize < 1 {
		bad("cleanup.batch_size must be at least 1")
	}
	if cl.ScheduleSync < time.Second {
		bad("cleanup.schedule_sync must be at least 1s, got %s", cl.ScheduleSync)
	}
	if cl.OrphanGrace <= 0 || cl.UploadTTL <= 0 || cl.TempTTL <= 0 || cl.Retention <= 0 || cl.ArchiveRetention <= 0 {
		bad("cleanup.orphan_grace, upload_ttl, temp_ttl, retention and archive_retention must be positive durations")
	}
	if a := c.Alerts; a.WebhookURL != "" {
		if u, err := url.Parse(a.WebhookURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("alerts.webhook_url must be an http(s) URL")
		}
		if a.WebhookTimeout <= 0 || a.WebhookRetries < 0 || a.WebhookRetries > 10 {
			bad("alerts.webhook_timeout must be positive and alerts.webhook_retries between 0 and 10")
		}
	}
	if c.Alerts.BacklogThreshold < 0 || (c.Alerts.BacklogThreshold > 0 && c.Alerts.BacklogFor <= 0) {
		bad("alerts.backlog_threshold must be 0 (off) or positive, with a positive alerts.backlog_for")
	}
	if c.Console.Password != "" && c.Console.Username == "" {
		bad("console.username must be set when console.password is")
	}
	if c.Console.Password != "" && len(c.Console.Password) < 12 {
		bad("console.password must be at least 12 characters")
	}
	if c.Console.Enabled && c.Console.SessionTTL <= 0 {
		bad("console.session_ttl must be positive")
	}
	if c.Log.Format != "json" && c.Log.Format != "text" {
		bad("log.format must be json or text, got %q", c.Log.Format)
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.Log.Level) {
		bad("log.level must be debug, info, warn or error, got %q", c.Log.Level)
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid configuration:\n  - %w", joinLines(errs))
	}
	return nil
}

func joinLines(errs []error) error {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	slices.Sort(msgs)
	return errors.New(strings.Join(msgs, "\n  - "))
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}
