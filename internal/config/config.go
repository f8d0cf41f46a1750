// Package config loads taskcenter's configuration: built-in defaults, then a YAML file, then
// TASKCENTER_* environment variables, validated once at start-up.
package config

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/hibiken/asynq"
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

// Web configures the end-user page served at / by API processes.
type Web struct {
	// Enabled serves the page and its cookie sessions; the API is the same either way.
	// Default true.
	Enabled bool `yaml:"enabled"`
	// SessionTTL is how long a sign-in lasts at most. Default 12h.
	SessionTTL time.Duration `yaml:"session_ttl"`
	// LoginFailures is how many failed sign-ins one client address may make per LoginWindow;
	// further attempts answer 429 until the window ends. Default 5.
	LoginFailures int `yaml:"login_failures"`
	// LoginWindow is the span LoginFailures counts over. Default 1m.
	LoginWindow time.Duration `yaml:"login_window"`
	// SessionKey signs the session cookies; every API replica needs the same one. Default:
	// derived from auth.tokens, so replicas with the same config agree and changing the
	// tokens signs everyone out. Set it (at least 32 characters) to keep sessions across
	// token rotations.
	SessionKey string `yaml:"session_key"`
}

// Events bounds the server-sent event streams of one API process.
type Events struct {
	// MaxStreamsPerUser is how many streams one user may hold open on one API process; more
	// answer 429. Default 20 (a browser keeps about one per open page).
	MaxStreamsPerUser int `yaml:"max_streams_per_user"`
	// KeepAlive is how often an idle stream sends a comment line, so proxies keep it open.
	// Default 15s.
	KeepAlive time.Duration `yaml:"keep_alive"`
	// PollInterval is how often the outbox is read without a pub/sub wake-up: a lost wake-up
	// only delays an event by this much. Default 1.5s.
	PollInterval time.Duration `yaml:"poll_interval"`
	// Retry is the reconnect delay suggested to clients. Default 3s.
	Retry time.Duration `yaml:"retry"`
	// Buffer is how many undelivered events a stream may have queued; a stream further behind
	// is closed and the client resumes from Last-Event-ID. Default 256.
	Buffer int `yaml:"buffer"`
	// WriteTimeout drops a client that stops reading. Default 10s.
	WriteTimeout time.Duration `yaml:"write_timeout"`
}

// Webhooks configures webhook delivery (jobs/webhook). Every delivery is retried with
// exponential back-off and jitter until the receiver answers 2xx or MaxAge has passed.
type Webhooks struct {
	// AllowedHosts lists where webhooks may be sent: host names (hooks.example.com),
	// wildcards (*.example.com, its subdomains), addresses (203.0.113.7) or ranges
	// (10.20.0.0/16). Loopback, private and link-local addresses are refused unless an
	// address or range entry covers them. In the environment: comma-separated. Default none:
	// no subscription can be created until an admin lists hosts.
	AllowedHosts []string `yaml:"allowed_hosts"`
	// Timeout bounds one delivery attempt. Default 10s.
	Timeout time.Duration `yaml:"timeout"`
	// RetryBase is the first retry delay; each later one doubles (±20% jitter). Default 10s.
	RetryBase time.Duration `yaml:"retry_base"`
	// RetryMax caps one retry delay. Default 1h.
	RetryMax time.Duration `yaml:"retry_max"`
	// MaxAge is how long a delivery is retried before it is dead and an alert is raised.
	// Default 24h.
	MaxAge time.Duration `yaml:"max_age"`
	// Concurrency caps the attempts in flight in one worker process. Default 16.
	Concurrency int `yaml:"concurrency"`
	// PerSubscription caps one subscription's attempts in flight, so a slow receiver holds
	// back only its own deliveries. Default 4.
	PerSubscription int `yaml:"per_subscription"`
	// PollInterval is how often new events and due deliveries are looked for. Default 1s.
	PollInterval time.Duration `yaml:"poll_interval"`
	// Retention is how long finished deliveries and their attempts stay listed. Default 168h.
	Retention time.Duration `yaml:"retention"`
}

// HTTP configures the API server.
type HTTP struct {
	// Addr is the listen address. Default ":8080".
	Addr string `yaml:"addr"`
	// ReadHeaderTimeout bounds how long a client may take to send headers. Default 10s.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// ShutdownTimeout bounds how long in-flight requests may take after SIGTERM. Default 20s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// BodyIdleTimeout ends a request whose body sends nothing for this long (408). Default 30s.
	BodyIdleTimeout time.Duration `yaml:"body_idle_timeout"`
	// BodyMinRate is the slowest average, in bytes per second over BodyRateWindow, a request
	// body may arrive at (408 when slower): slow-drip uploads cannot hold connections forever.
	// Default 16384.
	BodyMinRate int64 `yaml:"body_min_rate"`
	// BodyRateWindow is the span BodyMinRate is judged over. Default 10s.
	BodyRateWindow time.Duration `yaml:"body_rate_window"`
}

