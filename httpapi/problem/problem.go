// Package problem is how every room of the HTTP server says no: RFC 9457 problem details
// (application/problem+json) with a stable code, the field errors of a rejected request, and
// the request id each answer and audit row quotes.
//
// It is the bottom room of httpapi: the REST API (httpapi), the identity room
// (httpapi/identity), the web page (httpapi/web), request reading (httpapi/request), the
// live event streams (httpapi/live) and the webhooks and schedules (httpapi/automation) all
// build their refusals here, and it imports none of them. Which error kinds become which problem is decided by one table in httpapi.
package problem

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/taskcenter/taskcenter/internal/msg"
)

// Problem is an RFC 9457 problem details body (application/problem+json).
type Problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	// Code is a stable machine-readable reason, e.g. "task_not_found"; with Params it is
	// the message "problem.<code>" of the catalogue (internal/msg), which a client renders
	// in its reader's language (Detail is its English).
	Code string `json:"code"`
	// Params are the values the detail names, by name.
	Params msg.Params `json:"params,omitempty"`
	// Errors lists field problems of a rejected request.
	Errors []FieldError `json:"errors,omitempty"`
	// Details are structured facts about the problem that a client can act on, e.g. the
	// headers of an import's file and the fields none of them holds (a mapping form).
	Details any `json:"details,omitempty"`

	retryAfter int // seconds; sent as Retry-After
}

// FieldError is one invalid field of a request: what is wrong with it is a catalogue
// message (Code and Params, rendered in the reader's language by the page and clients),
// and Message is its English.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
	// Code is the catalogue code of the message, e.g. "field_error.too_long".
	Code string `json:"code"`
	// Params are the values the message names, by name.
	Params msg.Params `json:"params,omitempty"`
}

// Field is the field error saying m about field.
func Field(field string, m msg.Message) FieldError {
	return FieldError{Field: field, Message: m.English(), Code: m.Code, Params: m.Params}
}

func (p *Problem) Error() string { return p.Detail }

// Type is the problem `type` of a code: a URI resolving to the code's description in the
// served API description (/openapi.yaml).
func Type(code string) string { return "/openapi.yaml#/components/x-problem-codes/" + code }

// New builds a Problem; type URIs are relative references into the API description.
func New(status int, code, detail string) *Problem {
	return &Problem{Type: Type(code), Title: http.StatusText(status), Status: status, Code: code, Detail: detail}
}

// Say builds a Problem whose detail is the catalogue's message "problem.<code>" with params
// (its English), so the page and clients can say it in their reader's language.
func Say(status int, code string, params msg.Params) *Problem {
	p := New(status, code, msg.Render(msg.EN, "problem."+code, params))
	p.Params = params
	return p
}

// BadRequest is a 400 for a malformed request.
func BadRequest(code, format string, args ...any) *Problem {
	return New(http.StatusBadRequest, code, fmt.Sprintf(format, args...))
}

// Invalid is a 400 problem listing invalid parameters.
func Invalid(code, detail string, errs ...FieldError) *Problem {
	p := BadRequest(code, "%s", detail)
	p.Errors = errs
	return p
}

// WithErrors adds field problems.
func (p *Problem) WithErrors(errs ...FieldError) *Problem {
	p.Errors = append(p.Errors, errs...)
	return p
}

// WithRetryAfter asks the client to wait seconds before trying again (the Retry-After
// header).
func (p *Problem) WithRetryAfter(seconds int) *Problem {
	p.retryAfter = seconds
	return p
}

// Write answers with p; its RequestID should be set (RequestID of the request's context).
func (p *Problem) Write(w http.ResponseWriter) {
	if p.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(p.retryAfter))
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	json.NewEncoder(w).Encode(p) //nolint:errcheck // the client went away
}

type ctxKey int

const requestIDKey ctxKey = 0

// WithRequestID returns ctx carrying a request's id (httpapi's middleware assigns it).
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey, id)
}

// RequestID is the id of the request ctx belongs to; "" outside one.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}
