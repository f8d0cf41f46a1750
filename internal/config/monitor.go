package config

import "time"

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

func defaultAlerts() Alerts {
	return Alerts{WebhookTimeout: 5 * time.Second, WebhookRetries: 3, BacklogThreshold: 500, BacklogFor: 5 * time.Minute}
}

// validate checks the delivery of alerts and the backlog alert.
func (a Alerts) validate(bad func(string, ...any)) {
	if a.WebhookURL != "" {
		if !isURL(a.WebhookURL, "http", "https") {
			bad("alerts.webhook_url must be an http(s) URL")
		}
		if a.WebhookTimeout <= 0 || a.WebhookRetries < 0 || a.WebhookRetries > 10 {
			bad("alerts.webhook_timeout must be positive and alerts.webhook_retries between 0 and 10")
		}
	}
	if a.BacklogThreshold < 0 || (a.BacklogThreshold > 0 && a.BacklogFor <= 0) {
		bad("alerts.backlog_threshold must be 0 (off) or positive, with a positive alerts.backlog_for")
	}
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
	// LoginFailures is how many refused credentials (login form, bearer, basic auth) one
	// client address, and one credential from any address, may present per LoginWindow;
	// further refused ones answer 429 until the window ends (a valid credential always
	// passes). Default 5.
	LoginFailures int `yaml:"login_failures"`
	// LoginWindow is the span LoginFailures counts over. Default 1m.
	LoginWindow time.Duration `yaml:"login_window"`
}

func defaultConsole() Console {
	return Console{Enabled: true, ReadOnly: true, SessionTTL: 12 * time.Hour, LoginFailures: 5, LoginWindow: time.Minute}
}

// validate checks the console's logins.
func (c Console) validate(bad func(string, ...any)) {
	if c.LoginFailures < 1 || c.LoginWindow <= 0 {
		bad("console.login_failures must be at least 1 and console.login_window positive")
	}
	if c.Password != "" && c.Username == "" {
		bad("console.username must be set when console.password is")
	}
	if c.Password != "" && len(c.Password) < 12 {
		bad("console.password must be at least 12 characters")
	}
	if c.Enabled && c.SessionTTL <= 0 {
		bad("console.session_ttl must be positive")
	}
}

// Metrics configures Prometheus metrics.
type Metrics struct {
	// Addr is the listener for /metrics and /healthz, in every process whatever its roles:
	// keep it on the monitoring network. Default ":9091"; empty disables it.
	Addr string `yaml:"addr"`
	// Token, when set, also serves /metrics on the API address to requests bearing it
	// (Authorization: Bearer <token>, at least 16 characters); without it the API address
	// has no /metrics. Default none.
	Token string `yaml:"token"`
}

func defaultMetrics() Metrics { return Metrics{Addr: ":9091"} }

// validate checks the metrics token.
func (m Metrics) validate(bad func(string, ...any)) {
	if m.Token != "" && len(m.Token) < 16 {
		bad("metrics.token must be at least 16 characters")
	}
}
