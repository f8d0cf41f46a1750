package main

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/taskcenter/taskcenter/client"
)

// progress shows a task's updates while tc waits for it.
type progress interface {
	update(t *client.Task)
	done()
}

// quietProgress shows nothing (--json).
type quietProgress struct{}

func (quietProgress) update(*client.Task) {}
func (quietProgress) done()               {}

// barProgress draws a progress bar on a terminal: rows done of the total, rows/s and the
// time left.
type barProgress struct {
	w        io.Writer
	bar      *progressbar.ProgressBar
	max      int64
	status   client.Status
	finished bool
}

func newBarProgress(w io.Writer) *barProgress { return &barProgress{w: w} }

func (b *barProgress) update(t *client.Task) {
	if b.finished {
		return
	}
	total := max(t.Progress.Total, 1)
	if b.bar == nil {
		b.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(b.w),
			progressbar.OptionSetDescription(describe(t)),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("rows"),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetWidth(30),
			progressbar.OptionSetRenderBlankState(true),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(b.w) }),
		)
		b.max = total
	}
	if total != b.max && t.Progress.Total > 0 {
		b.bar.ChangeMax64(total)
		b.max = total
	}
	if t.Status != b.status {
		b.bar.Describe(describe(t))
		b.status = t.Status
	}
	if t.Terminal() {
		b.finished = true
		if t.Status == client.StatusSuccess || t.Status == client.StatusPartialSuccess {
			b.bar.Set64(b.max) //nolint:errcheck // drawing only; completing prints the newline
			return
		}
		b.bar.Exit() //nolint:errcheck // drawing only
		fmt.Fprintln(b.w)
		return
	}
	// The bar completes (and stops drawing) only with the task's terminal status.
	b.bar.Set64(min(t.Progress.Current, b.max-1)) //nolint:errcheck // drawing only
}

func (b *barProgress) done() {
	if b.bar != nil && !b.finished {
		b.finished = true
		b.bar.Exit() //nolint:errcheck // drawing only
		fmt.Fprintln(b.w)
	}
}

func describe(t *client.Task) string {
	switch t.Status {
	case client.StatusPending:
		return "waiting"
	case client.StatusRetryWait:
		return "retrying soon"
	case client.StatusRunning:
		if t.CancelRequested {
			return "cancelling"
		}
		return t.Type
	}
	return string(t.Status)
}

// lineProgress prints a plain line per status change, and one every few seconds while rows
// move: for logs and CI, where a redrawn bar would be noise.
type lineProgress struct {
	w        io.Writer
	every    time.Duration
	status   client.Status
	lastAt   time.Time
	lastRows int64
	started  time.Time
}

func newLineProgress(w io.Writer) *lineProgress { return &lineProgress{w: w, every: 2 * time.Second} }

func (l *lineProgress) update(t *client.Task) {
	now := time.Now()
	changed := t.Status != l.status
	if !changed && (t.Terminal() || now.Sub(l.lastAt) < l.every || t.Progress.Current == l.lastRows) {
		return
	}
	line := fmt.Sprintf("%s %s", t.ID, t.Status)
	if t.Status == client.StatusRunning && t.Progress.Total > 0 {
		line += fmt.Sprintf(" %d%% %d/%d rows", t.Progress.Percent, t.Progress.Current, t.Progress.Total)
		if l.started.IsZero() {
			l.started = now
		} else if el := now.Sub(l.lastAt).Seconds(); el > 0 && t.Progress.Current > l.lastRows {
			rate := float64(t.Progress.Current-l.lastRows) / el
			line += fmt.Sprintf(", %.0f rows/s", rate)
			if left := t.Progress.Total - t.Progress.Current; rate > 0 && left > 0 {
				line += fmt.Sprintf(", ETA %s", (time.Duration(float64(left)/rate) * time.Second).Round(time.Second))
			}
		}
	}
	fmt.Fprintln(l.w, line)
	l.status, l.lastAt, l.lastRows = t.Status, now, t.Progress.Current
}

func (l *lineProgress) done() {}