// Database configures Postgres.
type Database struct {
	// URL is a postgres:// connection string.
	// Default "postgres://taskcenter:taskcenter@127.0.0.1:5432/taskcenter?sslmode=disable".
	URL string `yaml:"url"`
	// MaxOpenConns caps the connection pool. Default 40.
	MaxOpenConns int `yaml:"max_open_conns"`
	// QueryTimeout bounds a single API query. Default 5s.
	QueryTimeout time.Duration `yaml:"query_timeout"`
	// Pooler names a connection pooler in transaction mode between taskcenter and Postgres:
	// "pgbouncer" runs every statement unprepared (named prepared statements do not survive
	// transaction pooling before PgBouncer 1.21). Empty: a direct connection. Default "".
	Pooler string `yaml:"pooler"`
	// MigrateURL is a direct connection (not through the pooler) for schema migrations, which
	// hold a session lock while they run. Default: URL.
	MigrateURL string `yaml:"migrate_url"`
	// IdleInTransactionTimeout is how long Postgres lets a session of this process sit idle
	// inside a transaction before it ends the session (idle_in_transaction_session_timeout):
	// a process frozen mid-batch (SIGSTOP, a VM pause, heavy swapping, a partition that keeps
	// its TCP connection open) releases the task row it locked, so another worker can take the
	// task over. Must leave a heartbeat interval before worker.takeover_after. Default a third
	// of worker.takeover_after (10s).
	IdleInTransactionTimeout time.Duration `yaml:"idle_in_transaction_timeout"`
	// LockTimeout bounds how long a statement waits for a row another session holds
	// (lock_timeout), so no wait outlasts a takeover. Must be below worker.takeover_after.
	// Default a third of worker.takeover_after (10s).
	LockTimeout time.Duration `yaml:"lock_timeout"`
}

// fillDefaults derives the limits that follow from the worker's takeover window.
func (d *Database) fillDefaults(w Worker) {
	d.IdleInTransactionTimeout = cmp.Or(d.IdleInTransactionTimeout, w.TakeoverAfter/3)
	d.LockTimeout = cmp.Or(d.LockTimeout, w.TakeoverAfter/3)
}

// validate checks the database section against the worker's timing rules.
func (d Database) validate(w Worker, bad func(string, ...any)) {
	if u, err := url.Parse(d.URL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		bad("database.url (TASKCENTER_DATABASE_URL) must be a postgres://user:password@host:port/dbname URL")
	}
	if d.IdleInTransactionTimeout <= 0 || d.IdleInTransactionTimeout+w.HeartbeatInterval >= w.TakeoverAfter {
		bad("database.idle_in_transaction_timeout (%s) must be positive and end a frozen transaction at least one worker.heartbeat_interval (%s) before worker.takeover_after (%s), or a frozen worker blocks the takeover",
			d.IdleInTransactionTimeout, w.HeartbeatInterval, w.TakeoverAfter)
	}
	if d.LockTimeout <= 0 || d.LockTimeout >= w.TakeoverAfter {
		bad("database.lock_timeout (%s) must be positive and below worker.takeover_after (%s)", d.LockTimeout, w.TakeoverAfter)
	}
}

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

// Auth says who may call the API and how: config tokens (bootstrap and development), JWTs
// from the company's identity provider and browser sign-in with it (oidc), a trusted gateway
// (trusted_header), API tokens managed in the product (api_tokens), and the audit trail.
type Auth struct {
	// Tokens maps bearer tokens to users. A token may be given as its SHA-256 instead,
	// "sha256:<64 hex digits>", so the config holds no secret. In the environment:
	// TASKCENTER_AUTH_TOKENS="token:user:role,sha256:<hex>:user2:admin". Default: the three
	// demo tokens of configs/taskcenter.yaml (none built in).
	Tokens Tokens `yaml:"tokens"`
	// OIDC accepts bearer JWTs from the company's identity provider and, with a client_id,
	// signs browsers in with it. Off while issuer is empty. Default off.
	OIDC OIDC `yaml:"oidc"`
	// TrustedHeader accepts the user a gateway in front of taskcenter names in a header, from
	// the gateway's addresses only. Off while user is empty. Default off.
	TrustedHeader TrustedHeader `yaml:"trusted_header"`
	// APITokens bounds the tokens users create with POST /api/v1/tokens.
	APITokens APITokens `yaml:"api_tokens"`
	// Audit tunes the audit trail (GET /api/v1/audit).
	Audit Audit `yaml:"audit"`
}

