// Package config loads taskcenter's configuration: built-in defaults, then a YAML file, then
// TASKCENTER_* environment variables, validated once at start-up.
package config

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"
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
	// Schedules bounds users' recurring tasks: how often, how many, when they pause.
	Schedules Schedules `yaml:"schedules"`
}

// Positive returns v when it is above zero, else def: what a component uses for a setting it
// was given as zero (left out) or below zero, def being the setting's default from Default.
func Positive[T ~int | ~int64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Default returns the built-in defaults: a working one-box set-up. Each section's defaults
// come from its default func, next to its type; other packages read them here rather than
// keep a copy.
func Default() Config {
	return Config{
		DataDir:  "./data",
		Storage:  defaultStorage(),
		HTTP:     defaultHTTP(),
		Database: defaultDatabase(),
		Redis:    defaultRedis(),
		Worker:   defaultWorker(),
		Queues:   defaultQueues(),
		Types:    defaultTypes(),
		Export:   defaultExport(),
		Import:   defaultImport(),
		Alerts:   defaultAlerts(),
		Console:  defaultConsole(),
		Metrics:  defaultMetrics(),
		Webhooks: defaultWebhooks(),
		Cleanup:  defaultCleanup(),
		Auth:     defaultAuth(),
		Log:      defaultLog(),
		Web:      defaultWeb(),
		Events:   defaultEvents(),

		Schedules: defaultSchedules(),
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
// words an operator can act on. Each section checks itself; the sections whose rules depend
// on another are given it (the database and the types against the worker's timing, the types
// and the cleanup round against the queues).
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if c.DataDir == "" {
		bad("data_dir (TASKCENTER_DATA_DIR) must be set to a writable directory")
	}
	for _, section := range []interface {
		validate(bad func(string, ...any))
	}{
		c.Storage, c.HTTP, c.Redis, c.Auth, c.Worker, c.Export, c.Import, c.Alerts, c.Console, c.Metrics, c.Log,
		c.Webhooks, c.Web, c.Events, c.Schedules,
	} {
		section.validate(bad)
	}
	c.Database.validate(c.Worker, bad)
	if len(c.Queues) == 0 {
		bad("queues must define at least one queue")
	}
	for name, q := range c.Queues {
		q.validate(name, bad)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Types)) {
		c.Types[name].validate(name, c.Queues, c.Worker, bad)
	}
	c.Cleanup.validate(c.Queues, bad)
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
