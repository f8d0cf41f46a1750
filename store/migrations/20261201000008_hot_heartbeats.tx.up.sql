-- Heart-beats and progress are the most frequent writes. With heartbeat_at in an index every
-- one of them was a non-HOT update (a new index entry per heartbeat). RUNNING tasks are few
-- (at most the workers' total concurrency), so the stale-run and takeover scans read all of
-- them through a partial index that holds no volatile column, and the volatile columns'
-- updates stay on the page (HOT). Leave room on each page for them.
DROP INDEX tasks_running_heartbeat;

--bun:split

CREATE INDEX tasks_running ON tasks (id) WHERE status = 'RUNNING';

--bun:split

ALTER TABLE tasks SET (fillfactor = 80);
