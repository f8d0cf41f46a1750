-- Recurring tasks users define. Every scheduler replica feeds the enabled ones to asynq's
-- periodic task manager; each fire creates its task through the normal submit path, with a
-- biz key of (schedule, slot), so a slot yields one task however many schedulers fire it.
CREATE TABLE schedules (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    schedule_no   text        NOT NULL UNIQUE,          -- public id
    owner         text        NOT NULL,
    type          text        NOT NULL,
    params        jsonb       NOT NULL DEFAULT '{}',
    priority      int         NOT NULL DEFAULT 0,       -- 0: the type's default
    cron          text        NOT NULL,
    timezone      text        NOT NULL DEFAULT 'UTC',
    paused        boolean     NOT NULL DEFAULT false,
    last_fired_at timestamptz,
    last_task_no  text,
    last_outcome  text,                                 -- created | skipped: <why>
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);

--bun:split

CREATE INDEX schedules_owner ON schedules (owner, id);

--bun:split

-- One row per (schedule, slot) that fired: what it did. The primary key is the per-slot guard
-- for the record; the task's biz key is the guard for the task itself.
CREATE TABLE schedule_fires (
    schedule_id bigint      NOT NULL REFERENCES schedules (id) ON DELETE CASCADE,
    slot        timestamptz NOT NULL,
    task_no     text,
    outcome     text        NOT NULL,
    fired_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (schedule_id, slot)
);
