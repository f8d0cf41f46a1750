-- The import that inserted each customer, and the row of its file. An undo deletes the
-- customers its import inserted: marking them here (nullable columns: no rewrite, no index)
-- instead of writing a before-image row for each keeps a big import of new customers as cheap
-- as it was; the undo finds them with one scan when it starts (customers.ImagesToUndo).
ALTER TABLE customers ADD COLUMN created_by_task_id bigint, ADD COLUMN created_by_row int;
