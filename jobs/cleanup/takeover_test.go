package cleanup_test

import (
	"context"
	"testing"

	"github.com/taskcenter/taskcenter/jobs"
)

// A worker killed soon after its task was submitted: the task's enqueued_at (stamped at submit)
// is recent, well within the orphan grace. Recovery is judged by the heartbeat: the task is
// re-delivered once its heartbeat is older than the takeover window, not a grace later, into
// the resume lane that workers drain before new work; and only once per silence.
func TestSilentRunningTaskIsRedeliveredByHeartbeatNotBySubmitTime(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100)
	ctx := context.Background()
	task, _ := f.running("killed")
	f.Exec("UPDATE tasks SET heartbeat_at = now() - interval '40 seconds', enqueued_at = now() - interval '45 seconds' WHERE id = ?", task.ID)
	if rep := f.cleaner.Round(ctx); rep.Takeovers != 1 {
		t.Fatalf("report = %+v, want the silent task re-delivered (heartbeat 40s old, takeover after 30s)", rep)
	}
	info, err := f.insp.GetTaskInfo("exports.resume", jobs.JobID(task.TaskNo, 1))
	if err != nil {
		t.Fatalf("not in the resume lane: %v", err)
	}
	if info.Queue != "exports.resume" {
		t.Fatalf("queue = %s", info.Queue)
	}
	if rep := f.cleaner.Round(ctx); rep.Takeovers != 0 {
		t.Fatalf("second round re-delivered it again: %+v", rep)
	}
}
