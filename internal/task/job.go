package task

import (
	"strconv"
	"strings"
)

// JobID is the id under which asynq (and so the ops console) knows a task waiting under
// attempt number attempt: <task id>-a<attempt>. Every claim raises the number, so the id
// names one "waiting to run" episode of the task.
func JobID(taskNo string, attempt int) string {
	return taskNo + "-a" + strconv.Itoa(attempt)
}

// OfJob returns the task id of a job id JobID made (any attempt), and whether jobID is one.
// It is how a job id copied from the console leads back to its task.
func OfJob(jobID string) (taskNo string, ok bool) {
	i := strings.LastIndex(jobID, "-a")
	if i <= 0 {
		return "", false
	}
	attempt, err := strconv.Atoi(jobID[i+2:])
	if err != nil || attempt < 0 || JobID(jobID[:i], attempt) != jobID {
		return "", false
	}
	return jobID[:i], true
}
