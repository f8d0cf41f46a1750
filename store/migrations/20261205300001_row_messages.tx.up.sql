-- A rejected row's problems are catalogue messages (internal/task FieldMessage: field, code,
-- params), kept beside the English text, so every reader says them in its own language and
-- the breakdown counts them by field and reason. field and message stay as they were: rows
-- stored before this column have only them (messages NULL), and API clients read them.
ALTER TABLE task_items ADD COLUMN messages jsonb;

--bun:split

ALTER TABLE task_items_archive ADD COLUMN messages jsonb;