// OIDC configures the company identity provider (OpenID Connect).
type OIDC struct {
	// Issuer is the provider's issuer URL (https://login.example.com/realms/acme): JWTs must
	// carry it as iss, and its discovery document (<issuer>/.well-known/openid-configuration)
	// gives the keys and the sign-in endpoints. https, or http on a loopback address. Default
	// "" (off).
	Issuer string `yaml:"issuer"`
	// Audience is what bearer JWTs must name in aud (the API's identifier at the provider).
	// Default: ClientID.
	Audience string `yaml:"audience"`
	// ClientID is taskcenter's client at the provider, for browser sign-in (authorization code
	// with PKCE) of the web page and the console; ID tokens must name it in aud. Default ""
	// (bearer JWTs only, no browser sign-in).
	ClientID string `yaml:"client_id"`
	// ClientSecret authenticates a confidential client at the token endpoint. Default "" (a
	// public client: PKCE only).
	ClientSecret string `yaml:"client_secret"`
	// RedirectURL is where the provider sends the browser back:
	// https://taskcenter.example.com/auth/callback (register it at the provider). Default:
	// /auth/callback on the host the browser used.
	RedirectURL string `yaml:"redirect_url"`
	// Scopes are asked for at browser sign-in. Default [openid, profile, email].
	Scopes []string `yaml:"scopes"`
	// JWKSURL fetches the signing keys from this URL instead of the discovery document's
	// jwks_uri. Default "" (discovery).
	JWKSURL string `yaml:"jwks_url"`
	// JWKSFile reads the signing keys from this file (a JWKS) instead. Default "".
	JWKSFile string `yaml:"jwks_file"`
	// Algorithms are the signature algorithms accepted; only asymmetric ones may be listed
	// (none and HS* never are). Default [RS256, RS384, RS512, PS256, PS384, PS512, ES256,
	// ES384, ES512, EdDSA].
	Algorithms []string `yaml:"algorithms"`
	// Leeway is the clock skew allowed when checking exp, nbf and iat. Default 30s.
	Leeway time.Duration `yaml:"leeway"`
	// JWKSRefreshInterval is the least time between two fetches of the keys when a token names
	// a key id that is not known (key rotation), so made-up key ids cannot hammer the
	// provider. Default 10s.
	JWKSRefreshInterval time.Duration `yaml:"jwks_refresh_interval"`
	// JWKSMaxAge: keys older than this are fetched again before use (a removed key stops
	// working). Default 1h.
	JWKSMaxAge time.Duration `yaml:"jwks_max_age"`
	// UserClaim names the claim that is the user: sub, preferred_username, email, or a dotted
	// path into nested claims. Default "sub".
	UserClaim string `yaml:"user_claim"`
	// AdminClaim names the claim (a string or a list; a dotted path such as
	// realm_access.roles works) whose values AdminValues are matched against. Default "groups".
	AdminClaim string `yaml:"admin_claim"`
	// AdminValues: a JWT whose AdminClaim holds one of these is an admin. Default none (no
	// JWT is an admin).
	AdminValues []string `yaml:"admin_values"`
}

// Enabled reports whether bearer JWTs are accepted.
func (o OIDC) Enabled() bool { return o.Issuer != "" }

// BrowserSignIn reports whether browsers sign in with the provider.
func (o OIDC) BrowserSignIn() bool { return o.Issuer != "" && o.ClientID != "" }

// TrustedHeader configures the trusted gateway mode.
type TrustedHeader struct {
	// User is the header the gateway names the user in, e.g. X-Forwarded-User. Default ""
	// (off).
	User string `yaml:"user"`
	// Role is the header the gateway names the user's role or groups in (comma-separated),
	// e.g. X-Forwarded-Groups. Default "" (every gateway user is a user).
	Role string `yaml:"role"`
	// AdminValues: a Role header holding one of these makes an admin. Default [admin].
	AdminValues []string `yaml:"admin_values"`
	// Proxies are the gateway's addresses or ranges (10.0.0.5, 10.0.0.0/24). The headers are
	// believed only on connections from these; from anywhere else they are ignored. Required
	// when User is set.
	Proxies []string `yaml:"proxies"`
}

// APITokens bounds the API tokens users create in the product.
type APITokens struct {
	// DefaultTTL is a new token's lifetime when the request names no expires_at. Default 2160h
	// (90 days).
	DefaultTTL time.Duration `yaml:"default_ttl"`
	// MaxTTL is the longest lifetime a token may be given. Default 8760h (365 days).
	MaxTTL time.Duration `yaml:"max_ttl"`
}

// Audit tunes the audit trail.
type Audit struct {
	// Retention: audit rows older than this are deleted by the cleanup round. 0 keeps them
	// for good. Default 8760h (365 days).
	Retention time.Duration `yaml:"retention"`
	// Log writes every audit row to the log as well (message "audit"), for a log pipeline or
	// SIEM. Default true.
	Log bool `yaml:"log"`
}

// SignatureAlgorithms are the JWT algorithms auth.oidc.algorithms may list.
var SignatureAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// Role is what a token may do: a user sees their own tasks, an admin sees all.
type Role string

// Roles a token can carry.
const (
	RoleUser  Role = "user"
	RoleAdmin Role = "admin"
)

// Token is one API credential.
type Token struct {
	Token string `yaml:"token"`
	User  string `yaml:"user"`
	Role  Role   `yaml:"role"`
}

// Tokens is the list of API credentials; it reads "token:user:role,..." from the environment.
type Tokens []Token

// DecodeEnv parses "token:user:role,token:user:role".
func (t *Tokens) DecodeEnv(s string) error {
	var out Tokens
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		parts := strings.Split(item, ":")
		if len(parts) == 4 && parts[0] == "sha256" { // sha256:<hex>:user:role
			parts = []string{"sha256:" + parts[1], parts[2], parts[3]}
		}
		if len(parts) != 3 {
			return fmt.Errorf("token entry %q must be token:user:role or sha256:<hex>:user:role", redact(item))
		}
		out = append(out, Token{Token: parts[0], User: parts[1], Role: Role(parts[2])})
	}
	*t = out
	return nil
}

