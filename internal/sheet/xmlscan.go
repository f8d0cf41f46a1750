package sheet

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"unicode/utf8"

	"github.com/taskcenter/taskcenter/internal/sheet/sheettype"
)

// xmlScanner is a small streaming XML tokenizer for the few SpreadsheetML parts the package
// reads (worksheet, shared strings, workbook, relationships). Unlike encoding/xml it never
// holds a whole token: text is handed to the caller piece by piece into a capped
// sheettype.Text (or skipped), a tag's attributes are kept only for the elements the caller
// asks for and only up to maxTag bytes, and comments, processing instructions and CDATA are
// streamed. Its memory is its buffer, whatever the input.
//
// It is deliberately not a validating parser. It reads names as encoding/xml's RawToken
// does (the local part after a prefix), decodes the five predefined entities and character
// references (in text and attribute values), normalises CR and CRLF to LF in text, and
// rejects text that is not UTF-8 or holds characters XML forbids (checkText). A DOCTYPE is
// refused: no workbook has one, and entity definitions are never expanded.
type xmlScanner struct {
	r    io.Reader
	buf  []byte
	pos  int   // next unread byte
	end  int   // end of buffered data
	base int64 // stream offset of buf[0]
	eof  bool
	err  error
	stop int64 // stream offset past which reading fails with errSpan

	// The current token.
	name        []byte // local name of the start or end tag (valid until the next call)
	empty       bool   // a start tag that closes itself: <c r="A1"/>
	attrs       []xattr
	textPending bool // a text token not yet read or skipped
	cdata       bool // the pending text is a CDATA section
	wantAttrs   func(local []byte) bool
}

type tokKind int

const (
	tokEOF tokKind = iota
	tokStart
	tokEnd
	tokText
	tokErr
)

// xattr is one attribute of the current start tag, pointing into the scanner's buffer.
type xattr struct {
	local []byte
	space bool // the name has a prefix (r:id)
	raw   []byte
}

const (
	scanBuffer = 256 << 10
	maxTag     = 64 << 10 // longest start tag whose attributes are kept
	maxNameLen = 1 << 10  // longest element name
)

var (
	// errSpan: the element being read (a row, a shared string) is longer than its limit.
	errSpan = errors.New("element too long")
	// errTagTooLong: a start tag whose attributes are needed is longer than maxTag.
	errTagTooLong = errors.New("a tag is longer than 64 KB")
)

// syntaxError is malformed XML.
type syntaxError struct{ msg string }

func (e *syntaxError) Error() string { return "XML syntax error: " + e.msg }

// newXMLScanner scans r, whose size is about sizeHint bytes: a small part gets a small
// buffer, which grows (up to scanBuffer) only when one tag needs it.
func newXMLScanner(r io.Reader, sizeHint uint64, wantAttrs func(local []byte) bool) *xmlScanner {
	n := int(min(max(sizeHint+1, 4<<10), scanBuffer))
	return &xmlScanner{r: r, buf: make([]byte, n), stop: math.MaxInt64, wantAttrs: wantAttrs}
}

// offset is the stream position of the next unread byte.
func (s *xmlScanner) offset() int64 { return s.base + int64(s.pos) }

// limitSpan makes reading fail with errSpan once more than n bytes past the current
// position are consumed (checked whenever the buffer refills, and by spanOver).
func (s *xmlScanner) limitSpan(n int64) { s.stop = s.offset() + n }

// noSpan lifts the limit set by limitSpan.
func (s *xmlScanner) noSpan() { s.stop = math.MaxInt64 }

// spanOver reports whether the position is past the limit set by limitSpan.
func (s *xmlScanner) spanOver() bool { return s.offset() > s.stop }

func (s *xmlScanner) fail(format string, args ...any) {
	if s.err == nil {
		s.err = &syntaxError{fmt.Sprintf(format, args...)}
	}
}

