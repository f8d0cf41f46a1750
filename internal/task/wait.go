package task

import (
	"time"
)

// The figures a person waits with are computed here and only here: the view carries them
// (jobs/taskview, the progress board's notices), and the page and tc show what it serves.

// Speed is a task's speed between two progress samples, in units of total per second, and
// when its work should be done at that speed. It is 0 and nil when the samples show no
// movement (or no time between them), and the ETA is nil when the total is unknown or
// already reached.
func Speed(from, to Sample, total int64) (float64, *time.Time) {
	elapsed := to.At.Sub(from.At).Seconds()
	done := to.Current - from.Current
	if elapsed <= 0 || done <= 0 {
		return 0, nil
	}
	rate := float64(done) / elapsed
	left := total - to.Current
	if total <= 0 || left <= 0 {
		return rate, nil
	}
	eta := to.At.Add(time.Duration(float64(left) / rate * float64(time.Second))).UTC()
	return rate, &eta
}

// WaitOf is a waiting task's place in its queue: ahead tasks would be claimed before it, and
// the queue finished finished tasks in the last window. The expected start assumes every worker
// of the queue is busy, so the task starts when position more tasks have finished at the
// queue's recent pace; a RETRY_WAIT task starts no earlier than its next_retry_at. With no
// task finished in the window the start is unknown (nil): no worker runs the queue, or none
// has finished anything lately.
func WaitOf(ahead, finished int64, window time.Duration, nextRetryAt *time.Time, now time.Time) *Wait {
	w := &Wait{Position: ahead + 1, Ahead: ahead}
	if finished <= 0 || window <= 0 {
		return w
	}
	start := now.Add(time.Duration(w.Position) * window / time.Duration(finished)).UTC()
	if nextRetryAt != nil && nextRetryAt.After(start) {
		start = nextRetryAt.UTC()
	}
	w.ExpectedStart = &start
	return w
}

// WaitWindow is how far back a queue's pace is read for a waiting task's expected start.
const WaitWindow = 10 * time.Minute
