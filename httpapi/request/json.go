package request

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/textcheck"
)

// notJSON refuses a body that is not declared application/json.
func notJSON() *problem.Problem {
	return problem.New(http.StatusUnsupportedMediaType, "unsupported_media_type",
		"send the body as application/json (Content-Type: application/json, optionally with charset=utf-8)")
}

// DecodeJSON reads a JSON request body strictly, with errors a caller can act on: the
// media type must be application/json (charset utf-8 at most), the body one JSON value
// with nothing after it, no key twice, no NUL, and every field known to v.
func DecodeJSON(r *http.Request, v any) error {
	ct := r.Header.Get("Content-Type")
	if ct != "" || r.ContentLength > 0 {
		// A body without a media type is refused too: what it is would be a guess.
		mt, params, err := mime.ParseMediaType(ct)
		charset, hasCharset := params["charset"]
		if err != nil || mt != "application/json" || len(params) > 1 || (len(params) == 1 && !hasCharset) ||
			(hasCharset && !strings.EqualFold(charset, "utf-8")) {
			return notJSON()
		}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxJSONBody+1))
	if err != nil {
		return ReadError(err)
	}
	if len(body) > MaxJSONBody {
		return problem.New(http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the request body is larger than %d KiB", MaxJSONBody>>10))
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return problem.BadRequest("invalid_body", "the request body is empty; send a JSON object")
	}
	if ct == "" { // a body sent without a length (chunked) and without a media type
		return notJSON()
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
	field, m := "", jsonErrorMessage(err)
	var keys map[string]json.RawMessage
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && json.Unmarshal(doc, &keys) == nil {
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			one, _ := json.Marshal(map[string]json.RawMessage{k: keys[k]})
			if kerr := strictDecode(one, reflect.New(rv.Type().Elem()).Interface()); kerr != nil {
				field, m = joinPath(prefix, k), jsonErrorMessage(kerr)
				break
			}
		}
	}
	var timeErr *time.ParseError
	if errors.As(err, &timeErr) {
		m = rfc3339Hint()
	}
	if field == "" {
		return problem.BadRequest(code, "%s: %s", detail, m.English())
	}
	if strings.HasPrefix(m.English(), "unknown field") {
		m = msg.New("field_error.not_a_field")
	}
	return problem.Invalid(code, detail+": "+field+" "+m.English(), problem.Field(field, m))
}

// DecodeFilter decodes an export filter strictly (the body it came in was checked whole) and
// validates it (an absent filter too: its zero value), so whichever step refuses it answers
// with a problem naming the field.
func DecodeFilter[F interface{ Validate() error }](raw json.RawMessage) (F, error) {
	var f F
	if len(raw) != 0 && string(raw) != "null" {
		if err := checkJSON(raw, "filter"); err != nil {
			return f, err
		}
		if err := strictDecode(raw, &f); err != nil {
			return f, decodeProblem("invalid_filter", "the filter is not valid", "filter", raw, &f, err)
		}
	}
	return f, f.Validate()
}

// jsonErrorMessage is encoding/json's message without Go type names: the product's own words
// for a value of the wrong JSON type or a time that does not parse, else encoding/json's
// text as it is (jsonErrorText).
func jsonErrorMessage(err error) msg.Message {
	var typeErr *json.UnmarshalTypeError
	var timeErr *time.ParseError
	switch {
	case errors.As(err, &typeErr):
		return msg.New("field_error.json_type", "type", typeErr.Value)
	case errors.As(err, &timeErr):
		return rfc3339Hint()
	}
	return msg.Plain(jsonErrorText(err))
}

// jsonErrorText is encoding/json's text of err, shortened.
func jsonErrorText(err error) string {
	text := strings.TrimPrefix(err.Error(), "json: ")
	if r := []rune(text); len(r) > 200 {
		text = string(r[:200]) + "…"
	}
	return text
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
				return c.bad(c.valuePath(), msg.New("field_error.json_too_deep", "max", strconv.Itoa(maxJSONDepth)))
			}
			c.stack = append(c.stack, &jsonFrame{object: t == '{', wantKey: t == '{', keys: map[string]bool{}, path: c.valuePath()})
			return nil
		default: // ']' ('}' is handled with the keys)
			c.stack = c.stack[:len(c.stack)-1]
		}
	case string:
		if strings.IndexByte(t, 0) >= 0 {
			return c.bad(c.valuePath(), msg.New("field_error.nul"))
		}
	case json.Number:
		if f, err := strconv.ParseFloat(string(t), 64); err != nil || math.IsInf(f, 0) {
			return c.bad(c.valuePath(), msg.New("field_error.number_out_of_range"))
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
		return c.bad(joinPath(top.path, textcheck.Echo(key)), msg.New("field_error.nul_in_name"))
	}
	folded := foldKey(key)
	if top.keys[folded] {
		return c.bad(joinPath(top.path, key), msg.New("field_error.key_twice"))
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

func (c *jsonCheck) bad(path string, m msg.Message) error {
	field := path
	if field == "" {
		field = "body"
	}
	return problem.Invalid("invalid_body", "the request body is not valid: "+field+" "+m.English(), problem.Field(field, m))
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

// NormalizeJSON re-encodes a checked JSON document the way jsonb will store it: invalid
// UTF-8 and lone surrogates become U+FFFD (Postgres would refuse them).
func NormalizeJSON(raw json.RawMessage) (json.RawMessage, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, problem.BadRequest("invalid_body", "params is not valid JSON: %s", jsonErrorText(err))
	}
	return json.Marshal(v)
}
