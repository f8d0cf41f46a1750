package importer

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/taskcenter/taskcenter/internal/sheet/sheettype"
	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/store/customers"
)

// field is a column the import understands.
type field int

const (
	fCode field = iota
	fName
	fPhone
	fEmail
	fCity
	fLevel
	numFields
)

var fieldNames = [numFields]string{"code", "name", "phone", "email", "city", "level"}

// chineseNames are the Chinese headers shown in messages next to the English ones.
var chineseNames = [numFields]string{"客户编号", "客户名称", "手机号", "邮箱", "城市", "等级"}

var required = []field{fCode, fName, fPhone}

// aliases maps a normalised header to its field. Headers are compared lower-cased, without
// spaces, underscores, '*' markers or a parenthesised note: "手机号(必填)*" reads as 手机号.
var aliases = map[string]field{
	"code": fCode, "customercode": fCode, "客户编号": fCode, "客户代码": fCode, "编号": fCode,
	"name": fName, "customername": fName, "客户名称": fName, "客户名": fName, "名称": fName,
	"phone": fPhone, "mobile": fPhone, "phonenumber": fPhone, "手机号": fPhone, "手机号码": fPhone, "手机": fPhone,
	"email": fEmail, "e-mail": fEmail, "mail": fEmail, "邮箱": fEmail, "电子邮箱": fEmail, "邮件": fEmail,
	"city": fCity, "城市": fCity, "所在城市": fCity,
	"level": fLevel, "grade": fLevel, "等级": fLevel, "客户等级": fLevel,
}

var noteInHeader = regexp.MustCompile(`[(（][^)）]*[)）]`)

func normalizeHeader(h string) string {
	h = noteInHeader.ReplaceAllString(h, "")
	return strings.Map(func(r rune) rune {
		switch {
		case unicode.IsSpace(r), r == '_', r == '*', r == '\uFEFF':
			return -1
		}
		return unicode.ToLower(r)
	}, h)
}

// columns maps each field to its column index in the file (-1 when absent).
type columns [numFields]int

// mapHeader reads a header row under a mapping (nil: the aliases alone): the mapping's
// headers first, then the aliases for the fields it leaves open. It returns how many cells
// name a field, and an error a user can act on when required columns are missing (a
// *missingColumns) or a field appears twice.
func mapHeader(cells []string, m mapping) (columns, int, error) {
	var cols columns
	for i := range cols {
		cols[i] = -1
	}
	known := 0
	for i, c := range cells {
		f, ok := m[normalizeHeader(c)]
		if !ok {
			continue
		}
		known++
		if prev := cols[f]; prev >= 0 {
			return cols, known, fmt.Errorf("columns %s and %s both hold %s; keep one", sheettype.ColumnName(prev), sheettype.ColumnName(i), fieldNames[f])
		}
		cols[f] = i
	}
	for i, c := range cells {
		n := normalizeHeader(c)
		if _, mapped := m[n]; mapped {
			continue
		}
		f, ok := aliases[n]
		if !ok {
			continue // unknown extra columns are ignored
		}
		known++
		if _, taken := m.fieldMapped(f); taken {
			continue // the mapping put another column in this field
		}
		if prev := cols[f]; prev >= 0 {
			return cols, known, fmt.Errorf("columns %s and %s both hold %s; keep one", sheettype.ColumnName(prev), sheettype.ColumnName(i), fieldNames[f])
		}
		cols[f] = i
	}
	var missing []string
	for _, f := range required {
		if cols[f] < 0 {
			missing = append(missing, fmt.Sprintf("%s (%s)", fieldNames[f], chineseNames[f]))
		}
	}
	if len(missing) > 0 {
		return cols, known, &missingColumns{text: "the header row is missing required column(s): " + strings.Join(missing, ", ")}
	}
	return cols, known, nil
}

// missingColumns is a header row without every required field.
type missingColumns struct{ text string }

func (e *missingColumns) Error() string { return e.text }

// isHeader reports whether a row is the header: it names two or more known columns (a title
// row above the header names at most one).
func isHeader(cells []string) bool {
	_, known, _ := mapHeader(cells, nil)
	return known >= 2
}

// fieldError is one problem with one cell: a row message and its args.
type fieldError struct {
	field field
	why   *message
	args  []string
}

// part is the problem as a catalogue message of the field.
func (e fieldError) part() task.FieldMessage { return e.why.of(fieldNames[e.field], e.args...) }

// Limits of the customers table.
const (
	maxName  = 100
	maxEmail = 254
	maxCity  = 64
)

