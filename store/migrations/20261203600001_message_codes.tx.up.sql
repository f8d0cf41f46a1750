-- Messages are data: what the product says to a person is stored as a catalogue code and its
-- params (internal/msg) beside the English text, so every reader renders it in its own
-- language. The English columns stay: rows written before these columns existed have only
-- them, and API clients read them.
ALTER TABLE task_logs ADD COLUMN code text, ADD COLUMN params jsonb;

--bun:split

ALTER TABLE task_logs_archive ADD COLUMN code text, ADD COLUMN params jsonb;

--bun:split

ALTER TABLE tasks ADD COLUMN error_params jsonb;

--bun:split

ALTER TABLE tasks_archive ADD COLUMN error_params jsonb;

--bun:split

ALTER TABLE task_runs ADD COLUMN error_code text, ADD COLUMN error_params jsonb;

--bun:split

ALTER TABLE task_runs_archive ADD COLUMN error_code text, ADD COLUMN error_params jsonb;
