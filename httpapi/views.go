package httpapi

import (
	"net/http"
	"time"

	"github.com/taskcenter/taskcenter/internal/msg"

	"github.com/taskcenter/taskcenter/internal/task"
)

// readerLang is the language the request reads task views in, by its Accept-Language
// (English by default): a title the product made is rendered in it (title_message carries it
// for any other). The answer varies with the header.
func readerLang(w http.ResponseWriter, r *http.Request) msg.Lang {
	w.Header().Add("Vary", "Accept-Language")
	return msg.ParseLang(r.Header.Get("Accept-Language"))
}

// TaskView is a task as the API shows it: the one view of internal/task.
type TaskView = task.View

// Counts are the rows a task has handled (internal/task).
type Counts = task.Counts

// ErrorView, ResultView and Links are parts of the view (internal/task).
type (
	ErrorView  = task.ErrorView
	ResultView = task.ResultView
	Links      = task.Links
)

// DetailView is a task with its attempts and recent log.
type DetailView struct {
	TaskView
	// Archived: retention moved the task to the archive; it is kept for the record only.
	Archived bool          `json:"archived,omitempty"`
	Attempts []AttemptView `json:"attempts"`
	Logs     []LogView     `json:"logs"`
	// RejectedBreakdown counts the rejected rows by the field at fault and, under each field,
	// by reason, most first (an import that rejected rows; absent otherwise).
	RejectedBreakdown []FieldCountView `json:"rejected_breakdown,omitempty"`
	// CancelledBy is who cancelled the task (or asked to) and when, from the audit trail.
	CancelledBy *ActorView `json:"cancelled_by,omitempty"`
}

// AttemptView is one execution attempt.
type AttemptView struct {
	Attempt int    `json:"attempt"`
	Trigger string `json:"trigger"`
	Worker  string `json:"worker"`
	Status  string `json:"status"`
	Error   string `json:"error,omitempty"`
	// ErrorCode and ErrorParams are Error as a catalogue message ("error.<code>"), for a
	// reader in another language; absent on attempts recorded before they were kept.
	ErrorCode   string     `json:"error_code,omitempty"`
	ErrorParams msg.Params `json:"error_params,omitempty"`
	StartedAt   time.Time  `json:"started_at"`
	FinishedAt  *time.Time `json:"finished_at"`
}

// LogView is one line of the task log.
type LogView struct {
	At      time.Time `json:"at"`
	Attempt int       `json:"attempt"`
	Level   string    `json:"level"`
	Message string    `json:"message"` // in English
	// Code and Params are the line as a catalogue message (GET /api/v1/messages), to render
	// in the reader's language; absent on lines written before they were kept.
	Code   string     `json:"code,omitempty"`
	Params msg.Params `json:"params,omitempty"`
}
