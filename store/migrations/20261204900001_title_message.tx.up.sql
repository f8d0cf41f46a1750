-- A title the product gives a task is a catalogue message (internal/msg): its code and params
-- are kept beside the English title, so every reader sees it in their own language. The
-- title column stays the English (what the list's search matches, what webhooks and old
-- readers show); a title the submitter wrote, and rows older than these columns, have no code.
ALTER TABLE tasks ADD COLUMN title_code text, ADD COLUMN title_params jsonb;

--bun:split

ALTER TABLE tasks_archive ADD COLUMN title_code text, ADD COLUMN title_params jsonb;