// Worker tunes the runtime shared by every job type.
type Worker struct {
	// ID names this worker in task rows and logs. Default hostname-pid.
	ID string `yaml:"id"`
	// HeartbeatInterval is how often a running task proves it is alive. Default 5s.
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval"`
	// TakeoverAfter is how old a RUNNING task's heartbeat must be before another worker may
	// take it over. Must be several heartbeat intervals. Default 30s.
	TakeoverAfter time.Duration `yaml:"takeover_after"`
	// ProgressInterval throttles progress writes to Redis. Default 500ms.
	ProgressInterval time.Duration `yaml:"progress_interval"`
	// ShutdownTimeout is how long in-flight batches may run after SIGTERM before the rest is
	// left to resume from its checkpoint. Default 25s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// PollInterval is how often an idle queue asks Redis for work: the pick-up latency of a
	// new task. Default 100ms.
	PollInterval time.Duration `yaml:"poll_interval"`
	// BatchMax caps how many claims, how many endings, and how many single submits one
	// statement writes: concurrent attempts (and concurrent submits to an API process) share
	// one transaction and one fsync. 1 writes each on its own. Default 128.
	BatchMax int `yaml:"batch_max"`
	// BatchWait is how long a claim or an ending may wait for company, counted from when it
	// was queued (one queued behind a flush in progress that long goes in the next flush at
	// once); submits never wait: they go with what is queued. 0 takes what is already queued
	// and goes. Default 2ms: on 2 cores it cut Postgres CPU per no-op task by about 40 %
	// (docs/benchmarks.md) for at most 2 ms more per claim and per ending.
	BatchWait time.Duration `yaml:"batch_wait"`
}

// Queue is one worker pool.
type Queue struct {
	// Concurrency is how many tasks of this queue one process runs at once. Default 2.
	Concurrency int `yaml:"concurrency"`
	// BacklogLimit is how many waiting tasks the queue accepts before submit answers 429.
	// 0 means no limit. Default 0.
	BacklogLimit int `yaml:"backlog_limit"`
	// Priority is how workers choose among the queue's lanes (work being resumed, then
	// priority 1-3, 4-6, 7-9): "strict" serves a lane only when the ones before it are empty
	// (low priority work waits while higher work exists); "weighted" picks lanes at random
	// 8:4:2:1, so low priority work is slowed but never starved. Default "strict".
	Priority string `yaml:"priority"`
	// MaxRunningPerOwner caps how many of one user's tasks run at once in this queue (fair
	// share): a task over the cap waits for one of the user's tasks to finish, spending no
	// retry. 0 means no cap. Default 0.
	MaxRunningPerOwner int `yaml:"max_running_per_owner"`
	// MaxWaitingPerOwner caps one user's waiting tasks in this queue: a submit over it answers
	// 429 owner_waiting_limit with Retry-After, so one user's flood does not fill the queue's
	// backlog for everyone. 0 means no cap. Default 0.
	MaxWaitingPerOwner int `yaml:"max_waiting_per_owner"`
}

// TaskType is the policy for one task type.
type TaskType struct {
	// Queue runs the type. Required.
	Queue string `yaml:"queue"`
	// MaxRetry is how many automatic retries a transient failure gets. Default 3.
	MaxRetry int `yaml:"max_retry"`
	// RetryBase is the first retry delay; attempt n waits RetryBase·2^(n−1) plus up to
	// RetryBase of jitter: 30s, 60s, 120s by default. Default 30s.
	RetryBase time.Duration `yaml:"retry_base"`
	// Timeout is how long a RUNNING task may go without a heartbeat before cleanup marks it
	// TIMEOUT. Default 30m.
	Timeout time.Duration `yaml:"timeout"`
	// MaxRuntime bounds one attempt's wall time; past it the attempt ends TIMEOUT. Default 6h.
	MaxRuntime time.Duration `yaml:"max_runtime"`
	// StallAfter: an attempt that reports no progress and commits no batch for this long is
	// stopped and ends TIMEOUT with a message saying where it stalled (the user may retry it).
	// 0 disables the check. Default 10m.
	StallAfter time.Duration `yaml:"stall_after"`
	// Priority is the type's default priority, from 1 (runs first) to 9 (runs last); a submit
	// may ask for another. Default 5.
	Priority int `yaml:"priority"`
	// Disabled removes the type: submits are refused and no handler is registered.
	Disabled bool `yaml:"disabled"`
}

// Export tunes report exports.
type Export struct {
	// PageSize is the keyset page read per query. Default 2000.
	PageSize int `yaml:"page_size"`
	// ResultTTL is how long a result file can be downloaded. Default 168h (7 days).
	ResultTTL time.Duration `yaml:"result_ttl"`
	// MaxRows caps one export; an .xlsx sheet holds at most 1,048,575 data rows.
	// Default 1,000,000.
	MaxRows int `yaml:"max_rows"`
}

