-- The codes of one import's file, the first row of each: a dry run finds a code repeated in
-- a later batch here (it writes no customers to stamp), and a replace import removes the
-- customers whose code is not here. Written in each batch's transaction with its
-- checkpoint, so a resumed attempt sees exactly the codes the committed batches hold, and
-- deleted in the transaction that ends the import's last step. It is an ordinary (logged)
-- table: an unlogged one is emptied by a Postgres crash, and a replace that resumed after
-- that would remove every customer of its own file.
CREATE TABLE import_codes (
    task_id bigint NOT NULL,
    code    text   NOT NULL,
    row_no  int    NOT NULL,
    PRIMARY KEY (task_id, code)
);

--bun:split

-- The before-image of each customer a real import inserted, changed or removed, written in
-- the batch's transaction: an undo restores it. before is the row as it was (NULL for a row
-- the import inserted); removed marks a customer a replace import deleted. Kept for
-- import.undo_ttl after the import ends (jobs/cleanup deletes older ones).
CREATE TABLE import_before_images (
    task_id bigint  NOT NULL,
    code    text    NOT NULL,
    row_no  int,
    before  jsonb,
    removed boolean NOT NULL DEFAULT false,
    PRIMARY KEY (task_id, code)
);
