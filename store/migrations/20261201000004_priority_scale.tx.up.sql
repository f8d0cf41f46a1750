-- Priorities run from 1 (first) to 9 (last); 5 is the default. Rows from before the scale
-- carried 0, which nothing read.
ALTER TABLE tasks ALTER COLUMN priority SET DEFAULT 5;

--bun:split

UPDATE tasks SET priority = 5 WHERE priority = 0;
