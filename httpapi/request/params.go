// Package request reads what a request carries, refusing what cannot be served with a
// problem naming the parameter: the body at a bounded pace (BodyLimits), JSON bodies read
// strictly (DecodeJSON), and path and query parameters (TaskID, QueryTimes, QueryPage).
//
// It sits just above httpapi/problem: the REST API (httpapi), httpapi/identity (the API
// tokens' routes), the web page (httpapi/web) and the live event streams (httpapi/live) use
// it; it imports none of them.
package request

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/internal/textcheck"
)

// Everything a request carries reaches Postgres as a bound parameter, so quotes, `?`, `$1`
// or `::` are plain data. What Postgres cannot hold at all (a NUL character, bytes that are
// not UTF-8, a time outside its range) is refused here with a problem naming the
// parameter, instead of failing in the database as a 500.
const (
	// MaxJSONBody caps a JSON request body.
	MaxJSONBody = 1 << 20
	// maxJSONDepth caps the nesting of a JSON body (task params are stored as jsonb).
	maxJSONDepth = 32
	// MaxID caps the {id} path parameter; task numbers are 30 characters.
	MaxID = 64
	// MaxIdempotencyKey caps the Idempotency-Key header.
	MaxIdempotencyKey = 200
	// MaxQueryValue caps any query parameter value.
	MaxQueryValue = 1000
)

// TaskID returns the {id} path parameter, refusing one that cannot be a task number.
// Anything printable goes on to the store, which answers 404 for an unknown id.
func TaskID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if msg := textcheck.Problem(id, MaxID); msg != "" {
		return "", problem.Invalid("invalid_id", "the task id in the path is not valid: it "+msg, problem.FieldError{Field: "id", Message: msg})
	}
	return id, nil
}

// IdempotencyKey returns the request's Idempotency-Key header (empty when absent).
func IdempotencyKey(r *http.Request) (string, error) {
	key := strings.TrimSpace(r.Header.Get("Idempotency-Key"))
	if msg := textcheck.Problem(key, MaxIdempotencyKey); msg != "" {
		return "", problem.Invalid("bad_idempotency_key", "Idempotency-Key "+msg, problem.FieldError{Field: "Idempotency-Key", Message: msg})
	}
	return key, nil
}

// rfc3339Hint is what a field that must hold a time says when it does not.
const rfc3339Hint = "must be an RFC 3339 time such as 2026-11-30T00:00:00Z"

// QueryTimes parses the RFC 3339 query parameters named by dst's keys into dst's values,
// leaving absent ones nil, and names each that does not parse.
func QueryTimes(q url.Values, dst map[string]**time.Time) []problem.FieldError {
	var errs []problem.FieldError
	for _, name := range slices.Sorted(maps.Keys(dst)) {
		v := q.Get(name)
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			errs = append(errs, problem.FieldError{Field: name, Message: rfc3339Hint})
			continue
		}
		*dst[name] = &t
	}
	return errs
}

// QueryPage parses the limit (1 to 200; *limit keeps its default when absent) and cursor (the
// id of the last row of the page before) of a list keyed by row id, newest first.
func QueryPage(q url.Values, limit *int, before *int64) []problem.FieldError {
	var errs []problem.FieldError
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 200 {
			errs = append(errs, problem.FieldError{Field: "limit", Message: "must be a number from 1 to 200"})
		}
		*limit = n
	}
	if v := q.Get("cursor"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			errs = append(errs, problem.FieldError{Field: "cursor", Message: "is not a cursor this API returned"})
		}
		*before = n
	}
	return errs
}
