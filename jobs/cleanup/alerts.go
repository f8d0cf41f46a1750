package cleanup

import (
	"context"
	"time"

	"github.com/taskcenter/taskcenter/jobs"
)

// alertGrace is how long a due failure alert is left to the worker that failed the task
// before the round sends it.
const alertGrace = 30 * time.Second

// failureAlerts sends the failure alerts of tasks whose worker died between failing the task
// and sending its alert. The claim is recorded on the task row: each alert goes out once.
func (c *Cleaner) failureAlerts(ctx context.Context) (int, error) {
	tasks, err := c.store.ClaimDueAlerts(ctx, alertGrace, c.cfg.BatchSize)
	if err != nil {
		return 0, err
	}
	for i := range tasks {
		if c.failures != nil {
			c.failures.TaskFailed(ctx, jobs.AlertOf(&tasks[i]))
		}
	}
	return len(tasks), nil
}
