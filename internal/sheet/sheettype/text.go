package sheettype

import "unicode/utf8"

// Text collects one value's text, keeping at most max characters (and, should the text not
// be UTF-8, at most 4·max bytes): the rest is counted as cut and dropped as it streams by.
// Every reader reads a cell's text into one, so a cell holds at most MaxCellChars characters
// whatever the file holds.
type Text struct {
	b     []byte
	runes int
	max   int
	cut   bool
}

// NewText is an empty Text keeping at most max characters.
func NewText(max int) Text { return Text{max: max} }

// Bytes is the text kept; valid until the next Reset or Add.
func (t *Text) Bytes() []byte { return t.b }

// Cut reports whether characters beyond max were dropped.
func (t *Text) Cut() bool { return t.cut }

// Reset empties t for the next value.
func (t *Text) Reset() {
	t.b, t.runes, t.cut = t.b[:0], 0, false
}

// Add appends p, up to the cap.
func (t *Text) Add(p []byte) {
	if t.cut || len(p) == 0 {
		return
	}
	if room := t.max - t.runes; len(p) <= room {
		t.b = append(t.b, p...)
		t.runes += RuneStarts(p)
		return
	}
	for i, c := range p {
		if t.runes == t.max && c&0xC0 != 0x80 || len(t.b)+i >= utf8.UTFMax*t.max { // the bytes too, should p not be UTF-8
			t.b = append(t.b, p[:i]...)
			t.cut = true
			return
		}
		if c&0xC0 != 0x80 {
			t.runes++
		}
	}
	t.b = append(t.b, p...)
}

// AddRune appends r, up to the cap.
func (t *Text) AddRune(r rune) {
	var b [utf8.UTFMax]byte
	t.Add(b[:utf8.EncodeRune(b[:], r)])
}

// AddByte appends one byte under the same cap as Add.
func (t *Text) AddByte(c byte) {
	if t.cut {
		return
	}
	if t.runes == t.max && c&0xC0 != 0x80 || len(t.b) >= utf8.UTFMax*t.max {
		t.cut = true
		return
	}
	if c&0xC0 != 0x80 {
		t.runes++
	}
	t.b = append(t.b, c)
}

// RuneStarts counts the bytes of p that start a UTF-8 sequence: its characters, as Text
// counts them.
func RuneStarts(p []byte) int {
	n := len(p)
	for _, c := range p {
		if c&0xC0 == 0x80 {
			n--
		}
	}
	return n
}