var (
	codePattern  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$`)
	phonePattern = regexp.MustCompile(`^1[0-9]{10}$`)
	numberCell   = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?([eE][+]?[0-9]+)?$`)
)

// levels maps accepted spellings to the canonical level stored.
var levels = map[string]string{
	"normal": "normal", "普通": "normal", "standard": "normal",
	"silver": "silver", "白银": "silver", "银牌": "silver",
	"gold": "gold", "黄金": "gold", "金牌": "gold",
	"platinum": "platinum", "铂金": "platinum", "白金": "platinum",
	"diamond": "diamond", "钻石": "diamond",
}

// tooLong is what a field must be, said of a cell longer than a cell may be (n characters
// and more were read).
func tooLong(f field, n string) fieldError {
	switch f {
	case fCode:
		return fieldError{f, msgCutCode, []string{n}}
	case fPhone:
		return fieldError{f, msgCutPhone, []string{n}}
	case fLevel:
		return fieldError{f, msgCutLevel, []string{n}}
	case fName:
		return fieldError{f, msgCutText, []string{strconv.Itoa(maxName), n}}
	case fEmail:
		return fieldError{f, msgCutText, []string{strconv.Itoa(maxEmail), n}}
	}
	return fieldError{f, msgCutText, []string{strconv.Itoa(maxCity), n}}
}

// cell returns the trimmed value of field f in a row (empty when the column is absent or the
// row is short).
func (c *columns) cell(row []string, f field) string {
	i := c[f]
	if i < 0 || i >= len(row) {
		return ""
	}
	return strings.TrimSpace(row[i])
}

// validate turns a data row into a customer, or the list of its problems. long lists the
// columns whose text the reader cut at the cell limit: a field in one of them is reported
// as too long, whatever the part that was read looks like.
func (c *columns) validate(rowNo int, row []string, long []int) (customers.Row, []fieldError) {
	out := customers.Row{Row: rowNo}
	var errs []fieldError
	bad := func(f field, why *message, args ...string) {
		errs = append(errs, fieldError{f, why, args})
	}
	var over [numFields]bool
	for _, col := range long {
		for f, i := range c {
			if i == col && col < len(row) {
				over[f] = true
				errs = append(errs, tooLong(field(f), sheettype.Thousands(int64(utf8.RuneCountInString(row[col])))))
			}
		}
	}
	if len(long) > 0 {
		// The cut fields are reported; clear them so no second message follows.
		row = slices.Clone(row)
		for f, i := range c {
			if over[f] {
				row[i] = ""
			}
		}
	}

	for _, f := range required {
		if !over[f] && c.cell(row, f) == "" {
			bad(f, msgRequired)
		}
	}
	if code := integral(c.cell(row, fCode)); code != "" {
		if codePattern.MatchString(code) {
			out.Code = code
		} else {
			bad(fCode, msgCode)
		}
	}
	out.Name = c.text(row, fName, maxName, bad)
	if raw := c.cell(row, fPhone); raw != "" {
		phone, why, args := normalizePhone(raw)
		if why != nil {
			bad(fPhone, why, args...)
		} else {
			out.Phone = phone
		}
	}
	if email := c.cell(row, fEmail); email != "" {
		if validEmail(email) {
			out.Email = lower(email)
		} else {
			bad(fEmail, msgEmail)
		}
	}
	out.City = c.text(row, fCity, maxCity, bad)
	out.Level = "normal"
	if lv := c.cell(row, fLevel); lv != "" {
		if canon, ok := levels[strings.ToLower(lv)]; ok {
			out.Level = canon
		} else {
			bad(fLevel, msgLevel)
		}
	}
	return out, errs
}

// lower is strings.ToLower without the copy when there is nothing to lower.
func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' || c >= 0x80 {
			return strings.ToLower(s)
		}
	}
	return s
}

// text returns a free-text field, or reports it when it is longer than limit characters.
func (c *columns) text(row []string, f field, limit int, bad func(field, *message, ...string)) string {
	v := c.cell(row, f)
	if n := utf8.RuneCountInString(v); n > limit {
		bad(f, msgTooLong, strconv.Itoa(limit), strconv.Itoa(n))
		return ""
	}
	return v
}

