package config

import (
	"cmp"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
)

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
	// retry. 0 means no cap. Default 4 for imports, 8 for exports.
	MaxRunningPerOwner int `yaml:"max_running_per_owner"`
	// MaxWaitingPerOwner caps one user's waiting tasks in this queue: a submit over it answers
	// 429 owner_waiting_limit with Retry-After, so one user's flood does not fill the queue's
	// backlog for everyone. 0 means no cap. Default 100 for imports, 200 for exports.
	MaxWaitingPerOwner int `yaml:"max_waiting_per_owner"`
}

// defaultQueue is the pool a queue named only in the file gets for the fields it leaves out.
func defaultQueue() Queue { return Queue{Concurrency: 2, Priority: "strict"} }

// defaultQueues are the built-in pools: defaultQueue's, each with its own concurrency.
func defaultQueues() map[string]Queue {
	queues := map[string]Queue{}
	for name, pool := range map[string]struct{ concurrency, running, waiting int }{
		// One user's share: more than a person starts by hand, far less than the backlog.
		"imports": {2, 4, 100}, "exports": {4, 8, 200},
		// No user submits here: the cleanup round, and the benchmark type (off by default).
		"maintenance": {1, 0, 0}, "bench": {8, 0, 0},
	} {
		q := defaultQueue()
		q.Concurrency, q.MaxRunningPerOwner, q.MaxWaitingPerOwner = pool.concurrency, pool.running, pool.waiting
		queues[name] = q
	}
	return queues
}

// validate checks one queue's pool and limits.
func (q Queue) validate(name string, bad func(string, ...any)) {
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

// DefaultType is the documented policy of a type on queue: what a field that neither the
// type nor the configuration sets gets.
func DefaultType(queue string) TaskType {
	return TaskType{Queue: queue, MaxRetry: 3, RetryBase: 30 * time.Second, Timeout: 30 * time.Minute, MaxRuntime: 6 * time.Hour,
		StallAfter: 10 * time.Minute, Priority: 5}
}

// withDefaults gives the fields left at zero that cannot mean "none" their default: a zero
// max_retry or stall_after is kept, as it says no retries or no stall check.
func (t TaskType) withDefaults() TaskType {
	d := DefaultType(t.Queue)
	t.RetryBase = cmp.Or(t.RetryBase, d.RetryBase)
	t.Timeout = cmp.Or(t.Timeout, d.Timeout)
	t.MaxRuntime = cmp.Or(t.MaxRuntime, d.MaxRuntime)
	t.Priority = cmp.Or(t.Priority, d.Priority)
	return t
}

// defaultTypes are the built-in types; bench:noop is off until a benchmark turns it on.
func defaultTypes() map[string]TaskType {
	return map[string]TaskType{
		"export:customers": DefaultType("exports"),
		"export:tasks":     DefaultType("exports"),
		"import:customers": DefaultType("imports"),
		"bench:noop": {Queue: "bench", MaxRetry: 0, RetryBase: time.Second, Timeout: 5 * time.Minute, MaxRuntime: time.Minute,
			StallAfter: time.Minute, Priority: 5, Disabled: true},
	}
}

// validate checks one type's policy against the queues and the worker's timing rules.
func (t TaskType) validate(name string, queues map[string]Queue, w Worker, bad func(string, ...any)) {
	if _, ok := queues[t.Queue]; !ok {
		bad("types.%s.queue %q is not defined under queues (have %s)", name, t.Queue, strings.Join(slices.Sorted(maps.Keys(queues)), ", "))
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
	types, err := mergeEntries("types", def.Types, raw.Types, func(string) TaskType { return DefaultType("") })
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
	t := declared.withDefaults()
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
	t.validate(name, c.Queues, c.Worker, bad)
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
		t = t.withDefaults()
		if t.StallAfter < 0 {
			t.StallAfter = 0
		}
		c.Types[name] = t
	}
}
