package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/taskcenter/taskcenter/store"
)

// Headers every delivery carries.
const (
	// HeaderSignature is "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">" keyed with the
	// subscription's secret.
	HeaderSignature = "Taskcenter-Signature"
	// HeaderEventID is the event's stable id (evt_<n>): the same on every attempt and every
	// subscription, so a receiver de-duplicates on it.
	HeaderEventID = "Taskcenter-Event-Id"
	// HeaderEvent is the event name, e.g. task.succeeded.
	HeaderEvent = "Taskcenter-Event"
	// HeaderDelivery is the delivery's id (dlv_…), as the deliveries API lists it.
	HeaderDelivery = "Taskcenter-Delivery"
)

// TerminalEvents are the events a subscription hears of when it names none: a task ended.
var TerminalEvents = []string{store.EventSucceeded, store.EventPartiallySucceded, store.EventFailed, store.EventTimedOut, store.EventCancelled}

// Events lists every event a subscription may ask for.
var Events = []string{store.EventSubmitted, store.EventStarted, store.EventCancelRequested, store.EventRetryScheduled,
	store.EventSucceeded, store.EventPartiallySucceded, store.EventFailed, store.EventTimedOut, store.EventCancelled, store.EventRetried}

// EventID is the public, stable id of an outbox event.
func EventID(id int64) string { return "evt_" + strconv.FormatInt(id, 10) }

// Sign returns the signature header value for body sent at t.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts))
	mac.Write([]byte("."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// Payload is the JSON body of a delivery.
type Payload struct {
	ID   string `json:"id"`   // evt_<n>, as in the Taskcenter-Event-Id header
	Type string `json:"type"` // the event name
	// Sequence is the event's place among its task's events (1, 2, 3 … in the order they
	// happened, counting events the subscription does not hear of too): a receiver ignores an
	// event whose sequence is not above the last it applied for the task (a redelivery).
	Sequence  int64       `json:"sequence"`
	CreatedAt time.Time   `json:"created_at"`
	Task      TaskPayload `json:"task"`
}

// TaskPayload is the task the event is about. Status and attempt are the event's (what
// committed); the rest is the task when the event was dispatched.
type TaskPayload struct {
	ID         string         `json:"id"`
	Type       string         `json:"type"`
	Owner      string         `json:"owner"`
	Status     store.Status   `json:"status"`
	Attempt    int            `json:"attempt"`
	Counts     Counts         `json:"counts"`
	Error      *ErrorPayload  `json:"error,omitempty"`
	Result     *ResultPayload `json:"result,omitempty"`
	CreatedAt  time.Time      `json:"created_at"`
	FinishedAt *time.Time     `json:"finished_at,omitempty"`
	Links      Links          `json:"links"`
}

// Counts are the rows a task handled.
type Counts struct {
	Total   int64 `json:"total"`
	Success int64 `json:"success"`
	Failed  int64 `json:"failed"`
}

// ErrorPayload is why a task failed.
type ErrorPayload struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ResultPayload describes a finished task's result.
type ResultPayload struct {
	Name        string          `json:"name,omitempty"`
	Rows        int64           `json:"rows,omitempty"`
	Size        int64           `json:"size,omitempty"`
	ExpiresAt   *time.Time      `json:"expires_at,omitempty"`
	Summary     json.RawMessage `json:"summary,omitempty"`
	FirstErrors []string        `json:"first_errors,omitempty"`
}

// Links are API paths of the task (relative to the API's base URL).
type Links struct {
	Self        string `json:"self"`
	Result      string `json:"result,omitempty"`
	ErrorReport string `json:"error_report,omitempty"`
}

// storedResult is the part of a task's result column a payload shows (never file paths).
type storedResult struct {
	File        string          `json:"file"`
	Name        string          `json:"name"`
	Rows        int64           `json:"rows"`
	Size        int64           `json:"size"`
	ErrorReport string          `json:"error_report"`
	Expired     bool            `json:"expired"`
	Summary     json.RawMessage `json:"summary"`
	FirstErrors []string        `json:"first_errors"`
}

// BuildPayload is the store.PayloadFunc of every delivery.
func BuildPayload(ev store.Event, sequence int64, t *store.Task) (json.RawMessage, error) {
	self := "/api/v1/tasks/" + t.TaskNo
	p := Payload{ID: EventID(ev.ID), Type: ev.Event, Sequence: sequence, CreatedAt: ev.CreatedAt.UTC(), Task: TaskPayload{
		ID: t.TaskNo, Type: t.Type, Owner: t.Owner, Status: ev.Status, Attempt: ev.Attempt,
		Counts:    Counts{Total: t.TotalCount, Success: t.SuccessCount, Failed: t.FailedCount},
		CreatedAt: t.CreatedAt.UTC(), Links: Links{Self: self},
	}}
	if t.FinishedAt != nil && ev.Status.Terminal() {
		f := t.FinishedAt.UTC()
		p.Task.FinishedAt = &f
	}
	if t.ErrorCode != "" && (ev.Status == store.StatusFailed || ev.Status == store.StatusTimeout || ev.Status == store.StatusRetryWait) {
		p.Task.Error = &ErrorPayload{Code: t.ErrorCode, Message: t.ErrorMessage}
	}
	var r storedResult
	if len(t.Result) > 0 && json.Unmarshal(t.Result, &r) == nil && ev.Status.Terminal() {
		p.Task.Result = &ResultPayload{Name: r.Name, Rows: r.Rows, Size: r.Size, Summary: r.Summary, FirstErrors: r.FirstErrors}
		if t.ResultExpiresAt != nil {
			e := t.ResultExpiresAt.UTC()
			p.Task.Result.ExpiresAt = &e
		}
		if r.File != "" && !r.Expired {
			p.Task.Links.Result = self + "/result"
		}
		if r.ErrorReport != "" && !r.Expired {
			p.Task.Links.ErrorReport = self + "/error-report"
		}
	}
	return json.Marshal(p)
}
