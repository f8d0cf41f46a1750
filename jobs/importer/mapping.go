package importer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/sheet/sheettype"
	"github.com/taskcenter/taskcenter/internal/textcheck"
)

// Column mapping. A header the alias table does not know ("联系电话") is mapped to a field by
// the uploader: the columns field of an upload or a re-submit, header → field name. The
// explicit mapping is applied first, then the aliases for the fields it leaves open. A
// mapping that led to an accepted header is saved for its owner under the file's header set
// (HeaderKey) and applied again when that owner imports a file with the same header set
// without a mapping of its own.

// maxMappedColumns bounds a columns mapping: there are only numFields fields to map.
const maxMappedColumns = int(numFields)

// mapping is a columns mapping read for use: normalised header → field. nil maps by the
// aliases alone.
type mapping map[string]field

// FieldNamed is the field a mapping names, false for a name the import does not have.
func fieldNamed(name string) (field, bool) {
	i := slices.Index(fieldNames[:], strings.ToLower(strings.TrimSpace(name)))
	return field(i), i >= 0
}

// CheckColumns checks a columns mapping as sent (header → field name): every field one the
// import has, none named twice, no header empty or twice. The problem names the entry at
// fault; the field is "columns".
func CheckColumns(cols map[string]string) error {
	if len(cols) > maxMappedColumns {
		return badColumns(msg.New("field_error.columns_too_many", "max", strconv.Itoa(maxMappedColumns)))
	}
	byField := map[field]string{}
	byHeader := map[string]string{}
	for _, h := range slices.Sorted(maps.Keys(cols)) {
		norm := normalizeHeader(h)
		if norm == "" {
			return badColumns(msg.New("field_error.columns_empty_header"))
		}
		if m, bad := textcheck.Problem(h, 256); bad {
			// The header's problem is read through the catalogue: its code names it, its params
			// come along.
			nv := []string{"header", textcheck.Echo(h), "reason", strings.TrimPrefix(m.Code, "field_error.")}
			for k, v := range m.Params {
				nv = append(nv, k, v)
			}
			return badColumns(msg.New("field_error.columns_header", nv...))
		}
		f, ok := fieldNamed(cols[h])
		if !ok {
			return badColumns(msg.New("field_error.columns_not_a_field",
				"header", textcheck.Echo(h), "value", textcheck.Echo(cols[h]), "fields", strings.Join(fieldNames[:], ", ")))
		}
		if prev, dup := byField[f]; dup {
			return badColumns(msg.New("field_error.columns_field_twice",
				"first", textcheck.Echo(prev), "second", textcheck.Echo(h), "field", fieldNames[f]))
		}
		if prev, dup := byHeader[norm]; dup {
			return badColumns(msg.New("field_error.columns_header_twice",
				"header", textcheck.Echo(h), "first", textcheck.Echo(prev), "second", textcheck.Echo(h)))
		}
		byField[f], byHeader[norm] = h, h
	}
	return nil
}

// ParseColumns reads the columns form field: a JSON object of header → field name, checked
// (CheckColumns). Empty text is no mapping.
func ParseColumns(text string) (map[string]string, error) {
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	var cols map[string]string
	if err := json.Unmarshal([]byte(text), &cols); err != nil {
		return nil, badColumns(msg.New("field_error.columns_not_json"))
	}
	if err := CheckColumns(cols); err != nil {
		return nil, err
	}
	return cols, nil
}

// badColumns is a columns mapping that cannot be one.
func badColumns(m msg.Message) *FileProblem {
	return &FileProblem{Kind: Invalid, Code: "bad_columns", Message: m.English(), Field: "columns", FieldMessage: m}
}

// mappingOf reads a checked columns mapping for use.
func mappingOf(cols map[string]string) mapping {
	if len(cols) == 0 {
		return nil
	}
	m := make(mapping, len(cols))
	for h, name := range cols {
		if f, ok := fieldNamed(name); ok {
			m[normalizeHeader(h)] = f
		}
	}
	return m
}

// headerTest is isHeader under a mapping: a row naming two or more columns.
func (m mapping) headerTest() func([]string) bool {
	return func(cells []string) bool {
		_, known, _ := mapHeader(cells, m)
		return known >= 2
	}
}

// missingHeaders reports the headers of a mapping that are not cells of the header row, as
// the uploader wrote them.
func missingHeaders(cols map[string]string, cells []string) []string {
	have := map[string]bool{}
	for _, c := range cells {
		have[normalizeHeader(c)] = true
	}
	var out []string
	for _, h := range slices.Sorted(maps.Keys(cols)) {
		if !have[normalizeHeader(h)] {
			out = append(out, h)
		}
	}
	return out
}