// fill reads more input, first moving unread bytes to the front. It returns false when no
// byte was added: end of input, an error, or a full buffer.
func (s *xmlScanner) fill() bool {
	if s.err != nil {
		return false
	}
	if s.pos > 0 {
		n := copy(s.buf, s.buf[s.pos:s.end])
		s.base += int64(s.pos)
		s.end, s.pos = n, 0
	}
	if s.base > s.stop {
		s.err = errSpan
		return false
	}
	if s.end == len(s.buf) && len(s.buf) < scanBuffer {
		s.buf = append(s.buf, make([]byte, len(s.buf))...)[:min(2*len(s.buf), scanBuffer)]
	}
	if s.eof || s.end == len(s.buf) {
		return false
	}
	for range 100 {
		n, err := s.r.Read(s.buf[s.end:])
		s.end += n
		if err == io.EOF {
			s.eof = true
		} else if err != nil {
			s.err = err
		}
		if n > 0 || err != nil {
			return n > 0
		}
	}
	s.err = io.ErrNoProgress
	return false
}

// ensure makes n bytes available from pos unless the input ends first.
func (s *xmlScanner) ensure(n int) bool {
	for s.end-s.pos < n {
		if !s.fill() {
			return false
		}
	}
	return true
}

// Next moves to the next start tag, end tag or text. Text the caller did not read is
// skipped. Comments and processing instructions are skipped.
func (s *xmlScanner) Next() tokKind {
	if s.textPending {
		s.skipText()
	}
	for {
		if s.err != nil {
			return tokErr
		}
		if s.pos >= s.end && !s.fill() {
			if s.err != nil {
				return tokErr
			}
			return tokEOF
		}
		if s.buf[s.pos] != '<' {
			s.textPending, s.cdata = true, false
			return tokText
		}
		if !s.ensure(2) {
			s.fail("unexpected end of input after <")
			continue
		}
		switch s.buf[s.pos+1] {
		case '/':
			s.pos += 2
			if s.endTag() {
				return tokEnd
			}
		case '?', '!':
			if s.skipMarkup() {
				s.textPending, s.cdata = true, true
				return tokText
			}
		default:
			s.pos++
			if s.startTag() {
				return tokStart
			}
		}
	}
}

// nameLen measures the element name at pos without consuming it.
func (s *xmlScanner) nameLen() (int, bool) {
	i := 0
	for {
		for ; s.pos+i < s.end; i++ {
			switch s.buf[s.pos+i] {
			case ' ', '\t', '\n', '\r', '/', '>':
				if i == 0 {
					s.fail("an element has no name")
					return 0, false
				}
				return i, true
			}
		}
		if i > maxNameLen {
			s.fail("an element name is longer than %d bytes", maxNameLen)
			return 0, false
		}
		if !s.fill() {
			s.fail("unexpected end of input in a tag")
			return 0, false
		}
	}
}

// setName makes the local part of name the current tag's name, in a buffer of the
// scanner's own (the input buffer moves when it refills).
func (s *xmlScanner) setName(name []byte) {
	s.name = append(s.name[:0], localName(name)...)
}

// localName is the part of a name after its prefix, as encoding/xml splits it.
func localName(n []byte) []byte {
	if i := bytes.IndexByte(n, ':'); i >= 1 && i < len(n)-1 {
		return n[i+1:]
	}
	return n
}

func (s *xmlScanner) endTag() bool {
	n, ok := s.nameLen()
	if !ok {
		return false
	}
	s.setName(s.buf[s.pos : s.pos+n])
	s.pos += n
	for {
		if s.pos >= s.end {
			if !s.fill() {
				s.fail("unexpected end of input in </%s>", s.name)
				return false
			}
		}
		switch c := s.buf[s.pos]; c {
		case ' ', '\t', '\n', '\r':
			s.pos++
		case '>':
			s.pos++
			return true
		default:
			s.fail("unexpected %q in </%s>", c, s.name)
			return false
		}
	}
}

