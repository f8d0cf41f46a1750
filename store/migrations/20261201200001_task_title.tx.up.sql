-- A task's title, rendered from its type's title template at submit: what lists show.
ALTER TABLE tasks ADD COLUMN title text NOT NULL DEFAULT '';

--bun:split

ALTER TABLE tasks_archive ADD COLUMN title text NOT NULL DEFAULT '';
