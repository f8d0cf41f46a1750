// Package cleanup is the maintenance:cleanup task: the periodic round that re-enqueues
// orphans, times out stale runs, expires result files, deletes unreferenced uploads, aborts
// abandoned multipart uploads and applies retention. Every step is bounded per round. Each
// scheduled slot runs once across all scheduler replicas, guarded by a row in Postgres
// (guard.go).
//
// Each maintenance step lives in its own file (stale_runs.go, takeover.go, orphans.go,
// expired_results.go, uploads.go, temp_files.go, incomplete_uploads.go, orphan_results.go,
// retention.go, archive_purge.go, audit_purge.go, import_images.go, backlog.go, alerts.go), with the constants
// only it uses and its test; scratch.go also holds the sweeper every node runs on its own
// scratch dir, and files.go the listing helpers the file steps share. Round, in this file,
// runs the steps in order and reports.
package cleanup

import (
	"context"
	"log/slog"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/store"
)

// Type is the asynq task type of the periodic round.
const Type = "maintenance:cleanup"

// Config tunes the cleanup.
type Config struct {
	// Schedule is the parsed cron spec; Location its time zone.
	Schedule cron.Schedule
	Location *time.Location
	// OrphanGrace is how long a waiting task may sit without asynq holding it before it is
	// enqueued again.
	OrphanGrace time.Duration
	// TakeoverAfter is the worker setting: RUNNING tasks silent this long are re-delivered.
	TakeoverAfter time.Duration
	// BatchSize bounds every step of a round.
	BatchSize int
	// UploadTTL: uploads older than this that no live task needs are deleted.
	UploadTTL time.Duration
	// TempTTL: scratch entries older than this that no running task is writing are deleted
	// (this node's scratch dir), and so are uploads abandoned under storage.Incoming; incomplete
	// multipart uploads initiated longer ago than this are aborted.
	TempTTL time.Duration
	// Retention: terminal tasks that finished longer ago than this are archived.
	Retention time.Duration
	// ArchiveRetention: archived tasks are deleted this long after they were archived (their
	// daily aggregates stay).
	ArchiveRetention time.Duration
	// BacklogThreshold: a queue with more waiting tasks than this for BacklogFor raises one
	// alert per episode. 0 disables the check.
	BacklogThreshold int
	BacklogFor       time.Duration
	// Queues are the configured queues (a backlog alert re-arms when its queue empties).
	Queues []string
	// AuditRetention: audit rows older than this are deleted (auth.audit.retention). 0 keeps
	// them for good.
	AuditRetention time.Duration
	// UndoTTL: the before-images of imports that ended longer ago than this are deleted
	// (import.undo_ttl); they can no longer be undone.
	UndoTTL time.Duration
}

// Report is what a round did; each count is also logged and exported as a metric.
type Report struct {
	Takeovers       int `json:"silent_tasks_redelivered"`
	Orphans         int `json:"orphans_enqueued"`
	TimedOut        int `json:"timed_out"`
	ResultsExpired  int `json:"results_expired"`
	UploadsDeleted  int `json:"uploads_deleted"`
	TempDeleted     int `json:"temp_files_deleted"`
	UploadsAborted  int `json:"incomplete_uploads_aborted"`
	ResultsOrphaned int `json:"orphan_results_deleted"`
	RetentionPurged int `json:"tasks_archived"`
	ArchivePurged   int `json:"archived_tasks_deleted"`
	AuditPurged     int `json:"audit_rows_deleted"`
	ImportImages    int `json:"import_images_deleted"`
	BacklogAlerts   int `json:"backlog_alerts"`
	FailureAlerts   int `json:"failure_alerts"`
	Errors          int `json:"errors"`
	// TookMS is each step's duration in milliseconds.
	TookMS map[string]float64 `json:"took_ms"`
}

// Observer receives each round's report (metrics).
type Observer interface {
	CleanupRound(r Report)
}

// Cleaner runs cleanup rounds.
type Cleaner struct {
	cfg      Config
	store    *store.Store
	enqueuer *jobs.Enqueuer
	files    storage.Store
	worker   string
	observer Observer
	alerter  BacklogAlerter
	failures jobs.Alerter
	board    *jobs.ProgressBoard
	logger   *slog.Logger

	results resultsCursor // the orphan-results step's position in the results area
}

// Deps are a Cleaner's collaborators; Observer and Alerter may be nil.
type Deps struct {
	Store    *store.Store
	Enqueuer *jobs.Enqueuer
	Files    storage.Store
	Observer Observer
	Alerter  BacklogAlerter
	// TaskAlerter sends the failure alerts whose worker died before sending them.
	TaskAlerter jobs.Alerter
	// Board, when set, announces the status changes the round makes to live streams.
	Board  *jobs.ProgressBoard
	Logger *slog.Logger
}

// New returns a Cleaner; worker names it in the cleanup_rounds table.
func New(cfg Config, worker string, d Deps) *Cleaner {
	return &Cleaner{cfg: cfg, store: d.Store, enqueuer: d.Enqueuer, files: d.Files, worker: worker, observer: d.Observer,
		alerter: d.Alerter, failures: d.TaskAlerter, board: d.Board, logger: d.Logger.With("component", "cleanup")}
}

// Round runs every step once and reports what it did. A failing step is logged and does not
// stop the others.
func (c *Cleaner) Round(ctx context.Context) Report {
	start := time.Now()
	rep := Report{TookMS: map[string]float64{}}
	steps := []struct {
		name string
		run  func(context.Context) (int, error)
		dst  *int
	}{
		{"stale_runs", c.staleRuns, &rep.TimedOut}, // first: a timed-out task is no orphan
		{"takeovers", c.takeovers, &rep.Takeovers}, // then the dead workers' tasks, before anything slow
		{"orphans", c.orphans, &rep.Orphans},
		{"expired_results", c.expiredResults, &rep.ResultsExpired},
		{"uploads", c.uploads, &rep.UploadsDeleted},
		{"temp_files", c.tempFiles, &rep.TempDeleted},
		{"incomplete_uploads", c.incompleteUploads, &rep.UploadsAborted},
		{"orphan_results", c.orphanResults, &rep.ResultsOrphaned},
		{"retention", c.retention, &rep.RetentionPurged},
		{"archive", c.purgeArchive, &rep.ArchivePurged},
		{"audit", c.purgeAudit, &rep.AuditPurged},
		{"import_images", c.purgeImportImages, &rep.ImportImages},
		{"backlog", c.backlog, &rep.BacklogAlerts},
		{"failure_alerts", c.failureAlerts, &rep.FailureAlerts},
	}
	for _, s := range steps {
		began := time.Now()
		n, err := s.run(ctx)
		rep.TookMS[s.name] = float64(time.Since(began).Microseconds()) / 1000
		*s.dst = n
		if err != nil {
			rep.Errors++
			c.logger.Error("cleanup step failed", "step", s.name, "err", err)
		}
		if n > 0 || err != nil {
			c.logger.Info("cleanup step", "step", s.name, "count", n)
		}
	}
	c.logger.Info("cleanup round finished", "took", time.Since(start), "orphans_enqueued", rep.Orphans,
		"timed_out", rep.TimedOut, "results_expired", rep.ResultsExpired, "uploads_deleted", rep.UploadsDeleted,
		"temp_files_deleted", rep.TempDeleted, "incomplete_uploads_aborted", rep.UploadsAborted, "tasks_archived", rep.RetentionPurged, "archived_tasks_deleted", rep.ArchivePurged)
	if c.observer != nil {
		c.observer.CleanupRound(rep)
	}
	return rep
}
