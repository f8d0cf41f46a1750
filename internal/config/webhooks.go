package config

import (
	"time"

	"github.com/taskcenter/taskcenter/internal/allowlist"
)

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

func defaultWebhooks() Webhooks {
	return Webhooks{Timeout: 10 * time.Second, RetryBase: 10 * time.Second, RetryMax: time.Hour, MaxAge: 24 * time.Hour,
		Concurrency: 16, PerSubscription: 4, PollInterval: time.Second, Retention: 7 * 24 * time.Hour}
}

// validate checks the host list and the delivery limits.
func (w Webhooks) validate(bad func(string, ...any)) {
	if _, err := allowlist.Parse(w.AllowedHosts); err != nil {
		bad("webhooks.allowed_hosts: %v (TASKCENTER_WEBHOOKS_ALLOWED_HOSTS)", err)
	}
	if w.Timeout <= 0 || w.RetryBase <= 0 || w.RetryMax < w.RetryBase || w.MaxAge < w.RetryBase || w.Concurrency < 1 ||
		w.PerSubscription < 1 || w.PollInterval <= 0 || w.Retention < w.MaxAge {
		bad("webhooks: timeout, retry_base and poll_interval must be positive, retry_max and max_age at least retry_base, concurrency and per_subscription at least 1, retention at least max_age")
	}
}
