-- The audit trail (issue 17): who did what to which object, when, from where, through which
-- request, and how it ended. Rows of a change that commits are written in the same statement
-- or transaction as the change; refusals are written on their own.
CREATE TABLE audit_events (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    actor       text        NOT NULL,                        -- the user ('' when nobody was identified)
    via         text        NOT NULL DEFAULT '',             -- how: token, api_token, jwt, gateway, session, console
    action      text        NOT NULL,                        -- task.submit, task.cancel, token.create, auth.sign_in, …
    target      text        NOT NULL DEFAULT '',             -- tsk_…, sch_…, whk_…, tok_…, a queue
    outcome     text        NOT NULL,                        -- success, denied (401/403), refused (other 4xx), error
    status      integer     NOT NULL DEFAULT 0,              -- the HTTP status answered, when there was one
    detail      text        NOT NULL DEFAULT '',
    client_addr text        NOT NULL DEFAULT '',
    request_id  text        NOT NULL DEFAULT ''
);

--bun:split

CREATE INDEX audit_events_at ON audit_events (at);

--bun:split

CREATE INDEX audit_events_target ON audit_events (target, id) WHERE target <> '';

--bun:split

CREATE INDEX audit_events_actor ON audit_events (actor, id);