// Import tunes spreadsheet imports.
type Import struct {
	// MaxUploadBytes caps an upload; larger bodies answer 413 before they are read.
	// Default 104857600 (100 MiB).
	MaxUploadBytes int64 `yaml:"max_upload_bytes"`
	// MaxUncompressedBytes caps what an .xlsx may expand to (zip bombs). Default 1073741824
	// (1 GiB).
	MaxUncompressedBytes int64 `yaml:"max_uncompressed_bytes"`
	// MaxRows caps the data rows of one file. Default 1,000,000.
	MaxRows int `yaml:"max_rows"`
	// MaxEntries caps the files inside an .xlsx (a zip). Default 10000.
	MaxEntries int `yaml:"max_entries"`
	// MaxCellChars caps one cell, as Excel does; a longer cell is cut while it is read and its
	// row rejected. Default 32767.
	MaxCellChars int `yaml:"max_cell_chars"`
	// MaxColumns caps the columns of a row, as Excel does (column XFD); a cell further right
	// fails the file. Default 16384.
	MaxColumns int `yaml:"max_columns"`
	// MaxRowBytes caps one row's XML or CSV text and its values: a row over it fails the file.
	// Memory per import is bounded by these limits, whatever the file holds. Default 8388608
	// (8 MiB).
	MaxRowBytes int64 `yaml:"max_row_bytes"`
	// MaxSharedStrings caps an .xlsx shared string table (4 bytes of memory each; the text
	// spills to disk). Default 16777216.
	MaxSharedStrings int `yaml:"max_shared_strings"`
	// BatchSize is the rows written per transaction. Default 1000.
	BatchSize int `yaml:"batch_size"`
	// MaxConcurrentUploads caps the uploads one user may have in flight on one API process;
	// more answer 429 too_many_uploads. Default 4.
	MaxConcurrentUploads int `yaml:"max_concurrent_uploads"`
	// ReportTTL is how long an error report can be downloaded. Default 168h (7 days).
	ReportTTL time.Duration `yaml:"report_ttl"`
}

// Storage selects where uploads, results and error reports are kept (internal/storage).
type Storage struct {
	// Backend is "local" (files under data_dir: one box, or a shared mount) or "s3" (a bucket
	// on any S3-compatible service: nodes need no shared disk). Default "local". The other
	// fields are for s3.
	Backend string `yaml:"backend"`
	// Endpoint is the S3 service's host:port; an http:// or https:// prefix sets TLS.
	// Default "127.0.0.1:7070", the Versity S3 Gateway scripts/services.sh starts.
	Endpoint string `yaml:"endpoint"`
	// Bucket holds every object. Default "taskcenter".
	Bucket string `yaml:"bucket"`
	// Region signs requests. Default "us-east-1".
	Region string `yaml:"region"`
	// AccessKey and SecretKey are the credentials. Set them in the environment
	// (TASKCENTER_STORAGE_ACCESS_KEY, TASKCENTER_STORAGE_SECRET_KEY), not in a file kept in
	// a repository. Default: none, except on a loopback endpoint, where they default to
	// DevAccessKey and DevSecretKey, the development gateway's (scripts/services.sh).
	AccessKey string `yaml:"access_key"`
	SecretKey string `yaml:"secret_key"`
	// PathStyle sends path-style requests (http://host/bucket/key), which self-hosted S3
	// services need; false lets the client choose (virtual-host style on AWS, Aliyun,
	// Google). Default true.
	PathStyle bool `yaml:"path_style"`
	// TLS speaks HTTPS to the endpoint. Default false.
	TLS bool `yaml:"tls"`
	// Presign answers result and error-report downloads with a 302 to a presigned URL, so
	// the bytes never pass through the API; false streams them through the API. Default
	// true.
	Presign bool `yaml:"presign"`
	// PresignTTL is how long a presigned URL works (1s to 7 days). Default 5m.
	PresignTTL time.Duration `yaml:"presign_ttl"`
	// PresignEndpoint is the host:port presigned URLs name, when browsers reach the S3
	// service at another address than the service does. Default: Endpoint.
	PresignEndpoint string `yaml:"presign_endpoint"`
	// CreateBucket creates the bucket at start-up when it is missing. Default false.
	CreateBucket bool `yaml:"create_bucket"`
	// PartSize is the multipart part size in bytes: the memory one streamed upload holds at
	// a time. At least 5 MiB. Default 16 MiB.
	PartSize int64 `yaml:"part_size"`
}

// The development gateway's credentials (scripts/services.sh starts versitygw with them):
// the defaults on a loopback endpoint only.
const (
	DevAccessKey = "taskcenter-dev"
	DevSecretKey = "taskcenter-dev-secret"
)

// LocalEndpoint reports whether the storage endpoint is on this machine.
func (s Storage) LocalEndpoint() bool {
	host := s.Endpoint
	if _, rest, ok := strings.Cut(host, "://"); ok {
		host = rest
	}
	host = strings.TrimSuffix(host, "/")
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return isLoopback(strings.Trim(host, "[]"))
}

