package jobs

import (
	"encoding/json"
	"time"

	"github.com/taskcenter/taskcenter/store"
)

// Bridges for TestRuntimeModel (model_test.go). That test drives cleanup.Cleaner, and
// jobs/cleanup imports jobs, so it has to live in the external package jobs_test; these give
// it the job body format without copying it, so a change to payload cannot leave the model
// delivering jobs the runtime no longer reads.

// ModelPayload is the asynq job body Enqueue writes for t waiting under attempt: the model
// uses it to deliver a task again as asynq does when it redelivers a job.
func ModelPayload(t *store.Task, attempt int) []byte {
	b, err := json.Marshal(payload{TaskID: t.ID, TaskNo: t.TaskNo, Attempt: attempt, RequestID: t.RequestID})
	if err != nil {
		panic(err)
	}
	return b
}

// ModelJobTask reads which task, and which waiting attempt, a job body names.
func ModelJobTask(body []byte) (taskID int64, attempt int, ok bool) {
	var p payload
	if err := json.Unmarshal(body, &p); err != nil || p.TaskID == 0 {
		return 0, 0, false
	}
	return p.TaskID, p.Attempt, true
}

// ModelWithin is within: the model waits for its deliveries the way the runtime waits for
// its handlers.
func ModelWithin(timeout time.Duration, f func()) bool { return within(timeout, f) }
