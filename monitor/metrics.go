// Package monitor is what operators see: Prometheus metrics, alerts (log and webhook), the
// asynqmon console behind admin authentication, and log masking.
package monitor

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/taskcenter/taskcenter/internal/batch"
	"github.com/taskcenter/taskcenter/internal/outage"
	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/cleanup"
	"github.com/taskcenter/taskcenter/store"
)

// Metrics holds taskcenter's Prometheus metrics in its own registry.
type Metrics struct {
	reg *prometheus.Registry

	submitted   *prometheus.CounterVec
	finished    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	attempts    *prometheus.CounterVec
	takeovers   *prometheus.CounterVec
	rows        *prometheus.CounterVec
	timeouts    prometheus.Counter
	stalls      *prometheus.CounterVec
	orphans     prometheus.Counter
	cleanup     *prometheus.CounterVec
	cleanupRuns prometheus.Counter
	alerts      *prometheus.CounterVec
	http        *prometheus.HistogramVec
	depUp       *prometheus.GaugeVec
	depErrors   *prometheus.CounterVec
	batchSecs   *prometheus.HistogramVec
	batchRows   *prometheus.HistogramVec
	writeWaits  *prometheus.HistogramVec
}

var (
	_ jobs.Observer    = (*Metrics)(nil)
	_ cleanup.Observer = (*Metrics)(nil)
	_ outage.Observer  = (*Metrics)(nil)
)

// NewMetrics registers the metrics, the Go and process collectors, and the queue collectors
// (asynq's per-state sizes and the database backlog) when inspector and st are given.
func NewMetrics(inspector *asynq.Inspector, queues []string, st *store.Store) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.submitted = counterVec("taskcenter_tasks_submitted_total",
		"Tasks created by a submit, by type.", "type")
	m.finished = counterVec("taskcenter_tasks_finished_total",
		"Tasks that reached a terminal status, by type, status and cause (none, bad_input, fault, timeout, cancelled).", "type", "status", "cause")
	m.duration = histogramVec("taskcenter_task_duration_seconds",
		"Time from a task's first start to its terminal status, by type.",
		[]float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 3 * 3600, 6 * 3600}, "type")
	m.attempts = counterVec("taskcenter_task_attempts_total",
		"Execution attempts started, by type and trigger (first, retry, resume, takeover, manual_retry).", "type", "trigger")
	m.takeovers = counterVec("taskcenter_task_takeovers_total",
		"RUNNING tasks taken over from a worker that stopped heart-beating, by type.", "type")
	m.rows = counterVec("taskcenter_rows_total",
		"Rows handled by row-based tasks (imports), by type and result (success, failed).", "type", "result")
	m.timeouts = counter("taskcenter_heartbeat_timeouts_total",
		"RUNNING tasks marked TIMEOUT by cleanup for lack of a heartbeat.")
	m.stalls = counterVec("taskcenter_tasks_stalled_total",
		"Attempts stopped because they made no progress for the type's stall_after, by type.", "type")
	m.orphans = counter("taskcenter_orphans_reenqueued_total",
		"Tasks cleanup handed to asynq again (lost by Redis, never enqueued, or silent while RUNNING).")
	m.cleanup = counterVec("taskcenter_cleanup_items_total",
		"Items each cleanup step handled, by step.", "step")
	m.cleanupRuns = counter("taskcenter_cleanup_rounds_total",
		"Cleanup rounds this process ran (one per slot across all replicas).")
	m.alerts = counterVec("taskcenter_alerts_total",
		"Alerts raised, by kind.", "kind")
	m.http = histogramVec("taskcenter_http_request_duration_seconds",
		"HTTP request durations, by route and status code.",
		[]float64{0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10}, "route", "code")
	m.depUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "taskcenter_dependency_up",
		Help: "1 when this process reaches the dependency (postgres, redis, identity_provider, object_store; those it uses), 0 during an outage.",
	}, []string{"dependency"})
	m.depErrors = counterVec("taskcenter_dependency_errors_total",
		"Failed operations against a dependency (probes and calls), by dependency (postgres, redis, identity_provider, object_store, webhook_target).", "dependency")
	writeBuckets := []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5}
	m.batchSecs = histogramVec("taskcenter_write_batch_seconds",
		"Duration of each grouped Postgres write (one statement, one commit), by kind (submit, claim, end).",
		writeBuckets, "kind")
	m.batchRows = histogramVec("taskcenter_write_batch_rows",
		"Writes grouped into each flush, by kind (submit, claim, end).",
		prometheus.ExponentialBuckets(1, 2, 11), "kind")
	m.writeWaits = histogramVec("taskcenter_write_wait_seconds",
		"How long each submit, claim or ending waited from arrival to its committed answer, by kind.",
		writeBuckets, "kind")
	m.reg.MustRegister(m.depUp, m.depErrors, m.batchSecs, m.batchRows, m.writeWaits)
	m.reg.MustRegister(m.submitted, m.finished, m.duration, m.attempts, m.takeovers, m.rows, m.timeouts, m.stalls, m.orphans,
		m.cleanup, m.cleanupRuns, m.alerts, m.http,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if inspector != nil {
		m.reg.MustRegister(&queueCollector{inspector: inspector, queues: queues})
	}
	if st != nil {
		m.reg.MustRegister(&backlogCollector{store: st})
	}
	return m
}