// Cleanup tunes the scheduled maintenance round (maintenance:cleanup).
type Cleanup struct {
	// Spec is the cron spec of the round: "* * * * *", "@every 30s", "@hourly". Default every
	// minute.
	Spec string `yaml:"spec"`
	// Timezone the spec is read in: an IANA name or "Local". Default "UTC".
	Timezone string `yaml:"timezone"`
	// Queue runs the round. Default "maintenance".
	Queue string `yaml:"queue"`
	// OrphanGrace is how long a waiting task may go without asynq holding it before the round
	// enqueues it again. Default 1m.
	OrphanGrace time.Duration `yaml:"orphan_grace"`
	// BatchSize bounds every step of one round. Default 500.
	BatchSize int `yaml:"batch_size"`
	// UploadTTL: uploads older than this that no waiting or running task needs are deleted.
	// Default 24h.
	UploadTTL time.Duration `yaml:"upload_ttl"`
	// TempTTL: temp files older than this that no running task is writing are deleted, and
	// incomplete multipart uploads (s3) initiated longer ago are aborted. Default 6h.
	TempTTL time.Duration `yaml:"temp_ttl"`
	// Retention: terminal tasks that finished longer ago are moved, with their runs, logs and
	// failed rows, into the archive tables (still found by id; counted in /api/v1/stats), and
	// their files are deleted. Default 720h (30 days).
	Retention time.Duration `yaml:"retention"`
	// ArchiveRetention: archived tasks are deleted this long after archiving; the daily
	// aggregates stay for good. Default 8760h (365 days).
	ArchiveRetention time.Duration `yaml:"archive_retention"`
	// ScheduleSync is how often each scheduler re-reads the users' schedules: a new, paused,
	// resumed or deleted schedule takes effect within this. Default 10s.
	ScheduleSync time.Duration `yaml:"schedule_sync"`
}

// Alerts configures alerting. Alerts are always logged (level ERROR, "alert":<kind>).
type Alerts struct {
	// WebhookURL, when set, receives each alert as a JSON POST. Default none.
	WebhookURL string `yaml:"webhook_url"`
	// WebhookTimeout bounds one delivery attempt. Default 5s.
	WebhookTimeout time.Duration `yaml:"webhook_timeout"`
	// WebhookRetries is how many more attempts a failed delivery gets. Default 3.
	WebhookRetries int `yaml:"webhook_retries"`
	// BacklogThreshold: a queue with more waiting tasks than this for BacklogFor raises one
	// alert. 0 disables. Default 500.
	BacklogThreshold int `yaml:"backlog_threshold"`
	// BacklogFor is how long the backlog must stay over the threshold. Default 5m.
	BacklogFor time.Duration `yaml:"backlog_for"`
}

// Console configures the asynqmon console, served to admins only.
type Console struct {
	// Enabled mounts the console at /monitor/. Default true.
	Enabled bool `yaml:"enabled"`
	// Username and Password enable HTTP basic auth as well as the admin-token login.
	// Default none (token login only).
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// ReadOnly refuses every console action (403, pointing to the task API) and hides the
	// buttons. Task actions belong to the task API, whose transitions keep the task rows and
	// the queues in step. With false, single-job actions map onto task transitions: delete or
	// archive cancels the task, cancel requests its cancel, run-now of a retry makes it due;
	// bulk actions stay refused. Default true.
	ReadOnly bool `yaml:"read_only"`
	// SessionTTL is how long a console login lasts at most. Default 12h.
	SessionTTL time.Duration `yaml:"session_ttl"`
	// LoginFailures is how many failed logins one client address may make per LoginWindow;
	// further attempts answer 429 until the window ends. Default 5.
	LoginFailures int `yaml:"login_failures"`
	// LoginWindow is the span LoginFailures counts over. Default 1m.
	LoginWindow time.Duration `yaml:"login_window"`
}

// Metrics configures Prometheus metrics.
type Metrics struct {
	// Addr is a separate listener for /metrics and /healthz, for processes without the api
	// role (workers, schedulers). API processes also serve /metrics on the API address.
	// Default ":9091"; empty disables the separate listener.
	Addr string `yaml:"addr"`
}

