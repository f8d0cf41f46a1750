package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/internal/textcheck"
	"github.com/taskcenter/taskcenter/jobs/export"
	"github.com/taskcenter/taskcenter/store"
)

// Everything a request carries reaches Postgres as a bound parameter, so quotes, `?`, `$1`
// or `::` are plain data. What Postgres cannot hold at all (a NUL character, bytes that are
// not UTF-8, a time outside its range) is refused here with a problem naming the
// parameter, instead of failing in the database as a 500.
const (
	// maxJSONBody caps a JSON request body.
	maxJSONBody = 1 << 20
	// maxJSONDepth caps the nesting of a JSON body (task params are stored as jsonb).
	maxJSONDepth = 32
	// maxTaskID caps the {id} path parameter; task numbers are 30 characters.
	maxTaskID = 64
	// maxIdempotencyKey caps the Idempotency-Key header.
	maxIdempotencyKey = 200
	// maxQueryValue caps any query parameter value.
	maxQueryValue = 1000
	// maxCursor caps the cursor parameter before it is decoded.
	maxCursor = 64
)

// taskID returns the {id} path parameter, refusing one that cannot be a task number.
// Anything printable goes on to the store, which answers 404 for an unknown id.
func taskID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if msg := textcheck.Problem(id, maxTaskID); msg != "" {
		return "", problem.Invalid("invalid_id", "the task id in the path is not valid: it "+msg, problem.FieldError{Field: "id", Message: msg})
	}
	return id, nil
}

// idempotencyKey returns the request's Idempotency-Key header (empty when absent).
func idempotencyKey(r *http.Request) (string, error) {
	key := strings.TrimSpace(r.Header.Get("Idempotency-Key"))
	if msg := textcheck.Problem(key, maxIdempotencyKey); msg != "" {
		return "", problem.Invalid("bad_idempotency_key", "Idempotency-Key "+msg, problem.FieldError{Field: "Idempotency-Key", Message: msg})
	}
	return key, nil
}

// decodeJSON reads a JSON request body strictly, with errors a caller can act on: the
// media type must be application/json (charset utf-8 at most), the body one JSON value
// with nothing after it, no key twice, no NUL, and every field known to v.
func decodeJSON(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, params, err := mime.ParseMediaType(ct)
		charset, hasCharset := params["charset"]
		if err != nil || mt != "application/json" || len(params) > 1 || (len(params) == 1 && !hasCharset) ||
			(hasCharset && !strings.EqualFold(charset, "utf-8")) {
			return problem.New(http.StatusUnsupportedMediaType, "unsupported_media_type",
				"send the body as application/json (optionally with charset=utf-8)")
		}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxJSONBody+1))
	if err != nil {
		return readError(err)
	}
	if len(body) > maxJSONBody {
		return problem.New(http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the request body is larger than %d KiB", maxJSONBody>>10))
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return problem.BadRequest("invalid_body", "the request body is empty; send a JSON object")
	}
	if err := checkJSON(body, ""); err != nil {
		return err
	}
	if err := strictDecode(body, v); err != nil {
		return decodeProblem("invalid_body", "the request body is not valid", "", body, v, err)
	}
	return nil
}

// strictDecode decodes doc into v, refusing fields v does not have.
func strictDecode(doc []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// decodeProblem explains a failed decode of doc into v, naming the field at fault: the
// top-level keys are decoded one at a time into a fresh v until one fails.
func decodeProblem(code, detail, prefix string, doc []byte, v any, err error) *problem.Problem {
	field, msg := "", jsonErrorText(err)
	var keys map[string]json.RawMessage
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && json.Unmarshal(doc, &keys) == nil {
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			one, _ := json.Marshal(map[string]json.RawMessage{k: keys[k]})
			if kerr := strictDecode(one, reflect.New(rv.Type().Elem()).Interface()); kerr != nil {
				field, msg = joinPath(prefix, k), jsonErrorText(kerr)
				break
			}
		}
	}
	var timeErr *time.ParseError
	if errors.As(err, &timeErr) {
		msg = rfc3339Hint
	}
	if field == "" {
		return problem.BadRequest(code, "%s: %s", detail, msg)
	}
	if strings.HasPrefix(msg, "unknown field") {
		msg = "is not a field here"
	}
	return problem.Invalid(code, detail+": "+field+" "+msg, problem.FieldError{Field: field, Message: msg})
}

