-- API tokens managed in the product (issue 17): services and scripts get a token with the
-- scopes they need (tasks:read, tasks:write, admin) and an expiry. Only the token's SHA-256 is
-- kept; the token itself is shown once, when it is created. A revoked token stays listed for
-- the record.
CREATE TABLE api_tokens (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    token_no     text        NOT NULL UNIQUE,                 -- public id: tok_…
    hash         text        NOT NULL UNIQUE,                 -- hex SHA-256 of the token
    prefix       text        NOT NULL,                        -- the token's first characters, to recognise it
    owner        text        NOT NULL,                        -- the user it acts as
    role         text        NOT NULL,                        -- user or admin (admin only with the admin scope)
    name         text        NOT NULL,
    scopes       text[]      NOT NULL,
    created_by   text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    last_used_at timestamptz,
    revoked_at   timestamptz,
    revoked_by   text
);

--bun:split

CREATE INDEX api_tokens_owner ON api_tokens (owner, id);
