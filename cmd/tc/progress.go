package main

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/taskcenter/taskcenter/client"
	"github.com/taskcenter/taskcenter/internal/msg"
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

// barProgress draws a progress bar on a terminal: rows done of the total, and the server's
// rows/s and time left (or a waiting task's place in line) in its description.
type barProgress struct {
	w        io.Writer
	lang     msg.Lang
	bar      *progressbar.ProgressBar
	max      int64
	desc     string
	finished bool
}

func newBarProgress(w io.Writer, lang msg.Lang) *barProgress { return &barProgress{w: w, lang: lang} }

func (b *barProgress) update(t *client.Task) {
	if b.finished {
		return
	}
	total := max(t.Progress.Total, 1)
	if b.bar == nil {
		b.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(b.w),
			progressbar.OptionSetDescription(describe(b.lang, t)),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(false), // the server's ETA is in the description
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetWidth(30),
			progressbar.OptionSetRenderBlankState(true),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(b.w) }),
		)
		b.max = total
		b.desc = describe(b.lang, t)
	}
	if total != b.max && t.Progress.Total > 0 {
		b.bar.ChangeMax64(total)
		b.max = total
	}
	if d := describe(b.lang, t); d != b.desc {
		b.bar.Describe(d)
		b.desc = d
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

// describe is the bar's words: what the task is doing, with its speed or place in line.
func describe(lang msg.Lang, t *client.Task) string {
	switch t.Status {
	case client.StatusPending:
		return listOf(lang, say(lang, "tc.waiting"), inLine(lang, t, time.Now()))
	case client.StatusRetryWait:
		return listOf(lang, say(lang, "tc.retrying_soon"), inLine(lang, t, time.Now()))
	case client.StatusRunning:
		if t.CancelRequested {
			return say(lang, "tc.cancelling")
		}
		return listOf(lang, say(lang, "tc.type", "type", t.Type), speed(lang, t, time.Now()))
	}
	return say(lang, "tc.status", "status", string(t.Status))
}

// speed is a running task's rows/s and time left as the server computed them (the page shows
// the same figures); "" when the server has none yet.
func speed(lang msg.Lang, t *client.Task, now time.Time) string {
	if t.Progress.RatePerS <= 0 {
		return ""
	}
	rate := say(lang, "tc.rate", "n", fmt.Sprintf("%.0f", t.Progress.RatePerS))
	if t.Progress.ETA == nil {
		return rate
	}
	return listOf(lang, rate, say(lang, "tc.eta", "t", span(lang, max(t.Progress.ETA.Sub(now), 0).Round(time.Second))))
}

// inLine is a waiting task's place in its queue and expected start, as the server estimated
// them: "3rd in line, starts in ~2m0s".
func inLine(lang msg.Lang, t *client.Task, now time.Time) string {
	if t.Wait == nil {
		return ""
	}
	place := say(lang, "tc.in_line", "n", itoa(t.Wait.Position), "nth", ordinal(t.Wait.Position))
	if t.Wait.ExpectedStart == nil {
		return listOf(lang, place, say(lang, "tc.start_unknown"))
	}
	return listOf(lang, place, say(lang, "tc.starts_in", "t", span(lang, max(t.Wait.ExpectedStart.Sub(now), 0).Round(time.Second))))
}

// ordinal is n as 1st, 2nd, 3rd, 4th, …, 11th, 12th, 13th, 21st.
func ordinal(n int64) string {
	suffix := "th"
	if n%100 < 11 || n%100 > 13 {
		switch n % 10 {
		case 1:
			suffix = "st"
		case 2:
			suffix = "nd"
		case 3:
			suffix = "rd"
		}
	}
	return fmt.Sprintf("%d%s", n, suffix)
}

// lineProgress prints a plain line per status change, and one every few seconds while rows
// move: for logs and CI, where a redrawn bar would be noise.
type lineProgress struct {
	w        io.Writer
	lang     msg.Lang
	every    time.Duration
	status   client.Status
	lastAt   time.Time
	lastRows int64
}

func newLineProgress(w io.Writer, lang msg.Lang) *lineProgress {
	return &lineProgress{w: w, lang: lang, every: 2 * time.Second}
}

func (l *lineProgress) update(t *client.Task) {
	now := time.Now()
	changed := t.Status != l.status
	if !changed && (t.Terminal() || now.Sub(l.lastAt) < l.every || t.Progress.Current == l.lastRows) {
		return
	}
	line := t.ID + " " + say(l.lang, "tc.status", "status", string(t.Status))
	switch {
	case t.Status == client.StatusRunning && t.Progress.Total > 0:
		line += " " + listOf(l.lang, say(l.lang, "tc.line_rows", "percent", itoa(t.Progress.Percent),
			"current", itoa(t.Progress.Current), "total", itoa(t.Progress.Total)), speed(l.lang, t, now))
	case t.Status.Waiting():
		if w := inLine(l.lang, t, now); w != "" {
			line += " " + w
		}
	}
	fmt.Fprintln(l.w, line)
	l.status, l.lastAt, l.lastRows = t.Status, now, t.Progress.Current
}

func (l *lineProgress) done() {}
