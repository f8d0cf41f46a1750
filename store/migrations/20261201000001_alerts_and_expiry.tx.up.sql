-- A failure alert is recorded on the task row: due when retries run out, sent once by whoever
-- claims it (the worker that failed the task, or the cleanup round if that worker died).
ALTER TABLE tasks ADD COLUMN alert_due_at timestamptz, ADD COLUMN alerted_at timestamptz;

--bun:split

CREATE INDEX tasks_alert_due ON tasks (alert_due_at) WHERE alert_due_at IS NOT NULL AND alerted_at IS NULL;

--bun:split

-- Result expiry covers an import's error report as well as an export's result file.
DROP INDEX tasks_result_expiry;

--bun:split

CREATE INDEX tasks_result_expiry ON tasks (result_expires_at)
    WHERE result_expires_at IS NOT NULL AND ((result ->> 'file') IS NOT NULL OR (result ->> 'error_report') IS NOT NULL);
