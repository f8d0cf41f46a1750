package sheet

import (
	"fmt"
	"io"
	"strings"

	"github.com/taskcenter/taskcenter/internal/sheet/sheettype"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/transform"
)

// Encoding is the text encoding of an uploaded CSV.
type Encoding string

// Encodings a CSV may be read in. Excel on a Chinese Windows saves "CSV (逗号分隔)" in GBK,
// which GB18030 contains; "CSV UTF-8" is UTF-8 with a BOM.
const (
	// EncodingAuto: UTF-8 when the whole file is valid UTF-8, else GB18030 when the whole file
	// decodes as GB18030, reads like Chinese text and one of its first rows is a header
	// (Options.IsHeader).
	EncodingAuto    Encoding = "auto"
	EncodingUTF8    Encoding = "utf-8"
	EncodingGB18030 Encoding = "gb18030"
)

// ParseEncoding reads the encoding form field: utf-8, gb18030 (gbk, gb2312 and cp936 are
// read as gb18030, which contains them) or auto; empty is auto.
func ParseEncoding(s string) (Encoding, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return EncodingAuto, nil
	case "utf-8", "utf8":
		return EncodingUTF8, nil
	case "gb18030", "gbk", "gb2312", "cp936":
		return EncodingGB18030, nil
	}
	return "", sheettype.Errorf(sheettype.BadEncoding, "encoding must be utf-8, gb18030 or auto, not %q", sheettype.Clip(s, 40))
}

// decoded is the UTF-8 text of a CSV stored in enc. GB18030 is transcoded while it is read,
// a buffer at a time; the bytes on disk (which the upload's hash and key are of) stay as
// they are.
func decoded(r io.Reader, enc Encoding) io.Reader {
	if enc == EncodingGB18030 {
		return transform.NewReader(r, simplifiedchinese.GB18030.NewDecoder())
	}
	return r
}

// gbStats counts the double-byte characters of a GB18030 byte stream by zone, to tell
// Chinese text from text in another 8-bit encoding that happens to decode: the GB2312 zone
// (both bytes 0xA1–0xFE, lead up to 0xF7) holds the 6,763 common hanzi and the full-width
// punctuation that make up nearly all Chinese text, while Latin-1 or Windows-1252 text
// decoded as GBK pairs an accented letter with the ASCII letter after it (a trail byte below
// 0x80), outside that zone. It is an io.Writer fed the raw bytes as they are decoded.
type gbStats struct {
	common, other int
	state         int // 0: between characters; 1: after a lead byte; 2, 3: inside a four-byte sequence
	lead          byte
}

func (g *gbStats) Write(p []byte) (int, error) {
	for _, b := range p {
		switch g.state {
		case 0:
			switch {
			case b < 0x80:
			case b == 0x80 || b == 0xFF:
				g.other++
			default:
				g.lead, g.state = b, 1
			}
		case 1:
			switch {
			case b >= 0x30 && b <= 0x39:
				g.state = 2
				continue
			case g.lead >= 0xA1 && g.lead <= 0xF7 && b >= 0xA1 && b <= 0xFE:
				g.common++
			default:
				g.other++
			}
			g.state = 0
		case 2:
			g.state = 3
		case 3:
			g.other++
			g.state = 0
		}
	}
	return len(p), nil
}

// chinese reports whether the double-byte characters read like Chinese text: some from the
// common zone and at least as many from it as from anywhere else (names may use the rarer
// hanzi of GBK's extension, a few per file).
func (g *gbStats) chinese() bool { return g.common > 0 && g.other <= g.common }

// knownHeader reports whether one of the first HeaderSearchRows rows of a CSV is a header
// (isHeader).
func knownHeader(text io.Reader, lim Limits, isHeader func([]string) bool) bool {
	ok, _ := headerMatches(newCSVSource(text, nil, lim), isHeader)
	return ok
}

// encodingError is where a CSV stops being text in the encoding it was read as.
type encodingError struct {
	line int
	b    byte // the first bad byte (UTF-8), 0 when not known (decoded text)
}

func (e *encodingError) where() string {
	if e.b != 0 {
		return fmt.Sprintf("byte 0x%02X on line %d", e.b, e.line)
	}
	return fmt.Sprintf("line %d", e.line)
}
