-- A task's policy is fixed on its row when it is submitted (max_retry and timeout_seconds
-- already were): the retry back-off base, the longest an attempt may run, and how long it may
-- go without progress. A config change then affects only tasks submitted after it, and
-- replicas with different configs (a rolling deploy) decide a task's fate alike. NULL on rows
-- written before this column existed: their worker's config decides, as it did.
ALTER TABLE tasks ADD COLUMN retry_base_ms bigint, ADD COLUMN max_runtime_ms bigint, ADD COLUMN stall_after_ms bigint;

--bun:split

ALTER TABLE tasks_archive ADD COLUMN retry_base_ms bigint, ADD COLUMN max_runtime_ms bigint, ADD COLUMN stall_after_ms bigint;
