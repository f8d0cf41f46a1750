-- Uploaded files, recorded when an upload is accepted: the upload sweeper deletes a file whose
-- record has not been touched for cleanup.upload_ttl and that no waiting or running task
-- needs. (It used to read the file's mtime, which the API had to touch; a row says it.)
CREATE TABLE uploads (
    path     text        PRIMARY KEY,
    sha256   text        NOT NULL,
    size     bigint      NOT NULL,
    first_at timestamptz NOT NULL DEFAULT now(),
    last_at  timestamptz NOT NULL DEFAULT now()
);

--bun:split

CREATE INDEX uploads_last_at ON uploads (last_at);
