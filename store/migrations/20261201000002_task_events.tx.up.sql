-- The transactional outbox: one row per committed status change, written by the same
-- statement as the transition itself, so no event exists for a change that did not commit and
-- no committed change lacks its event. Webhook deliveries and live status streams read it.
CREATE TABLE task_events (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id    bigint      NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    task_no    text        NOT NULL,
    owner      text        NOT NULL,
    task_type  text        NOT NULL,
    event      text        NOT NULL,  -- task.submitted, task.started, task.succeeded, ...
    status     text        NOT NULL,  -- the task's status after the change
    attempt    int         NOT NULL,
    actor      text        NOT NULL DEFAULT '',  -- who caused it: a user, a worker, "cleanup"
    created_at timestamptz NOT NULL DEFAULT now()
);

--bun:split

CREATE INDEX task_events_task ON task_events (task_id, id);

--bun:split

CREATE INDEX task_events_owner ON task_events (owner, id);

--bun:split

-- The event name of a status change.
CREATE FUNCTION task_event_name(status text, cancel_requested boolean) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE status
        WHEN 'PENDING' THEN 'task.submitted'
        WHEN 'RUNNING' THEN CASE WHEN cancel_requested THEN 'task.cancel_requested' ELSE 'task.started' END
        WHEN 'RETRY_WAIT' THEN 'task.retry_scheduled'
        WHEN 'SUCCESS' THEN 'task.succeeded'
        WHEN 'PARTIAL_SUCCESS' THEN 'task.partially_succeeded'
        WHEN 'FAILED' THEN 'task.failed'
        WHEN 'TIMEOUT' THEN 'task.timed_out'
        WHEN 'CANCELLED' THEN 'task.cancelled'
    END
$$;
