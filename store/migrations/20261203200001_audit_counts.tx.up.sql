-- Refusals nobody was identified for (no credential, a refused credential, a throttled
-- attempt) are counted instead of written one row each: one row per client address, minute
-- (the database's clock), via, action and status, whose count is the attempts it stands
-- for. A flood of junk credentials is then a row a minute, not a row a request. Every other
-- row keeps count 1 and no minute. Old binaries name their columns and never set these.
ALTER TABLE audit_events ADD COLUMN IF NOT EXISTS count integer NOT NULL DEFAULT 1;
ALTER TABLE audit_events ADD COLUMN IF NOT EXISTS minute timestamptz;

--bun:split

CREATE UNIQUE INDEX IF NOT EXISTS audit_events_counted ON audit_events (client_addr, minute, via, action, status)
    WHERE minute IS NOT NULL;
