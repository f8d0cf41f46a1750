-- The task list's per-status counts and status tabs. One user's tasks grouped by status are
-- counted from this index alone once vacuum has marked the pages all-visible (finished
-- tasks, most of the table, no longer change) instead of visiting each of the user's rows:
-- with 300 k tasks over 50 users, a user's counts read from the rows took 56 ms (cold
-- cache; 8–19 ms warm), from an owner-and-status index alone 1 ms. A tab of a rare status
-- (TIMEOUT, FAILED) reads only that status's tasks. Each status change adds an entry:
-- BenchmarkHotPath wrote about 5 % more WAL per task with it (14 % with created_at and id in
-- the key as well, which only a date-filtered count would have used).
CREATE INDEX tasks_owner_status ON tasks (owner, status);