// HeaderKey is the key a saved mapping is kept under: the header set of a file, normalised
// and order-independent (blank cells left out), hashed.
func HeaderKey(cells []string) string {
	set := map[string]bool{}
	for _, c := range cells {
		if n := normalizeHeader(c); n != "" {
			set[n] = true
		}
	}
	h := sha256.Sum256([]byte(strings.Join(slices.Sorted(maps.Keys(set)), "\x1f")))
	return hex.EncodeToString(h[:])
}

// FieldInfo describes one field an import reads, for a mapping form.
type FieldInfo struct {
	Name     string            `json:"name"`
	Labels   map[string]string `json:"labels"` // by language: "en", "zh"
	Required bool              `json:"required"`
}

// englishLabels are the fields' names as a form shows them in English.
var englishLabels = [numFields]string{"Customer code", "Customer name", "Phone", "Email", "City", "Level"}

// Fields lists the fields an import reads, in column order of the template.
func Fields() []FieldInfo {
	out := make([]FieldInfo, numFields)
	for f := range numFields {
		out[f] = FieldInfo{Name: fieldNames[f], Labels: map[string]string{"en": englishLabels[f], "zh": chineseNames[f]},
			Required: slices.Contains(required, f)}
	}
	return out
}

// HeaderProblem is a header row the import cannot use as it is: the details a mapping form
// needs, in the problem of a refused submit and in a failed task's error (error.details).
type HeaderProblem struct {
	// HeaderRow is the row taken for the header (1-based); 0 when the file has none.
	HeaderRow int `json:"header_row"`
	// Headers are the header row's cells that are not blank, as written.
	Headers []string `json:"headers"`
	// UnknownHeaders are the headers no mapping or alias names.
	UnknownHeaders []string `json:"unknown_headers"`
	// MissingFields are the required fields no header holds.
	MissingFields []string `json:"missing_fields"`
	// Fields are every field the import reads, with their labels.
	Fields []FieldInfo `json:"fields"`
}

// headerProblem describes a header row that lacks required fields under m.
func headerProblem(row int, cells []string, cols columns, m mapping) *HeaderProblem {
	p := &HeaderProblem{HeaderRow: row, Headers: []string{}, UnknownHeaders: []string{}, MissingFields: []string{}, Fields: Fields()}
	for _, c := range cells {
		if strings.TrimSpace(c) == "" {
			continue
		}
		p.Headers = append(p.Headers, c)
		if _, ok := m.lookup(c); !ok {
			p.UnknownHeaders = append(p.UnknownHeaders, c)
		}
	}
	for _, f := range required {
		if cols[f] < 0 {
			p.MissingFields = append(p.MissingFields, fieldNames[f])
		}
	}
	return p
}

// lookup is the field a header names: the mapping's, else the alias table's.
func (m mapping) lookup(header string) (field, bool) {
	n := normalizeHeader(header)
	if f, ok := m[n]; ok {
		return f, true
	}
	f, ok := aliases[n]
	return f, ok
}

// describe is the header problem in words, the message of the error it is part of.
func (p *HeaderProblem) describe() string {
	var b strings.Builder
	if len(p.UnknownHeaders) > 0 {
		quoted := make([]string, len(p.UnknownHeaders))
		for i, h := range p.UnknownHeaders {
			quoted[i] = fmt.Sprintf("%q", sheettype.Clip(h, 40))
		}
		example := "phone"
		if len(p.MissingFields) > 0 {
			example = p.MissingFields[0]
		}
		fmt.Fprintf(&b, "; the header(s) %s are not known: map them to fields with columns, e.g. {%s: %q}",
			strings.Join(quoted, ", "), quoted[0], example)
	}
	return b.String()
}

// HeaderError is a header row the import cannot use: a FileProblem (missing_columns or
// missing_header) with the details a mapping form needs.
type HeaderError struct {
	*FileProblem
	Details *HeaderProblem
}

func (e *HeaderError) Unwrap() error { return e.FileProblem }

// maxColumn is the highest column index (0-based) the import reads, -1 when none: cells to
// its right are never looked at.
func (c *columns) maxColumn() int {
	return slices.Max(c[:])
}

// fieldMapped reports whether the mapping puts some header in field f.
func (m mapping) fieldMapped(f field) (string, bool) {
	for h, g := range m {
		if g == f {
			return h, true
		}
	}
	return "", false
}
