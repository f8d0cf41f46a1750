package monitor

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/store"
)

// JobsPath prefixes the console's way from a task to its job: GET /monitor/jobs/<task id>
// (the page links there for admins). A task id is what people know; asynq knows the job as
// <task id>-a<attempt> in one of the lanes of the task's queue, which only the task row and
// Redis can tell.
const JobsPath = ConsolePath + "/jobs/"

// serveJob answers GET /monitor/jobs/<task id> with a redirect to the job's page in asynqmon
// (the lane and attempt the task row names), or, when Redis no longer holds the job (it finished and
// asynq's retention dropped it, or it was never enqueued), to the queue's page.
func (c *Console) serveJob(w http.ResponseWriter, r *http.Request) {
	taskNo := strings.TrimPrefix(r.URL.Path, JobsPath)
	if no, ok := task.OfJob(taskNo); ok { // a job id works too
		taskNo = no
	}
	if c.cfg.Tasks == nil || taskNo == "" || strings.Contains(taskNo, "/") {
		http.NotFound(w, r)
		return
	}
	t, err := c.cfg.Tasks.Get(r.Context(), taskNo, store.Scope{Admin: true})
	switch {
	case errors.Is(err, store.ErrNotFound):
		http.Error(w, c.say(w, r, "console.no_task", map[string]string{"task": taskNo}), http.StatusNotFound)
		return
	case err != nil:
		c.logger.Error("console: find a task's job", "task", taskNo, "err", err)
		http.Error(w, c.say(w, r, "console.task_unreadable", nil), http.StatusServiceUnavailable)
		return
	}
	job, lane := jobs.JobID(t.TaskNo, t.Attempt), jobs.Lane(t)
	if _, err := c.inspector.GetTaskInfo(lane, job); err == nil {
		http.Redirect(w, r, ConsolePath+"/queues/"+url.PathEscape(lane)+"/tasks/"+url.PathEscape(job), http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, ConsolePath+"/queues/"+url.PathEscape(t.Queue), http.StatusSeeOther)
}
