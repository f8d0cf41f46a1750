-- Completion webhooks (issue 13). A subscription is a URL a user (or one task, through
-- notify_url) wants to be told of; the dispatcher fans each committed task event out into one
-- delivery per matching subscription and sends it until the receiver answers 2xx or the
-- delivery's window runs out.
CREATE TABLE webhook_subscriptions (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sub_no      text        NOT NULL UNIQUE,                 -- public id: whk_…
    owner       text        NOT NULL,                        -- whose tasks it hears of
    url         text        NOT NULL,
    events      text[]      NOT NULL,                        -- event names it wants
    secret      text        NOT NULL,                        -- HMAC key of the signature (shown once)
    task_id     bigint      REFERENCES tasks (id) ON DELETE CASCADE, -- set: bound to one task (notify_url)
    created_by  text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

--bun:split

CREATE INDEX webhook_subscriptions_owner ON webhook_subscriptions (owner, id) WHERE task_id IS NULL;

--bun:split

CREATE UNIQUE INDEX webhook_subscriptions_task ON webhook_subscriptions (task_id, url) WHERE task_id IS NOT NULL;

--bun:split

-- The fan-out marker: an event is fanned out (its deliveries created) exactly once, by the
-- dispatcher that locks it (FOR UPDATE SKIP LOCKED) and sets this. A marker, not an "id seen"
-- cursor: ids are drawn at insert but commit out of order, so a cursor would skip an event
-- committed late with a smaller id. Events that existed before webhooks were never to be
-- announced: they get the time of this migration (a constant default, so no table rewrite);
-- new events start unmarked.
ALTER TABLE task_events ADD COLUMN webhooks_at timestamptz DEFAULT now();

--bun:split

ALTER TABLE task_events ALTER COLUMN webhooks_at DROP DEFAULT;

--bun:split

CREATE INDEX task_events_webhooks_pending ON task_events (id) WHERE webhooks_at IS NULL;

--bun:split

-- One event for one subscription. Its payload is fixed when it is created, so every attempt
-- sends the same body under the same event id (at least once; receivers de-duplicate).
-- No foreign key to task_events: a delivery outlives the pruning of its event.
CREATE TABLE webhook_deliveries (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_no     text        NOT NULL UNIQUE,             -- public id: dlv_…
    subscription_id bigint      NOT NULL REFERENCES webhook_subscriptions (id) ON DELETE CASCADE,
    event_id        bigint      NOT NULL,                    -- task_events.id; sent as evt_<id>
    event           text        NOT NULL,
    task_no         text        NOT NULL,
    payload         jsonb       NOT NULL,
    state           text        NOT NULL DEFAULT 'pending',  -- pending | sending | delivered | dead
    attempts        int         NOT NULL DEFAULT 0,
    due_at          timestamptz NOT NULL DEFAULT now(),      -- pending: next attempt; sending: lease end
    window_start    timestamptz NOT NULL DEFAULT now(),      -- retries stop max_age after this
    last_status     int,
    last_error      text,
    delivered_at    timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (subscription_id, event_id)
);

--bun:split

CREATE INDEX webhook_deliveries_due ON webhook_deliveries (due_at) WHERE state IN ('pending', 'sending');

--bun:split

CREATE INDEX webhook_deliveries_subscription ON webhook_deliveries (subscription_id, id);

--bun:split

-- Each try of a delivery: what the receiver answered, how long it took, what went wrong.
CREATE TABLE webhook_attempts (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id bigint      NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    attempt     int         NOT NULL,
    status_code int,                                          -- null: no HTTP answer
    latency_ms  int         NOT NULL,
    error       text,
    created_at  timestamptz NOT NULL DEFAULT now()
);

--bun:split

CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id, id);
