package task_test

import (
	"testing"

	"github.com/taskcenter/taskcenter/internal/task"
)

// A job id leads back to its task whatever the attempt; anything else that merely ends in
// -a<something> does not.
func TestOfJobReadsBackWhatJobIDWrites(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		job  string
		task string
		ok   bool
	}{
		{task.JobID("tsk_7HQ2", 0), "tsk_7HQ2", true},
		{task.JobID("tsk_7HQ2", 12), "tsk_7HQ2", true},
		{task.JobID("tsk_a-a1", 3), "tsk_a-a1", true}, // the last -a is the attempt's
		{"tsk_7HQ2", "", false},
		{"tsk_7HQ2-a", "", false},
		{"tsk_7HQ2-a01", "", false}, // not how JobID writes 1
		{"tsk_7HQ2-a-1", "", false},
		{"tsk_7HQ2-ab", "", false},
		{"-a1", "", false}, // no task id before it
		{"report-a1 final", "", false},
	} {
		no, ok := task.OfJob(c.job)
		if no != c.task || ok != c.ok {
			t.Errorf("OfJob(%q) = %q, %v; want %q, %v", c.job, no, ok, c.task, c.ok)
		}
	}
}