// startTag reads a start tag after its '<'. Attributes are parsed only when wantAttrs asks
// for them; otherwise the tag is skipped as it streams by.
func (s *xmlScanner) startTag() bool {
	n, ok := s.nameLen()
	if !ok {
		return false
	}
	s.attrs = s.attrs[:0]
	s.empty = false
	s.setName(s.buf[s.pos : s.pos+n])
	if s.wantAttrs == nil || !s.wantAttrs(s.name) {
		s.pos += n
		return s.skipTag()
	}
	// Keep the whole tag in the buffer, from pos (so refills keep it): find its '>' outside
	// quoted values.
	var quote byte
	i := n
	for {
		for ; s.pos+i < s.end; i++ {
			c := s.buf[s.pos+i]
			switch {
			case quote != 0:
				if c == quote {
					quote = 0
				}
			case c == '"' || c == '\'':
				quote = c
			case c == '>':
				if i > maxTag {
					s.err = errTagTooLong
					return false
				}
				tag := s.buf[s.pos+n : s.pos+i]
				s.pos += i + 1
				return s.parseAttrs(tag)
			case c == '<':
				s.fail("unexpected < in <%s>", s.buf[s.pos:s.pos+n])
				return false
			}
		}
		if i > maxTag {
			s.err = errTagTooLong
			return false
		}
		if !s.fill() {
			s.fail("unexpected end of input in <%s>", s.buf[s.pos:s.pos+n])
			return false
		}
	}
}

// skipTag consumes the rest of a start tag without keeping it.
func (s *xmlScanner) skipTag() bool {
	var quote, last byte
	for {
		for ; s.pos < s.end; s.pos++ {
			c := s.buf[s.pos]
			switch {
			case quote != 0:
				if c == quote {
					quote = 0
				}
				continue
			case c == '"' || c == '\'':
				quote = c
			case c == '>':
				s.pos++
				s.empty = last == '/'
				return true
			case c == '<':
				s.fail("unexpected < in a tag")
				return false
			}
			if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
				last = c
			}
		}
		if !s.fill() {
			s.fail("unexpected end of input in a tag")
			return false
		}
	}
}

