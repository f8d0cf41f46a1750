-- Tasks: the source of truth. asynq only delivers; any Redis state can be rebuilt from here.
CREATE TABLE tasks (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_no           text        NOT NULL UNIQUE,          -- public, unguessable id
    type              text        NOT NULL,
    owner             text        NOT NULL,
    queue             text        NOT NULL,
    priority          int         NOT NULL DEFAULT 0,
    biz_key           text,                                 -- idempotency key (file hash, Idempotency-Key)
    status            text        NOT NULL CHECK (status IN ('PENDING','RUNNING','RETRY_WAIT','SUCCESS','PARTIAL_SUCCESS','FAILED','TIMEOUT','CANCELLED')),
    params            jsonb       NOT NULL DEFAULT '{}',    -- sensitive values masked
    request_id        text,                                 -- the submit's request id, for logs
    progress_current  bigint      NOT NULL DEFAULT 0,
    progress_total    bigint      NOT NULL DEFAULT 0,
    total_count       bigint      NOT NULL DEFAULT 0,
    success_count     bigint      NOT NULL DEFAULT 0,
    failed_count      bigint      NOT NULL DEFAULT 0,
    checkpoint        jsonb,
    attempt           int         NOT NULL DEFAULT 0,       -- fencing token: claims so far
    retry_count       int         NOT NULL DEFAULT 0,       -- automatic retries used in this generation
    max_retry         int         NOT NULL,
    next_retry_at     timestamptz,
    heartbeat_at      timestamptz,
    worker            text,
    cancel_requested  boolean     NOT NULL DEFAULT false,
    error_code        text,
    error_message     text,
    result            jsonb,
    result_expires_at timestamptz,
    timeout_seconds   int         NOT NULL,
    enqueued_at       timestamptz,                          -- last hand-off to asynq; NULL = not handed off
    created_at        timestamptz NOT NULL DEFAULT now(),
    started_at        timestamptz,
    finished_at       timestamptz,
    updated_at        timestamptz NOT NULL DEFAULT now()
);

--bun:split

-- Idempotent submit: one task per (owner, type, biz_key).
CREATE UNIQUE INDEX tasks_owner_type_biz_key ON tasks (owner, type, biz_key) WHERE biz_key IS NOT NULL;

--bun:split

-- List API: a user's tasks newest first; an admin's view of everything newest first.
CREATE INDEX tasks_owner_created ON tasks (owner, created_at DESC, id DESC);

--bun:split

CREATE INDEX tasks_created ON tasks (created_at DESC, id DESC);

--bun:split

-- Waiting work per queue: admission control counts the backlog of one queue.
CREATE INDEX tasks_waiting_queue ON tasks (queue) WHERE status IN ('PENDING','RETRY_WAIT');

--bun:split

-- The orphan rescuer: waiting tasks, least recently handed to asynq first.
CREATE INDEX tasks_waiting_enqueued ON tasks (enqueued_at NULLS FIRST) WHERE status IN ('PENDING','RETRY_WAIT');

--bun:split

-- Stale-run detection and takeover.
CREATE INDEX tasks_running_heartbeat ON tasks (heartbeat_at) WHERE status = 'RUNNING';

--bun:split

-- Result expiry: results whose file is still on disk.
CREATE INDEX tasks_result_expiry ON tasks (result_expires_at) WHERE result_expires_at IS NOT NULL AND (result ->> 'file') IS NOT NULL;

--bun:split

-- Retention of terminal tasks.
CREATE INDEX tasks_finished ON tasks (finished_at) WHERE status IN ('SUCCESS','PARTIAL_SUCCESS','FAILED','TIMEOUT','CANCELLED');

--bun:split

-- One row per execution attempt: every retry leaves its own record.
CREATE TABLE task_runs (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id     bigint      NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    attempt     int         NOT NULL,
    trigger     text        NOT NULL,                      -- first | retry | takeover | resume
    worker      text        NOT NULL,
    status      text        NOT NULL,                      -- RUNNING, then how this attempt ended
    error       text,
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    UNIQUE (task_id, attempt)
);

--bun:split

-- The narrative of a task, shown in its detail view.
CREATE TABLE task_logs (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id    bigint      NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    attempt    int         NOT NULL DEFAULT 0,
    level      text        NOT NULL,
    message    text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

--bun:split

CREATE INDEX task_logs_task ON task_logs (task_id, id);

--bun:split

-- Failed rows of an import.
CREATE TABLE task_items (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id    bigint      NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    row_no     int         NOT NULL,
    field      text        NOT NULL DEFAULT '',
    message    text        NOT NULL,
    raw        jsonb       NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now()
);

--bun:split

CREATE INDEX task_items_task_row ON task_items (task_id, row_no);

--bun:split

-- The business table the import writes and the customer export reads.
CREATE TABLE customers (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    code       text        NOT NULL UNIQUE,
    name       text        NOT NULL,
    phone      text        NOT NULL,
    email      text        NOT NULL DEFAULT '',
    city       text        NOT NULL DEFAULT '',
    level      text        NOT NULL DEFAULT '',
    -- provenance: the import (and its row) that last wrote this customer. It also lets an
    -- import tell "this code appeared earlier in the same file" from "it already existed".
    last_import_task_id bigint,
    last_import_row     int,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

--bun:split

-- One row per cleanup slot: the guard that makes each scheduled round run once across all
-- scheduler replicas.
CREATE TABLE cleanup_rounds (
    slot        timestamptz PRIMARY KEY,
    worker      text        NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    report      jsonb
);

--bun:split

-- Conditions that alert once per episode (a queue's backlog over its threshold): when the
-- condition started, and when its alert fired. The row is deleted when the condition clears.
CREATE TABLE alert_conditions (
    key          text PRIMARY KEY,
    active_since timestamptz NOT NULL DEFAULT now(),
    fired_at     timestamptz
);
