package config

import (
	"time"
)

// HTTP configures the API server.
type HTTP struct {
	// Addr is the listen address. Default ":8080".
	Addr string `yaml:"addr"`
	// ReadHeaderTimeout bounds how long a client may take to send headers. Default 10s.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// MaxHeaderBytes bounds a request's head (request line and headers) on every address
	// the process serves (API, console, metrics): a larger one answers 431 Request Header
	// Fields Too Large. Default 1048576 (1 MiB).
	MaxHeaderBytes int `yaml:"max_header_bytes"`
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

func defaultHTTP() HTTP {
	return HTTP{
		Addr:              ":8080",
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    1 << 20,
		ShutdownTimeout:   20 * time.Second,
		BodyIdleTimeout:   30 * time.Second,
		BodyMinRate:       16 << 10,
		BodyRateWindow:    10 * time.Second,
	}
}

// validate checks the listener and the request body limits.
func (h HTTP) validate(bad func(string, ...any)) {
	if h.Addr == "" {
		bad("http.addr (TASKCENTER_HTTP_ADDR) must be set, e.g. :8080")
	}
	if h.MaxHeaderBytes < 4<<10 || h.MaxHeaderBytes > 64<<20 {
		bad("http.max_header_bytes (TASKCENTER_HTTP_MAX_HEADER_BYTES) must be between 4096 (4 KiB) and 67108864 (64 MiB), got %d", h.MaxHeaderBytes)
	}
	if h.BodyIdleTimeout <= 0 || h.BodyRateWindow <= 0 || h.BodyMinRate < 0 {
		bad("http.body_idle_timeout and http.body_rate_window must be positive and http.body_min_rate 0 or more")
	}
}

// Web configures the end-user page served at / by API processes.
type Web struct {
	// Enabled serves the page and its cookie sessions; the API is the same either way.
	// Default true.
	Enabled bool `yaml:"enabled"`
	// SessionTTL is how long a sign-in lasts at most. Default 12h.
	SessionTTL time.Duration `yaml:"session_ttl"`
	// LoginFailures is how many refused sign-ins one client address, and one credential from
	// any address, may make per LoginWindow; further refused ones answer 429 until the window
	// ends (a valid credential always passes). Default 5.
	LoginFailures int `yaml:"login_failures"`
	// LoginWindow is the span LoginFailures counts over. Default 1m.
	LoginWindow time.Duration `yaml:"login_window"`
	// SessionKey signs the session cookies; every API replica needs the same one. Default:
	// derived from auth.tokens, so replicas with the same config agree and changing the
	// tokens signs everyone out. Set it (at least 32 characters) to keep sessions across
	// token rotations.
	SessionKey string `yaml:"session_key"`
}

func defaultWeb() Web {
	return Web{Enabled: true, SessionTTL: 12 * time.Hour, LoginFailures: 5, LoginWindow: time.Minute}
}

// validate checks the sign-in limits and the session key.
func (w Web) validate(bad func(string, ...any)) {
	if w.SessionTTL <= 0 || w.LoginFailures < 1 || w.LoginWindow <= 0 {
		bad("web.session_ttl and web.login_window must be positive and web.login_failures at least 1")
	}
	if k := w.SessionKey; k != "" && len(k) < 32 {
		bad("web.session_key (TASKCENTER_WEB_SESSION_KEY) must be at least 32 characters, got %d", len(k))
	}
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

func defaultEvents() Events {
	return Events{MaxStreamsPerUser: 20, KeepAlive: 15 * time.Second, PollInterval: 1500 * time.Millisecond, Retry: 3 * time.Second,
		Buffer: 256, WriteTimeout: 10 * time.Second}
}

// validate checks the stream limits.
func (e Events) validate(bad func(string, ...any)) {
	if e.MaxStreamsPerUser < 1 || e.Buffer < 1 || e.KeepAlive <= 0 || e.PollInterval <= 0 || e.Retry <= 0 || e.WriteTimeout <= 0 {
		bad("events: max_streams_per_user and buffer must be at least 1, keep_alive, poll_interval, retry and write_timeout positive")
	}
}