// decodeFilter decodes an export filter strictly (the body it came in was checked whole).
func decodeFilter(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if err := checkJSON(raw, "filter"); err != nil {
		return err
	}
	if err := strictDecode(raw, v); err != nil {
		return decodeProblem("invalid_filter", "the filter is not valid", "filter", raw, v, err)
	}
	return nil
}

// jsonErrorText is encoding/json's message without Go type names.
func jsonErrorText(err error) string {
	var typeErr *json.UnmarshalTypeError
	var timeErr *time.ParseError
	switch {
	case errors.As(err, &typeErr):
		return "must not be a JSON " + typeErr.Value
	case errors.As(err, &timeErr):
		return rfc3339Hint
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if r := []rune(msg); len(r) > 200 {
		msg = string(r[:200]) + "…"
	}
	return msg
}

// checkJSON walks a JSON document and refuses what encoding/json would accept silently or
// Postgres' jsonb could not store: data after the value, a key twice (also in another
// case: encoding/json matches field names case-insensitively, so the last one would win
// unseen), NUL characters, numbers beyond float64, nesting deeper than maxJSONDepth.
// prefix names the document in field paths ("filter").
func checkJSON(doc []byte, prefix string) error {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	c := &jsonCheck{prefix: prefix}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			if !c.done {
				return problem.BadRequest("invalid_body", "the request body is not valid: the JSON ends early")
			}
			return nil
		}
		if err != nil {
			return problem.BadRequest("invalid_body", "the request body is not valid JSON: %s", jsonErrorText(err))
		}
		if c.done {
			return problem.BadRequest("invalid_body", "the request body has data after the JSON value; send one JSON object")
		}
		if err := c.token(tok); err != nil {
			return err
		}
	}
}

// jsonCheck is checkJSON's walk: the open objects and arrays, and where it is in each.
type jsonCheck struct {
	prefix string
	stack  []*jsonFrame
	done   bool // the top-level value is complete
}

// jsonFrame is one open object or array.
type jsonFrame struct {
	object  bool
	wantKey bool
	keys    map[string]bool
	path    string
	key     string
	index   int
}

// token checks one token of the document.
func (c *jsonCheck) token(tok json.Token) error {
	if n := len(c.stack); n > 0 && c.stack[n-1].object && c.stack[n-1].wantKey {
		return c.key(c.stack[n-1], tok)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{', '[':
			if len(c.stack) >= maxJSONDepth {
				return c.bad(c.valuePath(), fmt.Sprintf("is nested deeper than %d levels", maxJSONDepth))
			}
			c.stack = append(c.stack, &jsonFrame{object: t == '{', wantKey: t == '{', keys: map[string]bool{}, path: c.valuePath()})
			return nil
		default: // ']' ('}' is handled with the keys)
			c.stack = c.stack[:len(c.stack)-1]
		}
	case string:
		if strings.IndexByte(t, 0) >= 0 {
			return c.bad(c.valuePath(), "must not contain a NUL character")
		}
	case json.Number:
		if f, err := strconv.ParseFloat(string(t), 64); err != nil || math.IsInf(f, 0) {
			return c.bad(c.valuePath(), "is a number out of range")
		}
	}
	c.complete()
	return nil
}

// key checks an object's key (or its closing brace).
func (c *jsonCheck) key(top *jsonFrame, tok json.Token) error {
	if d, ok := tok.(json.Delim); ok && d == '}' {
		c.stack = c.stack[:len(c.stack)-1]
		c.complete()
		return nil
	}
	key, _ := tok.(string)
	if strings.IndexByte(key, 0) >= 0 {
		return c.bad(joinPath(top.path, echo(key)), "has a NUL character in its name")
	}
	folded := foldKey(key)
	if top.keys[folded] {
		return c.bad(joinPath(top.path, key), "appears twice; send each key once")
	}
	top.keys[folded] = true
	top.key, top.wantKey = key, false
	return nil
}

// valuePath is the field path of the value being read.
func (c *jsonCheck) valuePath() string {
	if len(c.stack) == 0 {
		return c.prefix
	}
	top := c.stack[len(c.stack)-1]
	if top.object {
		return joinPath(top.path, top.key)
	}
	return fmt.Sprintf("%s[%d]", top.path, top.index)
}

// complete records that a value has ended.
func (c *jsonCheck) complete() {
	if len(c.stack) == 0 {
		c.done = true
		return
	}
	top := c.stack[len(c.stack)-1]
	if top.object {
		top.wantKey = true
	} else {
		top.index++
	}
}

func (c *jsonCheck) bad(path, msg string) error {
	field := path
	if field == "" {
		field = "body"
	}
	return problem.Invalid("invalid_body", "the request body is not valid: "+field+" "+msg, problem.FieldError{Field: field, Message: msg})
}

func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// foldKey folds s as encoding/json matches field names (Unicode simple case folding), so
// keys that differ only in case compare equal.
func foldKey(s string) string {
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		return least
	}, s)
}

