-- Column mappings users saved: a mapping of a file's headers to the import's fields that led
-- to an accepted header, kept per owner under the file's header set (normalised, in any
-- order, hashed), and applied again when that owner imports a file with the same headers.
CREATE TABLE column_mappings (
    owner      text        NOT NULL,
    header_key text        NOT NULL,
    columns    jsonb       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (owner, header_key)
);