// normalizePhone accepts a mainland mobile number written as digits (spaces and dashes and
// a +86 prefix allowed), or as the number a numeric cell holds (13800138000, 1.3800138E10).
// A number it refuses comes back empty, with the row message that says why and its args.
func normalizePhone(raw string) (string, *message, []string) {
	s := strings.Map(func(r rune) rune {
		if r == ' ' || r == '-' || r == '\u00a0' {
			return -1
		}
		return r
	}, raw)
	s = strings.TrimPrefix(strings.TrimPrefix(s, "+86"), "0086")
	if numberCell.MatchString(s) && strings.ContainsAny(s, ".eE") {
		mantissa, _, _ := strings.Cut(strings.ToLower(s), "e")
		digits := strings.TrimRight(strings.ReplaceAll(mantissa, ".", ""), "0")
		if strings.ContainsAny(s, "eE") && len(digits) <= 6 {
			// Excel shows long numbers rounded to six digits: the rest is lost.
			return "", msgRounded, []string{sheettype.Clip(raw, 40)}
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v != float64(int64(v)) {
			return "", msgPhone, nil
		}
		s = strconv.FormatInt(int64(v), 10)
	}
	if !phonePattern.MatchString(s) {
		return "", msgPhone, nil
	}
	return s, nil, nil
}

// integral turns "1001.0" (how some writers store a whole number) into "1001".
func integral(s string) string {
	if whole, frac, ok := strings.Cut(s, "."); ok && strings.Trim(frac, "0") == "" && whole != "" && strings.Trim(whole, "0123456789") == "" {
		return whole
	}
	return s
}

// validEmail accepts a bare address: a dot-atom local part (RFC 5322 atext and dots), an
// '@', and a domain of letters, digits and hyphens in two or more dot-separated labels;
// beyond ASCII, valid UTF-8 only. It allocates nothing: it runs on every row.
func validEmail(s string) bool {
	at := strings.LastIndexByte(s, '@')
	if len(s) > maxEmail || at < 1 || at > 64 || at == len(s)-1 || !utf8.ValidString(s) {
		return false
	}
	local, domain := s[:at], s[at+1:]
	if local[0] == '.' || local[len(local)-1] == '.' || strings.Contains(local, "..") {
		return false
	}
	for i := 0; i < len(local); i++ {
		c := local[i]
		if !(isAlnum(c) || c == '.' || strings.IndexByte("!#$%&'*+/=?^_`{|}~-", c) >= 0 || c >= 0x80) {
			return false
		}
	}
	labels := 0
	for label := range strings.SplitSeq(domain, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; !(isAlnum(c) || c == '-' || c >= 0x80) {
				return false
			}
		}
		labels++
	}
	return labels >= 2
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// rowParts are a failed row's problems as catalogue messages, one per field at fault.
func rowParts(errs []fieldError) []task.FieldMessage {
	parts := make([]task.FieldMessage, len(errs))
	for i, e := range errs {
		parts[i] = e.part()
	}
	return parts
}

// rowMessage is how a failed row reads: its fields "phone,email" and, in English,
// "phone: must be …; email: …" (what task_items keeps beside the messages).
func rowMessage(errs []fieldError) (fields, message string) { return partsText(rowParts(errs)) }

// partsText is a rejected row's fields, comma-separated, and its message in English.
func partsText(parts []task.FieldMessage) (fields, message string) {
	fs := make([]string, len(parts))
	for i, p := range parts {
		fs[i] = p.Field
	}
	return strings.Join(fs, ","), renderParts(parts, LangEN)
}

// Bounds of the copy of a rejected row kept for the error report (task_items.raw): enough
// to recognise the row, never the whole of a huge one.
const (
	maxRawCells     = 256     // cells kept; the report writes at most this many columns
	maxRawCellChars = 256     // characters kept of each cell, then "…"
	maxRawRowBytes  = 8 << 10 // bytes kept of a row, then a last "…" cell
)

// rawCells is the copy of a row kept for a possible rejection. A row within the bounds is
// returned as it is (the common case allocates nothing).
func rawCells(cells []string) []string {
	total, small := 0, len(cells) <= maxRawCells
	for _, c := range cells {
		total += len(c)
		small = small && len(c) <= maxRawCellChars
	}
	if small && total <= maxRawRowBytes {
		return cells
	}
	out := make([]string, 0, min(len(cells), maxRawCells)+1)
	total = 0
	for i, c := range cells {
		if i == maxRawCells || total >= maxRawRowBytes {
			out = append(out, "…")
			break
		}
		c = clipChars(c, maxRawCellChars)
		total += len(c)
		out = append(out, c)
	}
	return out
}

// clipChars cuts s to n characters, marking the cut with "…".
func clipChars(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j] + "…"
		}
		i++
	}
	return s
}

// rawJSON is a rejected row's cells as stored in task_items.
func rawJSON(cells []string) json.RawMessage {
	b, _ := json.Marshal(rawCells(cells))
	return b
}