// normalizeJSON re-encodes a checked JSON document the way jsonb will store it: invalid
// UTF-8 and lone surrogates become U+FFFD (Postgres would refuse them).
func normalizeJSON(raw json.RawMessage) (json.RawMessage, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, problem.BadRequest("invalid_body", "params is not valid JSON: %s", jsonErrorText(err))
	}
	return json.Marshal(v)
}

// echo quotes a value for an error message, shortened and printable.
func echo(v string) string { return textcheck.Echo(v) }

// The cursor is "<created_at unix micros>:<id>" in unpadded base64url. decodeCursor accepts
// exactly what encodeCursor writes for a real task: a time filters accept and an id ≥ 1.
func encodeCursor(c store.Cursor) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d:%d", c.CreatedAt.UnixMicro(), c.ID))
}

func decodeCursor(s string) (*store.Cursor, error) {
	if len(s) > maxCursor {
		return nil, errors.New("cursor too long")
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, err
	}
	us, id, ok := strings.Cut(string(b), ":")
	if !ok {
		return nil, errors.New("bad cursor")
	}
	micros, err1 := strconv.ParseInt(us, 10, 64)
	n, err2 := strconv.ParseInt(id, 10, 64)
	if err1 != nil || err2 != nil || n < 1 {
		return nil, errors.New("bad cursor")
	}
	c := &store.Cursor{CreatedAt: time.UnixMicro(micros).UTC(), ID: n}
	if !export.TimeInRange(c.CreatedAt) || encodeCursor(*c) != s {
		return nil, errors.New("bad cursor")
	}
	return c, nil
}

// rfc3339Hint is what a field that must hold a time says when it does not.
const rfc3339Hint = "must be an RFC 3339 time such as 2026-11-30T00:00:00Z"

// queryTimes parses the RFC 3339 query parameters named by dst's keys into dst's values,
// leaving absent ones nil, and names each that does not parse.
func queryTimes(q url.Values, dst map[string]**time.Time) []problem.FieldError {
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

// queryPage parses the limit (1 to 200; *limit keeps its default when absent) and cursor (the
// id of the last row of the page before) of a list keyed by row id, newest first.
func queryPage(q url.Values, limit *int, before *int64) []problem.FieldError {
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

// ownerQuery reads a list's ?owner=: empty (the caller's own, or everyone's for an admin), or
// a user name, which only an admin may give for someone else. what names the listed things.
func ownerQuery(q url.Values, p Principal, what string) (string, error) {
	owner := q.Get("owner")
	if msg := textcheck.Problem(owner, 200); msg != "" {
		return "", problem.Invalid("invalid_query", "owner "+msg, problem.FieldError{Field: "owner", Message: msg})
	}
	if owner != "" && !p.Scope().Admin && owner != p.User {
		msg := "only an admin can list other users' " + what
		return "", problem.Invalid("invalid_query", msg, problem.FieldError{Field: "owner", Message: msg})
	}
	return owner, nil
}
