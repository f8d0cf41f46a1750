package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func envMap(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadShippedFile(t *testing.T) {
	t.Parallel()
	cfg, err := Load("../../configs/taskcenter.yaml", envMap(nil))
	if err != nil {
		t.Fatalf("shipped config does not load: %v", err)
	}
	if len(cfg.Auth.Tokens) != 3 || cfg.Auth.Tokens[2].Role != RoleAdmin {
		t.Fatalf("tokens = %+v, want three with an admin last", cfg.Auth.Tokens)
	}
	if got := cfg.Types["export:customers"]; got.Queue != "exports" || got.MaxRetry != 3 || got.RetryBase != 30*time.Second || got.StallAfter != 10*time.Minute {
		t.Fatalf("export:customers = %+v", got)
	}
	if cfg.Queues["exports"].BacklogLimit != 1000 {
		t.Fatalf("exports backlog limit = %d", cfg.Queues["exports"].BacklogLimit)
	}
}

func TestEnvironmentOverridesEveryKind(t *testing.T) {
	t.Parallel()
	cfg, err := Load("../../configs/taskcenter.yaml", envMap(map[string]string{
		"TASKCENTER_HTTP_ADDR":                        "127.0.0.1:9999",
		"TASKCENTER_QUEUES_EXPORTS_CONCURRENCY":       "7",
		"TASKCENTER_TYPES_EXPORT_CUSTOMERS_MAX_RETRY": "5",
		"TASKCENTER_WORKER_TAKEOVER_AFTER":            "1m",
		"TASKCENTER_REDIS_MODE":                       "cluster",
		"TASKCENTER_REDIS_ADDRS":                      "h1:6379, h2:6379",
		"TASKCENTER_AUTH_TOKENS":                      "0123456789abcdef:carol:admin",
		"TASKCENTER_TYPES_EXPORT_TASKS_DISABLED":      "true",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTP.Addr != "127.0.0.1:9999" || cfg.Queues["exports"].Concurrency != 7 ||
		cfg.Types["export:customers"].MaxRetry != 5 || cfg.Worker.TakeoverAfter != time.Minute ||
		cfg.Redis.Mode != "cluster" || len(cfg.Redis.Addrs) != 2 || cfg.Redis.Addrs[1] != "h2:6379" ||
		!cfg.Types["export:tasks"].Disabled {
		t.Fatalf("overrides not applied: %+v", cfg)
	}
	if len(cfg.Auth.Tokens) != 1 || cfg.Auth.Tokens[0].User != "carol" || cfg.Auth.Tokens[0].Role != RoleAdmin {
		t.Fatalf("tokens = %+v", cfg.Auth.Tokens)
	}
}

func TestValidationMessagesNameTheKeyAndTheFix(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"bad duration", map[string]string{"TASKCENTER_WORKER_TAKEOVER_AFTER": "soon"}, "TASKCENTER_WORKER_TAKEOVER_AFTER=\"soon\": want a duration"},
		{"takeover too short", map[string]string{"TASKCENTER_WORKER_TAKEOVER_AFTER": "6s"}, "worker.takeover_after (6s) must be at least 3× worker.heartbeat_interval"},
		{"unknown queue", map[string]string{"TASKCENTER_TYPES_EXPORT_TASKS_QUEUE": "nope"}, `types.export:tasks.queue "nope" is not defined under queues`},
		{"short token", map[string]string{"TASKCENTER_AUTH_TOKENS": "abc:dan:user"}, "token must be at least 16 characters"},
		{"bad role", map[string]string{"TASKCENTER_AUTH_TOKENS": "0123456789abcdef:dan:root"}, `role must be user or admin, got "root"`},
		{"bad redis mode", map[string]string{"TASKCENTER_REDIS_MODE": "ring"}, "redis.mode (TASKCENTER_REDIS_MODE) must be single, sentinel or cluster"},
		{"sentinel without master", map[string]string{"TASKCENTER_REDIS_MODE": "sentinel", "TASKCENTER_REDIS_ADDRS": "s1:26379"}, "redis.master_name"},
		{"bad database url", map[string]string{"TASKCENTER_DATABASE_URL": "mysql://x"}, "database.url (TASKCENTER_DATABASE_URL) must be a postgres://"},
		{"not a number", map[string]string{"TASKCENTER_QUEUES_IMPORTS_CONCURRENCY": "many"}, "want a whole number"},
		{"zero concurrency", map[string]string{"TASKCENTER_QUEUES_IMPORTS_CONCURRENCY": "0"}, "queues.imports.concurrency must be at least 1"},
		{"idle transactions outlive the takeover", map[string]string{"TASKCENTER_DATABASE_IDLE_IN_TRANSACTION_TIMEOUT": "26s"},
			"database.idle_in_transaction_timeout (26s) must be positive and end a frozen transaction at least one worker.heartbeat_interval (5s) before worker.takeover_after (30s)"},
		{"lock waits outlive the takeover", map[string]string{"TASKCENTER_DATABASE_LOCK_TIMEOUT": "30s"},
			"database.lock_timeout (30s) must be positive and below worker.takeover_after (30s)"},
		{"tiny header limit", map[string]string{"TASKCENTER_HTTP_MAX_HEADER_BYTES": "100"},
			"http.max_header_bytes (TASKCENTER_HTTP_MAX_HEADER_BYTES) must be between 4096 (4 KiB) and 67108864 (64 MiB), got 100"},
		{"bad webhook host", map[string]string{"TASKCENTER_WEBHOOKS_ALLOWED_HOSTS": "10.0.0.0/33"},
			`webhooks.allowed_hosts: "10.0.0.0/33" is not a valid address range (TASKCENTER_WEBHOOKS_ALLOWED_HOSTS)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load("../../configs/taskcenter.yaml", envMap(tt.env))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v\nwant it to contain %q", err, tt.want)
			}
		})
	}
}

func TestSessionLimitsFollowTheTakeoverWindow(t *testing.T) {
	t.Parallel()
	cfg, err := Load("../../configs/taskcenter.yaml", envMap(map[string]string{
		"TASKCENTER_WORKER_TAKEOVER_AFTER": "2s", "TASKCENTER_WORKER_HEARTBEAT_INTERVAL": "250ms"}))
	if err != nil {
		t.Fatal(err)
	}
	third := 2 * time.Second / 3
	if cfg.Database.IdleInTransactionTimeout != third || cfg.Database.LockTimeout != third {
		t.Fatalf("idle_in_transaction_timeout %s, lock_timeout %s; want both %s (a third of the takeover window)",
			cfg.Database.IdleInTransactionTimeout, cfg.Database.LockTimeout, third)
	}
	cfg, err = Load("../../configs/taskcenter.yaml", envMap(map[string]string{"TASKCENTER_DATABASE_IDLE_IN_TRANSACTION_TIMEOUT": "4s"}))
	if err != nil || cfg.Database.IdleInTransactionTimeout != 4*time.Second || cfg.Database.LockTimeout != 10*time.Second {
		t.Fatalf("explicit 4s: %+v, %v", cfg.Database, err)
	}
}

func TestUnknownKeyInFileIsRefused(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte("http:\n  adress: \":1\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p, envMap(nil))
	if err == nil || !strings.Contains(err.Error(), "adress") {
		t.Fatalf("error = %v, want it to name the misspelt key", err)
	}
}

func TestFileEntriesMergeIntoTheDefaults(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "c.yaml")
	// One type tuned, one new type with only its queue, one new queue with only a limit.
	file := `
types:
  export:customers: { max_retry: 7 }
  report:weekly: { queue: reports }
queues:
  reports: { backlog_limit: 10 }
`
	if err := os.WriteFile(p, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(p, envMap(map[string]string{"TASKCENTER_AUTH_TOKENS": "0123456789abcdef:carol:admin"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.Types["import:customers"]; !ok {
		t.Fatal("a types: section in the file removed the default import:customers type")
	}
	if got := cfg.Types["export:customers"]; got.MaxRetry != 7 || got.Queue != "exports" || got.RetryBase != 30*time.Second || got.StallAfter != 10*time.Minute {
		t.Fatalf("tuned type lost its other defaults: %+v", got)
	}
	if got := cfg.Types["report:weekly"]; got.MaxRetry != 3 || got.RetryBase != 30*time.Second || got.Timeout != 30*time.Minute ||
		got.MaxRuntime != 6*time.Hour || got.StallAfter != 10*time.Minute {
		t.Fatalf("a new type without max_retry must get the documented defaults (3 retries, 30s base), got %+v", got)
	}
	if got := cfg.Queues["reports"]; got.Concurrency != 2 || got.BacklogLimit != 10 {
		t.Fatalf("new queue = %+v, want concurrency 2 (default) and limit 10", got)
	}
	if cfg.Queues["imports"].Concurrency != 2 || cfg.Queues["exports"].Concurrency != 4 {
		t.Fatalf("default queues lost: %+v", cfg.Queues)
	}
}

func TestExplicitZeroInTheFileIsKept(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte("types:\n  export:tasks: { max_retry: 0, stall_after: 0s }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(p, envMap(map[string]string{"TASKCENTER_AUTH_TOKENS": "0123456789abcdef:carol:admin"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Types["export:tasks"]; got.MaxRetry != 0 || got.StallAfter != 0 {
		t.Fatalf("explicit zeros must stay zero: %+v", got)
	}
}

// A setting given as zero or below takes its default; one above zero stays.
func TestPositiveTakesTheDefaultForZeroAndBelow(t *testing.T) {
	t.Parallel()
	for v, want := range map[time.Duration]time.Duration{-time.Second: time.Minute, 0: time.Minute, time.Second: time.Second} {
		if got := Positive(v, time.Minute); got != want {
			t.Errorf("Positive(%s, 1m) = %s, want %s", v, got, want)
		}
	}
}
