package export

import (
	"strconv"
	"strings"
	"time"

	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/textcheck"
	"github.com/taskcenter/taskcenter/jobs"
)

// Bounds of the values an export filter (and the task list API, which shares TaskFilter)
// accepts. Everything a filter carries reaches SQL as a bound parameter; these bounds make
// sure Postgres can take it, so a filter that passes Validate never fails later for its
// values alone (a failure then would be retried and alerted as if the system were at fault).
const (
	// MaxFilterText caps free-text filter values (characters).
	MaxFilterText = 64
	// MaxCodePrefix caps filter.code_prefix: a customer code has at most 32 characters.
	MaxCodePrefix = 32
	// MaxFilterItems caps the entries of a list filter (status, type).
	MaxFilterItems = 20
	// MaxTypeName caps one task type name in a filter.
	MaxTypeName = 100
	// MaxSearch caps a task search term (characters): room for a whole file name.
	MaxSearch = 200

	minFilterUnix = 0            // 1970-01-01T00:00:00Z
	maxFilterUnix = 253402300799 // 9999-12-31T23:59:59Z
)

// timeRange says which times a filter takes.
func timeRange() msg.Message {
	return msg.New("field_error.between", "from", "1970-01-01T00:00:00Z", "to", "9999-12-31T23:59:59Z")
}

// TimeInRange reports whether t is a time filters accept: from 1970-01-01 to the end of
// 9999 (UTC). Postgres' timestamptz reaches further, but no task or customer predates 1970
// and years beyond 9999 do not survive RFC 3339; the bound keeps every accepted time
// representable on both sides.
func TimeInRange(t time.Time) bool {
	u := t.Unix()
	return u >= minFilterUnix && u <= maxFilterUnix
}

// customerLevels are the levels the import stores (jobs/importer canonicalises spellings).
var customerLevels = map[string]bool{"normal": true, "silver": true, "gold": true, "platinum": true, "diamond": true}

// FieldProblem is one invalid filter field.
type FieldProblem struct {
	// Field is the filter field's JSON name, e.g. "created_from".
	Field string
	// Message says what is wrong, for the person who sent it.
	Message msg.Message
}

// FilterError is an invalid filter, field by field. It unwraps to a *jobs.BadInputError
// (code bad_filter), so a worker that meets it fails the task as bad input, never retries.
type FilterError struct {
	Fields []FieldProblem
}

func (e *FilterError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = "filter." + f.Field + " " + f.Message.English()
	}
	return strings.Join(parts, "; ")
}

// Unwrap classifies the error as bad input.
func (e *FilterError) Unwrap() error {
	return &jobs.BadInputError{Code: "bad_filter", Message: e.Error()}
}

// filterCheck collects field problems.
type filterCheck struct{ fields []FieldProblem }

func (c *filterCheck) bad(field string, m msg.Message) {
	c.fields = append(c.fields, FieldProblem{Field: field, Message: m})
}

// text checks a free-text value: valid UTF-8, no control characters (Postgres text cannot
// hold NUL), at most max characters.
func (c *filterCheck) text(field, v string, max int) bool {
	if m, bad := textcheck.Problem(v, max); bad {
		c.bad(field, m)
		return false
	}
	return true
}

func (c *filterCheck) time(field string, t *time.Time) {
	if t != nil && !TimeInRange(*t) {
		c.bad(field, timeRange())
	}
}

func (c *filterCheck) err() error {
	if len(c.fields) == 0 {
		return nil
	}
	return &FilterError{Fields: c.fields}
}

// Validate checks a customer filter before a task is created for it, and again in the
// worker: sizes, characters and the level enum.
func (f CustomerFilter) Validate() error {
	var c filterCheck
	c.text("city", f.City, MaxFilterText)
	if c.text("level", f.Level, MaxFilterText) && f.Level != "" && !customerLevels[f.Level] {
		c.bad("level", msg.New("field_error.not_a_level", "value", textcheck.Echo(f.Level)))
	}
	c.text("code_prefix", f.CodePrefix, MaxCodePrefix)
	return c.err()
}

// Validate checks a task filter before a task is created for it (and the task list API's
// query): statuses, sizes and characters, times in range and in order.
func (f TaskFilter) Validate() error {
	var c filterCheck
	if len(f.Statuses) > MaxFilterItems {
		c.bad("status", msg.New("field_error.too_many_statuses", "max", strconv.Itoa(MaxFilterItems)))
	}
	for _, s := range f.Statuses {
		if !s.Valid() {
			c.bad("status", msg.New("field_error.not_a_status", "value", textcheck.Echo(string(s))))
			break
		}
	}
	if len(f.Types) > MaxFilterItems {
		c.bad("type", msg.New("field_error.too_many_types", "max", strconv.Itoa(MaxFilterItems)))
	}
	for _, t := range f.Types {
		if !c.text("type", t, MaxTypeName) {
			break
		}
	}
	c.text("owner", f.Owner, config.MaxOwner) // a qualified name (oidc:…) outgrows MaxFilterText
	c.text("q", f.Search, MaxSearch)
	c.time("created_from", f.CreatedFrom)
	c.time("created_to", f.CreatedTo)
	if f.CreatedFrom != nil && f.CreatedTo != nil && !f.CreatedFrom.Before(*f.CreatedTo) {
		c.bad("created_from", msg.New("field_error.before", "other", "created_to"))
	}
	return c.err()
}
