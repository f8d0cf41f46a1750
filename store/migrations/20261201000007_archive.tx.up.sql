-- Archive, not delete: retention moves finished tasks, with their runs, logs and rejected
-- rows, into these tables in one transaction, and folds them into daily aggregates. Archived
-- rows are deleted after cleanup.archive_retention; the aggregates stay.
CREATE TABLE tasks_archive (LIKE tasks INCLUDING DEFAULTS);

--bun:split

ALTER TABLE tasks_archive ADD COLUMN archived_at timestamptz NOT NULL DEFAULT now();

--bun:split

ALTER TABLE tasks_archive ADD PRIMARY KEY (id);

--bun:split

CREATE UNIQUE INDEX tasks_archive_task_no ON tasks_archive (task_no);

--bun:split

CREATE INDEX tasks_archive_archived ON tasks_archive (archived_at);

--bun:split

CREATE TABLE task_runs_archive (LIKE task_runs INCLUDING DEFAULTS);

--bun:split

CREATE INDEX task_runs_archive_task ON task_runs_archive (task_id, attempt);

--bun:split

CREATE TABLE task_logs_archive (LIKE task_logs INCLUDING DEFAULTS);

--bun:split

CREATE INDEX task_logs_archive_task ON task_logs_archive (task_id, id);

--bun:split

CREATE TABLE task_items_archive (LIKE task_items INCLUDING DEFAULTS);

--bun:split

CREATE INDEX task_items_archive_task ON task_items_archive (task_id, row_no);

--bun:split

-- Daily aggregates of finished tasks, kept for good. Durations (first start to end) are a
-- histogram over fixed bounds (stats.DurationBuckets), so days merge and percentiles can be
-- read from any range.
CREATE TABLE task_stats_daily (
    day          date    NOT NULL,
    type         text    NOT NULL,
    status       text    NOT NULL,
    owner        text    NOT NULL,
    tasks        bigint  NOT NULL DEFAULT 0,
    rows_total   bigint  NOT NULL DEFAULT 0,
    rows_success bigint  NOT NULL DEFAULT 0,
    rows_failed  bigint  NOT NULL DEFAULT 0,
    durations    bigint[] NOT NULL,
    PRIMARY KEY (day, type, status, owner)
);
