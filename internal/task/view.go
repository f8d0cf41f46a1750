package task

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/taskcenter/taskcenter/internal/msg"
)

// View is a task as every surface shows it: the API's JSON, each live event, the page, the
// CLI, the Go client and webhook payloads. One type, so that no surface can carry a field
// another one lacks or name it differently.
type View struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	// Title names the task: the product's title in the reader's language (English unless
	// the surface serves another), or the submitter's own words.
	Title string `json:"title"`
	// TitleMessage is the product's title as a catalogue message, to render in the reader's
	// language; absent on a title the submitter gave (or one stored before titles were kept
	// as messages).
	TitleMessage *msg.Message    `json:"title_message,omitempty"`
	Owner        string          `json:"owner"`
	Status       Status          `json:"status"`
	Queue        string          `json:"queue"`
	Params       json.RawMessage `json:"params"`
	Progress     Progress        `json:"progress"`
	// Wait is a waiting task's place in its queue's line (PENDING and RETRY_WAIT only, and only
	// where the view is served with it: the task and list endpoints).
	Wait            *Wait       `json:"wait,omitempty"`
	Counts          Counts      `json:"counts"`
	Attempt         int         `json:"attempt"`
	RetryCount      int         `json:"retry_count"`
	MaxRetry        int         `json:"max_retry"`
	NextRetryAt     *time.Time  `json:"next_retry_at"`
	CancelRequested bool        `json:"cancel_requested"`
	Error           *ErrorView  `json:"error"`
	Result          *ResultView `json:"result"`
	CreatedAt       time.Time   `json:"created_at"`
	StartedAt       *time.Time  `json:"started_at"`
	FinishedAt      *time.Time  `json:"finished_at"`
	UpdatedAt       time.Time   `json:"updated_at"`
	Links           Links       `json:"links"`
}

// Progress is how far a task's work is: current of total, in the task's one row total.
type Progress struct {
	Current   int64     `json:"current"`
	Total     int64     `json:"total"`
	Percent   int       `json:"percent"`
	UpdatedAt time.Time `json:"updated_at"`
	// RatePerS is a running task's recent speed, units of total per second; 0 when unknown.
	RatePerS float64 `json:"rate_per_s,omitempty"`
	// ETA is when a running task's work should be done at that speed; nil when unknown.
	ETA *time.Time `json:"eta,omitempty"`
}

// Wait is where a waiting task stands in its queue: Ahead tasks would be claimed before it
// (Position is Ahead+1), and ExpectedStart is when it should start at the queue's recent
// speed, nil when the queue finished nothing lately (no worker, or none for a while).
type Wait struct {
	Position      int64      `json:"position"`
	Ahead         int64      `json:"ahead"`
	ExpectedStart *time.Time `json:"expected_start"`
}

// Sample is a task's progress at one moment, for its speed.
type Sample struct {
	Current int64
	At      time.Time
}

// Percent is current/total in whole percent, capped at 99 until the work is finished.
func Percent(current, total int64, finished bool) int {
	switch {
	case finished:
		return 100
	case total <= 0:
		return 0
	}
	return int(min(current*100/total, 99))
}

// Live is a running task's latest progress as its worker last published it, with the counts
// of the same committed batch: a view that shows live progress shows these counts beside it,
// never the counts of an older read.
type Live struct {
	Progress Progress
	Counts   *Counts // nil when the publisher sent none
	// First is the first progress published since the task last started, the start of its
	// speed; nil when the publisher recorded none.
	First *Sample
}

// ErrorView is why a task failed (or why its last attempt did).
type ErrorView struct {
	Code    string `json:"code"`
	Message string `json:"message"` // in English
	// Params are Code's catalogue params ("error.<code>", internal/msg), to render the
	// error in the reader's language.
	Params map[string]string `json:"params,omitempty"`
	// Details are structured facts about the failure a client can act on, when the task
	// type gives them: an import whose header it could not use lists the file's headers,
	// the unknown ones and the fields missing (a mapping form).
	Details json.RawMessage `json:"details,omitempty"`
}

// ImportSummary is what an import did (or, dry, would do): the Summary of its result. Success
// splits into Inserted (new codes), Updated (values changed) and Unchanged (the same values);
// Removed is the customers a replace removed (or, dry, would remove).
type ImportSummary struct {
	Total     int64 `json:"total"`
	Success   int64 `json:"success"`
	Failed    int64 `json:"failed"`
	Inserted  int64 `json:"inserted"`
	Updated   int64 `json:"updated"`
	Unchanged int64 `json:"unchanged"`
	Removed   int64 `json:"removed"`
}

// ResultView describes a task's result file and summary.
type ResultView struct {
	Name        string          `json:"name,omitempty"`
	Rows        int64           `json:"rows,omitempty"`
	Size        int64           `json:"size,omitempty"`
	ContentType string          `json:"content_type,omitempty"`
	ExpiresAt   *time.Time      `json:"expires_at,omitempty"`
	Expired     bool            `json:"expired"`
	Summary     json.RawMessage `json:"summary,omitempty"`
	// FirstErrors are an import's first rejected rows, e.g. "row 128, phone: must be …".
	FirstErrors []string `json:"first_errors,omitempty"`
	// DryRun is set on a dry run's result: nothing was written.
	DryRun bool `json:"dry_run,omitempty"`
	// NothingRemoved says why a replace import removed no customer, in English, and
	// NothingRemovedMessage as a catalogue message.
	NothingRemoved        string       `json:"nothing_removed,omitempty"`
	NothingRemovedMessage *msg.Message `json:"nothing_removed_message,omitempty"`
	// FirstErrorMessages are FirstErrors as catalogue messages, in the same order, for a
	// reader in another language.
	FirstErrorMessages []RowMessage `json:"first_error_messages,omitempty"`
}

// RowMessage is why a row of an import was rejected: its row number (0: not one row's) and
// a message per field at fault.
type RowMessage struct {
	Row   int            `json:"row,omitempty"`
	Parts []FieldMessage `json:"parts"`
}

// FieldMessage is what was wrong with one field of a row: a catalogue message (code and
// params, internal/msg).
type FieldMessage struct {
	Field  string            `json:"field,omitempty"`
	Code   string            `json:"code"`
	Params map[string]string `json:"params,omitempty"`
}

// Links are the actions available on a task now (API paths).
type Links struct {
	Self        string `json:"self"`
	Result      string `json:"result,omitempty"`
	ErrorReport string `json:"error_report,omitempty"`
	Cancel      string `json:"cancel,omitempty"`
	Retry       string `json:"retry,omitempty"`
	// Undo is offered on an import that can be undone (POST it).
	Undo string `json:"undo,omitempty"`
}

// MaxTitle is the most characters a title has.
const MaxTitle = 200

// TitleText is a title the product made as lists show it: one line, spaces collapsed, at
// most MaxTitle characters.
func TitleText(s string) string {
	title := strings.Join(strings.Fields(s), " ")
	if r := []rune(title); len(r) > MaxTitle {
		title = string(r[:MaxTitle])
	}
	return title
}
