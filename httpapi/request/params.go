// Package request reads what a request carries, refusing what cannot be served with a
// problem naming the parameter: the body at a bounded pace (BodyLimits), JSON bodies read
// strictly (DecodeJSON), and path and query parameters (TaskID, QueryTimes, QueryPage).
//
// It sits just above httpapi/problem: the REST API (httpapi), httpapi/identity (the API
// tokens' routes), the web page (httpapi/web), the live event streams (httpapi/live) and
// the webhooks and schedules (httpapi/automation) use it; it imports none of them.
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
	"github.com/taskcenter/taskcenter/internal/msg"
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
	if m, bad := textcheck.Problem(id, MaxID); bad {
		return "", problem.Invalid("invalid_id", "the task id in the path is not valid: it "+m.English(), problem.Field("id", m))
	}
	return id, nil
}

// IdempotencyKey returns the request's Idempotency-Key header (empty when absent).
func IdempotencyKey(r *http.Request) (string, error) {
	key := strings.TrimSpace(r.Header.Get("Idempotency-Key"))
	if m, bad := textcheck.Problem(key, MaxIdempotencyKey); bad {
		return "", problem.Invalid("bad_idempotency_key", "Idempotency-Key "+m.English(), problem.Field("Idempotency-Key", m))
	}
	return key, nil
}

// RFC3339Hint is what a field that must hold a time says when it does not, with an example
// time such as 2026-11-30T00:00:00Z.
func RFC3339Hint(example string) msg.Message {
	return msg.New("field_error.rfc3339", "example", example)
}

// rfc3339Hint is RFC3339Hint with the example the request's times use.
func rfc3339Hint() msg.Message { return RFC3339Hint("2026-11-30T00:00:00Z") }

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
			errs = append(errs, problem.Field(name, rfc3339Hint()))
			continue
		}
		*dst[name] = &t
	}
	return errs
}

// NumberRange says that a value must be a whole number from min to max.
func NumberRange(min, max int) msg.Message {
	return msg.New("field_error.number_range", "min", strconv.Itoa(min), "max", strconv.Itoa(max))
}

// QueryPage parses the limit (1 to 200; *limit keeps its default when absent) and cursor (the
// id of the last row of the page before) of a list keyed by row id, newest first.
func QueryPage(q url.Values, limit *int, before *int64) []problem.FieldError {
	var errs []problem.FieldError
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 200 {
			errs = append(errs, problem.Field("limit", NumberRange(1, 200)))
		}
		*limit = n
	}
	if v := q.Get("cursor"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			errs = append(errs, problem.Field("cursor", msg.New("field_error.bad_cursor")))
		}
		*before = n
	}
	return errs
}