// counterVec is a counter with labels; counter one without.
func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// histogramVec is a histogram with labels.
func histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}

func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, Timeout: 10 * time.Second})
}

// Writes is the observer of one kind of grouped write (submit, claim, end), its series
// resolved once rather than per write.
func (m *Metrics) Writes(kind string) batch.Observer {
	return writeSeries{flush: m.batchSecs.WithLabelValues(kind), rows: m.batchRows.WithLabelValues(kind),
		wait: m.writeWaits.WithLabelValues(kind)}
}

// writeSeries is one kind's write metrics.
type writeSeries struct{ flush, rows, wait prometheus.Observer }

func (w writeSeries) Flushed(rows int, took time.Duration) {
	w.flush.Observe(took.Seconds())
	w.rows.Observe(float64(rows))
}

func (w writeSeries) Waited(wait time.Duration) { w.wait.Observe(wait.Seconds()) }

// TaskSubmitted counts a created task.
func (m *Metrics) TaskSubmitted(taskType string) { m.submitted.WithLabelValues(taskType).Inc() }

// AttemptStarted implements jobs.Observer.
func (m *Metrics) AttemptStarted(taskType, trigger string) {
	m.attempts.WithLabelValues(taskType, trigger).Inc()
	if trigger == "takeover" {
		m.takeovers.WithLabelValues(taskType).Inc()
	}
}

// TaskFinished implements jobs.Observer.
func (m *Metrics) TaskFinished(taskType string, status store.Status, cause task.Cause, took time.Duration) {
	m.finished.WithLabelValues(taskType, string(status), string(cause)).Inc()
	if took > 0 {
		m.duration.WithLabelValues(taskType).Observe(took.Seconds())
	}
}

// RowsProcessed implements jobs.Observer.
func (m *Metrics) RowsProcessed(taskType string, success, failed int) {
	m.rows.WithLabelValues(taskType, "success").Add(float64(success))
	m.rows.WithLabelValues(taskType, "failed").Add(float64(failed))
}

// DependencyUp implements outage.Observer.
func (m *Metrics) DependencyUp(name string, up bool) {
	v := 0.0
	if up {
		v = 1
	}
	m.depUp.WithLabelValues(name).Set(v)
}

// DependencyError implements outage.Observer.
func (m *Metrics) DependencyError(name string) { m.depErrors.WithLabelValues(name).Inc() }

// AttemptStalled implements jobs.Observer.
func (m *Metrics) AttemptStalled(taskType string) { m.stalls.WithLabelValues(taskType).Inc() }

