package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/jobs/taskview"
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

// Payload is the JSON body of a delivery: the event, and the task as every surface shows it.
type Payload struct {
	ID   string `json:"id"`   // evt_<n>, as in the Taskcenter-Event-Id header
	Type string `json:"type"` // the event name
	// Sequence is the event's place among its task's events (1, 2, 3 … in the order they
	// happened, counting events the subscription does not hear of too): a receiver ignores an
	// event whose sequence is not above the last it applied for the task (a redelivery).
	Sequence int64 `json:"sequence"`
	// Status and Attempt are what the event committed.
	Status    store.Status `json:"status"`
	Attempt   int          `json:"attempt"`
	CreatedAt time.Time    `json:"created_at"`
	// Task is the task's view when the delivery was made: the same JSON as GET
	// /api/v1/tasks/{id} (without attempts and logs).
	Task task.View `json:"task"`
}

// BuildPayload is the store.PayloadFunc of every delivery.
func BuildPayload(ev store.Event, sequence int64, t *store.Task) (json.RawMessage, error) {
	return json.Marshal(Payload{ID: EventID(ev.ID), Type: ev.Event, Sequence: sequence, Status: ev.Status, Attempt: ev.Attempt,
		CreatedAt: ev.CreatedAt.UTC(), Task: taskview.Of(t, nil, time.Now(), msg.EN)})
}
