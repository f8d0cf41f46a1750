package config

import (
	"time"

	"github.com/robfig/cron/v3"
)

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

func defaultCleanup() Cleanup {
	return Cleanup{Spec: "* * * * *", Timezone: "UTC", Queue: "maintenance", OrphanGrace: time.Minute, BatchSize: 500,
		UploadTTL: 24 * time.Hour, TempTTL: 6 * time.Hour, Retention: 30 * 24 * time.Hour, ArchiveRetention: 365 * 24 * time.Hour,
		ScheduleSync: 10 * time.Second}
}

// validate checks the schedule, its time zone and queue, and the round's limits.
func (cl Cleanup) validate(queues map[string]Queue, bad func(string, ...any)) {
	if _, err := cron.ParseStandard(cl.Spec); err != nil {
		bad("cleanup.spec (TASKCENTER_CLEANUP_SPEC) %q is not a cron spec such as \"* * * * *\" or \"@every 30s\": %v", cl.Spec, err)
	}
	if _, err := time.LoadLocation(cl.Timezone); err != nil {
		bad("cleanup.timezone %q is not a time zone such as UTC or Asia/Shanghai", cl.Timezone)
	}
	if _, ok := queues[cl.Queue]; !ok {
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
}