// CleanupRound implements cleanup.Observer.
func (m *Metrics) CleanupRound(r cleanup.Report) {
	m.cleanupRuns.Inc()
	m.timeouts.Add(float64(r.TimedOut))
	m.orphans.Add(float64(r.Orphans + r.Takeovers))
	for step, n := range map[string]int{"takeovers": r.Takeovers, "orphans": r.Orphans, "stale_runs": r.TimedOut,
		"expired_results": r.ResultsExpired, "uploads": r.UploadsDeleted, "temp_files": r.TempDeleted, "incomplete_uploads": r.UploadsAborted, "orphan_results": r.ResultsOrphaned,
		"retention": r.RetentionPurged, "archive": r.ArchivePurged, "failure_alerts": r.FailureAlerts, "import_images": r.ImportImages} {
		m.cleanup.WithLabelValues(step).Add(float64(n))
	}
}

// AlertRaised counts an alert.
func (m *Metrics) AlertRaised(kind string) { m.alerts.WithLabelValues(kind).Inc() }

// ObserveHTTP records one request (httpapi.Deps.Observe).
func (m *Metrics) ObserveHTTP(route string, status int, took time.Duration) {
	m.http.WithLabelValues(route, strconv.Itoa(status)).Observe(took.Seconds())
}

// queueCollector reports asynq's queue sizes per state at scrape time.
type queueCollector struct {
	inspector *asynq.Inspector
	queues    []string
}

var (
	queueTasksDesc = prometheus.NewDesc("taskcenter_queue_tasks", "Jobs in an asynq queue, by state (pending, active, scheduled, retry, archived, completed).",
		[]string{"queue", "state"}, nil)
	queueLatencyDesc = prometheus.NewDesc("taskcenter_queue_latency_seconds", "Age of the oldest pending job in an asynq queue.",
		[]string{"queue"}, nil)
	queueUpDesc = prometheus.NewDesc("taskcenter_queue_scrape_success", "1 when the queue's sizes could be read from Redis, else 0.",
		[]string{"queue"}, nil)
	backlogDesc = prometheus.NewDesc("taskcenter_tasks_waiting", "Tasks PENDING or RETRY_WAIT in the database, by queue: the backlog.",
		[]string{"queue"}, nil)
)

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueTasksDesc
	ch <- queueLatencyDesc
	ch <- queueUpDesc
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	for _, q := range c.queues {
		info, err := c.inspector.GetQueueInfo(q)
		if err != nil {
			ch <- prometheus.MustNewConstMetric(queueUpDesc, prometheus.GaugeValue, 0, q)
			continue
		}
		ch <- prometheus.MustNewConstMetric(queueUpDesc, prometheus.GaugeValue, 1, q)
		for state, n := range map[string]int{"pending": info.Pending, "active": info.Active, "scheduled": info.Scheduled,
			"retry": info.Retry, "archived": info.Archived, "completed": info.Completed} {
			ch <- prometheus.MustNewConstMetric(queueTasksDesc, prometheus.GaugeValue, float64(n), q, state)
		}
		ch <- prometheus.MustNewConstMetric(queueLatencyDesc, prometheus.GaugeValue, info.Latency.Seconds(), q)
	}
}

// backlogCollector reports the waiting tasks per queue from Postgres, the source of truth.
type backlogCollector struct{ store *store.Store }

func (c *backlogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- backlogDesc
	ch <- ownerBacklogDesc
}

// ownerBacklogDesc is the most waiting tasks any one user has in a queue (fair share): a
// figure, never a name — no user name or id reaches a label value.
var ownerBacklogDesc = prometheus.NewDesc("taskcenter_owner_tasks_waiting_max",
	"PENDING and RETRY_WAIT tasks of the user with the most of them, per queue.", []string{"queue"}, nil)

func (c *backlogCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.store.WaitingByQueue(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(backlogDesc, err)
		return
	}
	for q, n := range counts {
		ch <- prometheus.MustNewConstMetric(backlogDesc, prometheus.GaugeValue, float64(n), q)
	}
	owners, err := c.store.TopWaitingOwners(ctx, 1)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(ownerBacklogDesc, err)
		return
	}
	for _, o := range owners {
		ch <- prometheus.MustNewConstMetric(ownerBacklogDesc, prometheus.GaugeValue, float64(o.Waiting), o.Queue)
	}
}
