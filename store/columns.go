package store

// The statements run through store/pg (One, All, Exec), always with bound parameters, and
// name their columns (see the package doc of store/pg): these lists are this package's
// models' columns. TestColumnListsMatchModels keeps the lists and the models in step.

// Column lists of the models, in model order.
const (
	taskColumns = `id, task_no, type, title, title_code, title_params, owner, queue, priority, biz_key, status, params, request_id, progress_current,
		progress_total, total_count, success_count, failed_count, checkpoint, attempt, retry_count, max_retry,
		next_retry_at, heartbeat_at, worker, cancel_requested, error_code, error_message, error_params, result, result_expires_at,
		timeout_seconds, retry_base_ms, max_runtime_ms, stall_after_ms, enqueued_at, alert_due_at, alerted_at, created_at, started_at,
		finished_at, updated_at`
	runColumns   = `id, task_id, attempt, trigger, worker, status, error, error_code, error_params, started_at, finished_at`
	logColumns   = `id, task_id, attempt, level, message, code, params, created_at`
	itemColumns  = `id, task_id, row_no, field, message, messages, raw, created_at`
	roundColumns = `slot, worker, started_at, finished_at, report`
	eventColumns = `id, task_id, task_no, owner, task_type, event, status, attempt, actor, created_at`
)
