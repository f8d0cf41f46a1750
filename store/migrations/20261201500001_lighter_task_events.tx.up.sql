-- Lighter writes on the hot path (issue 15). Two per-row costs of every transition go:
--
-- 1. The BEFORE INSERT trigger on task_events (a PL/pgSQL call and two SPI queries per event,
--    ~10-15 % of Postgres's CPU per no-op task in store.BenchmarkHotPath). The transitions now
--    compute webhooks_at in the INSERT itself (store.insertEvents): NULL (left for the
--    fan-out) when the task has a bound subscription or its owner has one that wants the
--    event, now() otherwise.
--    Exactness for a bound subscription (notify_url) moves onto the task row: creating one
--    sets tasks.webhook_bound in an UPDATE, which waits for (and is waited for by) every
--    transition of the task, as the FOR SHARE lock did. A transition that waited re-reads the
--    row (READ COMMITTED) and so sees webhook_bound = true; one that committed first has its
--    event delivered by the subscription itself, which reads the task's events after its
--    UPDATE. An owner's subscription hears of events whose statement starts after it committed
--    (an event whose statement ran while the subscription was being created may or may not be
--    announced to it, as before).
--
-- 2. The foreign keys of task_runs and task_events to tasks: each inserted row ran an RI check
--    (an SPI query taking a KEY SHARE lock on the task row its own statement had just updated,
--    ~5 %). Both tables are written only by the store's transition statements, in the statement
--    that updates (and so holds) the task row, and the archive deletes a task's runs and events
--    with the task in one transaction (store.ArchiveTasks). task_logs and task_items keep
--    theirs: they are not written per task on the hot path.
ALTER TABLE tasks ADD COLUMN webhook_bound boolean NOT NULL DEFAULT false;

--bun:split

UPDATE tasks SET webhook_bound = true WHERE id IN (SELECT task_id FROM webhook_subscriptions WHERE task_id IS NOT NULL);

--bun:split

DROP TRIGGER task_events_webhooks_due ON task_events;

--bun:split

DROP FUNCTION task_events_webhooks_due();

--bun:split

ALTER TABLE task_runs DROP CONSTRAINT task_runs_task_id_fkey;

--bun:split

ALTER TABLE task_events DROP CONSTRAINT task_events_task_id_fkey;
