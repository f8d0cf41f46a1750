-- Fair share per owner: a submit counts the owner's waiting tasks in the queue, a claim the
-- owner's running ones.
CREATE INDEX tasks_waiting_queue_owner ON tasks (queue, owner) WHERE status IN ('PENDING','RETRY_WAIT');

--bun:split

CREATE INDEX tasks_running_queue_owner ON tasks (queue, owner) WHERE status = 'RUNNING';