// Log selects the log output.
type Log struct {
	// Format is "json" or "text". Default "json".
	Format string `yaml:"format"`
	// Level is debug, info, warn or error. Default "info".
	Level string `yaml:"level"`
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

func defaultType(queue string) TaskType {
	return TaskType{Queue: queue, MaxRetry: 3, RetryBase: 30 * time.Second, Timeout: 30 * time.Minute, MaxRuntime: 6 * time.Hour,
		StallAfter: 10 * time.Minute, Priority: 5}
}

// defaultQueue is the pool a queue named only in the file gets for the fields it leaves out.
func defaultQueue() Queue { return Queue{Concurrency: 2, Priority: "strict"} }

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

// mergeMaps rebuilds the queues and types from the defaults and the file's entries: an entry
// of the file starts from its default (or a fresh default for a new name) and its fields
// overlay it, so nothing the file does not mention is lost or zeroed.
func mergeMaps(cfg *Config, file []byte) error {
	var raw struct {
		Queues map[string]any `yaml:"queues"`
		Types  map[string]any `yaml:"types"`
	}
	if err := yaml.Unmarshal(file, &raw); err != nil {
		return err
	}
	def := Default()
	queues, err := mergeEntries("queues", def.Queues, raw.Queues, func(string) Queue { return defaultQueue() })
	if err != nil {
		return err
	}
	types, err := mergeEntries("types", def.Types, raw.Types, func(string) TaskType { return defaultType("") })
	if err != nil {
		return err
	}
	cfg.Queues, cfg.Types = queues, types
	cfg.typeEntries = raw.Types
	return nil
}

func mergeEntries[T any](section string, defaults map[string]T, file map[string]any, fresh func(string) T) (map[string]T, error) {
	out := maps.Clone(defaults)
	for name, v := range file {
		entry, ok := out[name]
		if !ok {
			entry = fresh(name)
		}
		b, err := yaml.Marshal(v)
		if err != nil {
			return nil, err
		}
		if err := yaml.UnmarshalWithOptions(b, &entry, yaml.Strict()); err != nil {
			return nil, fmt.Errorf("%s.%s: %s", section, name, yaml.FormatError(err, false, false))
		}
		out[name] = entry
	}
	return out, nil
}

// ResolveType returns the policy of a task type the build registers: its declared defaults
// (declared), overlaid field by field by the file's entry for it and then by the environment
// (TASKCENTER_TYPES_<NAME>_<FIELD>), then validated. A type added in code needs no config;
// a field the config leaves out keeps the type's own default.
func (c Config) ResolveType(name string, declared TaskType) (TaskType, error) {
	t := declared
	d := defaultType(t.Queue)
	if t.RetryBase == 0 {
		t.RetryBase = d.RetryBase
	}
	if t.Timeout == 0 {
		t.Timeout = d.Timeout
	}
	if t.MaxRuntime == 0 {
		t.MaxRuntime = d.MaxRuntime
	}
	if t.Priority == 0 {
		t.Priority = d.Priority
	}
	if v, ok := c.typeEntries[name]; ok {
		b, err := yaml.Marshal(v)
		if err != nil {
			return t, err
		}
		if err := yaml.UnmarshalWithOptions(b, &t, yaml.Strict()); err != nil {
			return t, fmt.Errorf("types.%s: %s", name, yaml.FormatError(err, false, false))
		}
	}
	if c.getenv != nil {
		if err := walkEnv(reflect.ValueOf(&t).Elem(), "TASKCENTER_TYPES_"+envName(name), c.getenv); err != nil {
			return t, err
		}
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if _, ok := c.Queues[t.Queue]; !ok {
		bad("types.%s.queue %q is not defined under queues (have %s)", name, t.Queue, strings.Join(slices.Sorted(maps.Keys(c.Queues)), ", "))
	}
	if t.MaxRetry < 0 {
		bad("types.%s.max_retry must be 0 or more", name)
	}
	if t.Priority < 1 || t.Priority > 9 {
		bad("types.%s.priority must be from 1 (first) to 9 (last), got %d", name, t.Priority)
	}
	if !t.Disabled && t.Timeout <= c.Worker.TakeoverAfter {
		bad("types.%s.timeout (%s) must be longer than worker.takeover_after (%s)", name, t.Timeout, c.Worker.TakeoverAfter)
	}
	if t.StallAfter != 0 && t.StallAfter < 2*c.Worker.HeartbeatInterval {
		bad("types.%s.stall_after (%s) must be 0 (off) or at least 2× worker.heartbeat_interval (%s)", name, t.StallAfter, c.Worker.HeartbeatInterval)
	}
	if len(errs) > 0 {
		return t, fmt.Errorf("invalid configuration:\n  - %w", joinLines(errs))
	}
	return t, nil
}

// UnknownTypes lists the types the file configures that the build does not register: most
// likely a misspelt name.
func (c Config) UnknownTypes(registered []string) []string {
	var out []string
	for name := range c.typeEntries {
		if !slices.Contains(registered, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// fillTypeDefaults gives every type the default policy for the fields the file left at zero.
func (c *Config) fillTypeDefaults() {
	for name, t := range c.Types {
		d := defaultType(t.Queue)
		if t.RetryBase == 0 {
			t.RetryBase = d.RetryBase
		}
		if t.Timeout == 0 {
			t.Timeout = d.Timeout
		}
		if t.MaxRuntime == 0 {
			t.MaxRuntime = d.MaxRuntime
		}
		if t.StallAfter < 0 {
			t.StallAfter = 0
		}
		if t.Priority == 0 {
			t.Priority = d.Priority
		}
		c.Types[name] = t
	}
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

// validateAuth checks the oidc, trusted_header, api_tokens and audit settings.
func (c *Config) validateAuth(bad func(string, ...any)) {
	o := c.Auth.OIDC
	if o.Enabled() {
		if u, err := url.Parse(o.Issuer); err != nil || u.Host == "" || !(u.Scheme == "https" || (u.Scheme == "http" && isLoopback(u.Hostname()))) {
			bad("auth.oidc.issuer (TASKCENTER_AUTH_OIDC_ISSUER) must be the provider's https issuer URL (http only on a loopback address), got %q", o.Issuer)
		}
		if o.Audience == "" && o.ClientID == "" {
			bad("auth.oidc needs audience (what bearer JWTs name in aud) or client_id (browser sign-in), or both")
		}
		if o.JWKSURL != "" && o.JWKSFile != "" {
			bad("auth.oidc: set jwks_url or jwks_file, not both")
		}
		if o.JWKSURL != "" {
			if u, err := url.Parse(o.JWKSURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				bad("auth.oidc.jwks_url must be an http(s) URL")
			}
		}
		if o.JWKSFile != "" {
			if _, err := os.Stat(o.JWKSFile); err != nil {
				bad("auth.oidc.jwks_file %q cannot be read: %v", o.JWKSFile, err)
			}
		}
		if o.RedirectURL != "" {
			if u, err := url.Parse(o.RedirectURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				bad("auth.oidc.redirect_url must be an absolute URL ending in /auth/callback")
			}
		}
		if len(o.Algorithms) == 0 {
			bad("auth.oidc.algorithms must list at least one algorithm")
		}
		for _, a := range o.Algorithms {
			if !slices.Contains(SignatureAlgorithms, a) {
				bad("auth.oidc.algorithms: %q is not accepted; use asymmetric algorithms only (%s)", a, strings.Join(SignatureAlgorithms, ", "))
			}
		}
		if o.Leeway < 0 || o.Leeway > 5*time.Minute {
			bad("auth.oidc.leeway must be between 0 and 5m, got %s", o.Leeway)
		}
		if o.JWKSRefreshInterval < time.Second || o.JWKSMaxAge < o.JWKSRefreshInterval {
			bad("auth.oidc.jwks_refresh_interval must be at least 1s and jwks_max_age at least jwks_refresh_interval")
		}
		if o.UserClaim == "" {
			bad("auth.oidc.user_claim must name a claim, e.g. sub or preferred_username")
		}
		if len(o.AdminValues) > 0 && o.AdminClaim == "" {
			bad("auth.oidc.admin_claim must name a claim when admin_values is set")
		}
	} else if o.ClientID != "" || o.Audience != "" {
		bad("auth.oidc.client_id and audience need auth.oidc.issuer")
	}
	th := c.Auth.TrustedHeader
	if th.User != "" {
		if len(th.Proxies) == 0 {
			bad("auth.trusted_header.proxies must list the gateway's addresses or ranges when auth.trusted_header.user is set")
		}
		if !validHeaderName(th.User) || (th.Role != "" && !validHeaderName(th.Role)) {
			bad("auth.trusted_header.user and role must be HTTP header names such as X-Forwarded-User")
		}
	}
	for _, p := range th.Proxies {
		if _, err := netip.ParsePrefix(p); err != nil {
			if _, err := netip.ParseAddr(p); err != nil {
				bad("auth.trusted_header.proxies: %q is not an address or a range such as 10.0.0.0/24", p)
			}
		}
	}
	if t := c.Auth.APITokens; t.DefaultTTL <= 0 || t.MaxTTL < t.DefaultTTL {
		bad("auth.api_tokens.default_ttl must be positive and max_ttl at least default_ttl")
	}
	if c.Auth.Audit.Retention < 0 {
		bad("auth.audit.retention must be 0 (keep for good) or positive")
	}
}

func isHexSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
			return false
		}
	}
	return true
}

func (c *Config) validateStorage(bad func(string, ...any)) {
	st := c.Storage
	switch st.Backend {
	case "local":
		return
	case "s3":
	default:
		bad("storage.backend (TASKCENTER_STORAGE_BACKEND) must be local or s3, got %q", st.Backend)
		return
	}
	if st.Endpoint == "" || st.Bucket == "" {
		bad("storage.endpoint and storage.bucket (TASKCENTER_STORAGE_ENDPOINT, TASKCENTER_STORAGE_BUCKET) must be set for the s3 backend")
	}
	if st.AccessKey == "" || st.SecretKey == "" {
		bad("the s3 backend needs credentials: set TASKCENTER_STORAGE_ACCESS_KEY and TASKCENTER_STORAGE_SECRET_KEY")
	}
	if st.PresignTTL < time.Second || st.PresignTTL > 7*24*time.Hour {
		bad("storage.presign_ttl (TASKCENTER_STORAGE_PRESIGN_TTL) must be between 1s and 168h (S3's limit), got %s", st.PresignTTL)
	}
	if st.PartSize < 5<<20 {
		bad("storage.part_size (TASKCENTER_STORAGE_PART_SIZE) must be at least 5242880 bytes (5 MiB, S3's minimum part), got %d", st.PartSize)
	}
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

func validHeaderName(h string) bool {
	if h == "" {
		return false
	}
	for _, r := range h {
		if !(r == '-' || r == '_' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')) {
			return false
		}
	}
	return true
}

// AdminTokens lists the tokens with the admin role.
func (c *Config) AdminTokens() []string {
	var out []string
	for _, t := range c.Auth.Tokens {
		if t.Role == RoleAdmin {
			out = append(out, t.Token)
		}
	}
	return out
}

// QueueOf returns the queue a type runs on.
func (c *Config) QueueOf(taskType string) (string, bool) {
	t, ok := c.Types[taskType]
	if !ok || t.Disabled {
		return "", false
	}
	return t.Queue, true
}

func joinLines(errs []error) error {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	slices.Sort(msgs)
	return errors.New(strings.Join(msgs, "\n  - "))
}

func redact(s string) string {
	if i := strings.Index(s, ":"); i > 0 {
		return "***" + s[i:]
	}
	return "***"
}