// parseAttrs reads name="value" pairs from the bytes of a tag after its name.
func (s *xmlScanner) parseAttrs(tag []byte) bool {
	i := 0
	for {
		for i < len(tag) && isSpace(tag[i]) {
			i++
		}
		if i == len(tag) {
			return true
		}
		if tag[i] == '/' {
			for i++; i < len(tag) && isSpace(tag[i]); i++ {
			}
			if i != len(tag) {
				s.fail("unexpected / in <%s>", s.name)
				return false
			}
			s.empty = true
			return true
		}
		start := i
		for i < len(tag) && tag[i] != '=' && !isSpace(tag[i]) {
			i++
		}
		name := tag[start:i]
		for i < len(tag) && isSpace(tag[i]) {
			i++
		}
		if i == len(tag) || tag[i] != '=' || len(name) == 0 {
			s.fail("attribute %q in <%s> has no value", name, s.name)
			return false
		}
		for i++; i < len(tag) && isSpace(tag[i]); i++ {
		}
		if i == len(tag) || (tag[i] != '"' && tag[i] != '\'') {
			s.fail("unquoted attribute value in <%s>", s.name)
			return false
		}
		q := tag[i]
		j := bytes.IndexByte(tag[i+1:], q)
		if j < 0 {
			s.fail("unterminated attribute value in <%s>", s.name)
			return false
		}
		local := localName(name)
		s.attrs = append(s.attrs, xattr{local: local, space: len(local) < len(name), raw: tag[i+1 : i+1+j]})
		i += j + 2
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// attr returns the value of the current start tag's attribute whose local name is local
// and which has no prefix. It points into the scanner's buffer (valid until the next call)
// unless it had entities to decode.
func (s *xmlScanner) attr(local string) ([]byte, bool) {
	for _, a := range s.attrs {
		if !a.space && string(a.local) == local {
			if bytes.IndexByte(a.raw, '&') < 0 && bytes.IndexByte(a.raw, '\r') < 0 {
				return a.raw, true
			}
			v, err := unescape(a.raw)
			if err != nil {
				return a.raw, true // reads as a bad value where it is used
			}
			return []byte(v), true
		}
	}
	return nil, false
}

// attrString is the decoded value of an attribute; prefixed selects the prefixed one
// (r:id) rather than the plain one.
func (s *xmlScanner) attrString(local string, prefixed bool) (string, error) {
	for _, a := range s.attrs {
		if a.space == prefixed && string(a.local) == local {
			return unescape(a.raw)
		}
	}
	return "", nil
}

// unescape decodes an attribute value as encoding/xml does: entities and character
// references, and a literal CR or CRLF read as LF.
func unescape(raw []byte) (string, error) {
	if bytes.IndexByte(raw, '&') < 0 && bytes.IndexByte(raw, '\r') < 0 {
		if err := checkText(raw); err != nil {
			return "", err
		}
		return string(raw), nil
	}
	var out []byte
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; c {
		case '\r':
			out = append(out, '\n')
			if i+1 < len(raw) && raw[i+1] == '\n' {
				i++
			}
		case '&':
			semi := bytes.IndexByte(raw[i:], ';')
			if semi < 0 {
				return "", &syntaxError{"invalid character entity (no semicolon)"}
			}
			r, ok := entity(raw[i+1 : i+semi])
			if !ok {
				return "", &syntaxError{fmt.Sprintf("invalid character entity %q", raw[i:i+semi+1])}
			}
			out = utf8.AppendRune(out, r)
			i += semi
		default:
			out = append(out, c)
		}
	}
	if err := checkText(out); err != nil {
		return "", err
	}
	return string(out), nil
}

// entity decodes the name between & and ; of a predefined entity or character reference.
func entity(name []byte) (rune, bool) {
	switch string(name) {
	case "lt":
		return '<', true
	case "gt":
		return '>', true
	case "amp":
		return '&', true
	case "apos":
		return '\'', true
	case "quot":
		return '"', true
	}
	if len(name) < 2 || name[0] != '#' {
		return 0, false
	}
	digits, base := name[1:], 10
	if digits[0] == 'x' {
		digits, base = digits[1:], 16
	}
	if len(digits) == 0 || len(digits) > 16 {
		return 0, false
	}
	var n uint64
	for _, c := range digits {
		var d uint64
		switch {
		case '0' <= c && c <= '9':
			d = uint64(c - '0')
		case base == 16 && 'a' <= c && c <= 'f':
			d = uint64(c-'a') + 10
		case base == 16 && 'A' <= c && c <= 'F':
			d = uint64(c-'A') + 10
		default:
			return 0, false
		}
		n = n*uint64(base) + d
		if n > utf8.MaxRune {
			return 0, false
		}
	}
	r := rune(n)
	if !utf8.ValidRune(r) {
		r = utf8.RuneError // a surrogate, as string(rune(n)) gives it
	}
	return r, true
}

// readText reads the pending text token into t (up to t's cap; the rest is skipped).
func (s *xmlScanner) readText(t *sheettype.Text) {
	if !s.textPending {
		return
	}
	s.textPending = false
	if s.cdata {
		s.readCDATA(t)
		return
	}
	for {
		if s.pos >= s.end && !s.fill() {
			return
		}
		chunk := s.buf[s.pos:s.end]
		seg := chunk
		if i := bytes.IndexByte(seg, '<'); i >= 0 {
			seg = seg[:i]
		}
		if i := bytes.IndexByte(seg, '&'); i >= 0 {
			seg = seg[:i]
		}
		if i := bytes.IndexByte(seg, '\r'); i >= 0 {
			seg = seg[:i]
		}
		t.Add(seg)
		s.pos += len(seg)
		if len(seg) == len(chunk) {
			continue
		}
		switch chunk[len(seg)] {
		case '<':
			return
		case '&':
			if !s.readEntity(t) {
				return
			}
		case '\r':
			s.pos++
			t.Add([]byte{'\n'})
			if s.ensure(1) && s.buf[s.pos] == '\n' {
				s.pos++
			}
		}
	}
}

func (s *xmlScanner) readEntity(t *sheettype.Text) bool {
	s.ensure(20)
	window := s.buf[s.pos:s.end]
	if len(window) > 20 {
		window = window[:20]
	}
	semi := bytes.IndexByte(window, ';')
	if semi < 0 {
		s.fail("invalid character entity (no semicolon)")
		return false
	}
	r, ok := entity(window[1:semi])
	if !ok {
		s.fail("invalid character entity %q", window[:semi+1])
		return false
	}
	t.AddRune(r)
	s.pos += semi + 1
	return true
}

// readCDATA reads a CDATA section up to its "]]>".
func (s *xmlScanner) readCDATA(t *sheettype.Text) {
	for {
		if !s.ensure(3) {
			s.fail("unexpected end of input in CDATA section")
			return
		}
		chunk := s.buf[s.pos:s.end]
		endAt := bytes.Index(chunk, []byte("]]>"))
		seg := chunk
		if endAt >= 0 {
			seg = chunk[:endAt]
		} else {
			seg = chunk[:len(chunk)-2] // "]]" may be cut in two
		}
		for len(seg) > 0 {
			i := bytes.IndexByte(seg, '\r')
			if i < 0 {
				t.Add(seg)
				s.pos += len(seg)
				break
			}
			t.Add(seg[:i])
			t.Add([]byte{'\n'})
			s.pos += i + 1
			seg = seg[i+1:]
			if len(seg) > 0 && seg[0] == '\n' {
				s.pos++
				seg = seg[1:]
			} else if len(seg) == 0 && s.ensure(1) && s.buf[s.pos] == '\n' {
				s.pos++
			}
		}
		if endAt >= 0 {
			s.pos += 3
			return
		}
	}
}

// skipText consumes the pending text token.
func (s *xmlScanner) skipText() {
	s.textPending = false
	if s.cdata {
		s.skipPast("]]>")
		return
	}
	for {
		if s.pos >= s.end && !s.fill() {
			return
		}
		if i := bytes.IndexByte(s.buf[s.pos:s.end], '<'); i >= 0 {
			s.pos += i
			return
		}
		s.pos = s.end
	}
}

// skipToEnd consumes input up to and including the end tag whose local name is name, at
// the speed of a byte search: every '<' outside a comment, CDATA section or processing
// instruction begins a tag (neither text nor an attribute value may hold one), so the tags
// in between are not parsed, their text not read or checked. It reports whether the end tag
// was found; the scanner's error says why not.
func (s *xmlScanner) skipToEnd(name string) bool {
	s.textPending = false
	for {
		if s.err != nil {
			return false
		}
		i := bytes.IndexByte(s.buf[s.pos:s.end], '<')
		if i < 0 {
			s.pos = s.end
			if !s.fill() {
				s.fail("unexpected end of input looking for </%s>", name)
				return false
			}
			continue
		}
		s.pos += i
		if !s.ensure(2) {
			s.fail("unexpected end of input after <")
			return false
		}
		switch s.buf[s.pos+1] {
		case '/':
			s.pos += 2
			if s.endTag() && string(s.name) == name {
				return true
			}
		case '?', '!':
			if s.skipMarkup() {
				s.skipPast("]]>")
			}
		default:
			s.pos++ // a start tag: its attributes cannot hold a '<'
		}
	}
}

// skipMarkup consumes the processing instruction ("<?…?>") or comment ("<!--…-->") at
// s.pos, or the start of a CDATA section ("<![CDATA["), and then reports true: its text
// follows. Any other declaration (<!DOCTYPE…) fails the scan.
func (s *xmlScanner) skipMarkup() (cdata bool) {
	switch {
	case s.buf[s.pos+1] == '?':
		s.pos += 2
		s.skipPast("?>")
	case s.ensure(4) && bytes.Equal(s.buf[s.pos:s.pos+4], []byte("<!--")):
		s.pos += 4
		s.skipPast("-->")
	case s.ensure(9) && bytes.Equal(s.buf[s.pos:s.pos+9], []byte("<![CDATA[")):
		s.pos += 9
		return true
	default:
		s.fail("unsupported markup declaration (<!DOCTYPE or similar)")
	}
	return false
}

// skipPast consumes input up to and including marker.
func (s *xmlScanner) skipPast(marker string) {
	m := []byte(marker)
	for {
		if !s.ensure(len(m)) {
			s.fail("unexpected end of input looking for %q", marker)
			return
		}
		if i := bytes.Index(s.buf[s.pos:s.end], m); i >= 0 {
			s.pos += i + len(m)
			return
		}
		s.pos = s.end - (len(m) - 1)
	}
}

// checkText reports text that is not UTF-8 or holds a character XML does not allow (as
// encoding/xml does), so no NUL or stray byte ever reaches the database.
func checkText(b []byte) error {
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c >= 0x20 && c < 0x80 || c == '\t' || c == '\n' || c == '\r' {
			continue
		}
		if c < 0x80 {
			return &syntaxError{fmt.Sprintf("illegal character code %U", rune(c))}
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return &syntaxError{"invalid UTF-8"}
		}
		if !(r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF) {
			return &syntaxError{fmt.Sprintf("illegal character code %U", r)}
		}
		i += size - 1
	}
	return nil
}
