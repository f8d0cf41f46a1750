package sheet

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/taskcenter/taskcenter/internal/sheet/sheettype"
)

// chunked hands out its bytes at most n at a time, so tokens straddle every boundary.
type chunked struct {
	b []byte
	n int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), c.n)], c.b)
	c.b = c.b[k:]
	return k, nil
}

// scanTokens lists what the scanner reads: "S name attr=value ~prefixed=value", "E name",
// and the text between tags (adjacent pieces joined, empty ones dropped).
func scanTokens(r io.Reader, textCap int) ([]string, error) {
	s := newXMLScanner(r, 0, func([]byte) bool { return true })
	var out []string
	text := sheettype.NewText(textCap)
	var bad error
	flush := func() {
		if err := checkText(text.Bytes()); err != nil && bad == nil {
			bad = err // the readers check the text they use
		}
		if len(text.Bytes()) > 0 {
			out = append(out, "T "+string(text.Bytes()))
		}
		text.Reset()
	}
	for {
		switch s.Next() {
		case tokEOF:
			flush()
			return out, bad
		case tokErr:
			return out, s.err
		case tokText:
			s.readText(&text)
		case tokStart:
			flush()
			tok := "S " + string(s.name)
			for _, a := range s.attrs {
				v, err := unescape(a.raw)
				if err != nil {
					return out, err
				}
				if a.space {
					tok += " ~"
				} else {
					tok += " "
				}
				tok += string(a.local) + "=" + v
			}
			out = append(out, tok)
			if s.empty {
				out = append(out, "E "+string(s.name))
			}
		case tokEnd:
			flush()
			out = append(out, "E "+string(s.name))
		}
	}
}

// stdTokens lists what encoding/xml's RawToken reads, in scanTokens' terms.
func stdTokens(doc []byte) ([]string, error) {
	d := xml.NewDecoder(bytes.NewReader(doc))
	var out []string
	var text strings.Builder
	flush := func() {
		if text.Len() > 0 {
			out = append(out, "T "+text.String())
		}
		text.Reset()
	}
	for {
		tok, err := d.RawToken()
		if err == io.EOF {
			flush()
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			flush()
			s := "S " + t.Name.Local
			for _, a := range t.Attr {
				if a.Name.Space != "" {
					s += " ~"
				} else {
					s += " "
				}
				s += a.Name.Local + "=" + a.Value
			}
			out = append(out, s)
		case xml.EndElement:
			flush()
			out = append(out, "E "+t.Name.Local)
		case xml.CharData:
			text.Write(t)
		case xml.Directive:
			return nil, errors.New("a directive")
		}
	}
}

var scannerDocs = []string{
	`<a><b x="1" y='2'>text</b><c/></a>`,
	`<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` + "\r\n" + `<worksheet xmlns="http://x" xmlns:r="http://r"><sheetData><row r="1" spans="1:3"><c r="A1" t="s"><v>0</v></c></row></sheetData></worksheet>`,
	`<x:row r="2"><x:c r:id="rId1" t="inlineStr"><x:is><x:t xml:space="preserve"> a &amp; b &lt;&gt;&quot;&apos; &#20013;&#x6587; </x:t></x:is></x:c></x:row>`,
	"<t>line1\r\nline2\rline3\n</t>",
	`<t><![CDATA[<not a tag> & ]] ]>]]>after</t>`,
	`<a><!-- a comment with <tags> and - dashes - --><?pi some > stuff?>b</a>`,
	`<a attr="a > b" other='"quoted"' third="x&#13;y&#x9;z">t</a>`,
	`<a b="1"c="2" d = "3" />`,
	"<a b=\"1\r\n2\">\r</a>",
	`<t>` + strings.Repeat("long text ", 10_000) + `</t>`,
	`<a>unclosed`,
	`text before<a/>text after`,
	`<a><b></a></b>`,
	`<t>&#x10000;&#65533;&#xD800;</t>`,
}

// The scanner reads what encoding/xml reads, whatever the size of the reads under it.
func TestXMLScannerMatchesEncodingXML(t *testing.T) {
	t.Parallel()
	for _, doc := range scannerDocs {
		want, err := stdTokens([]byte(doc))
		if err != nil {
			t.Fatalf("encoding/xml cannot read %.60q: %v", doc, err)
		}
		for name, r := range map[string]io.Reader{
			"whole":    strings.NewReader(doc),
			"one byte": iotest.OneByteReader(strings.NewReader(doc)),
			"7 bytes":  &chunked{[]byte(doc), 7},
		} {
			got, err := scanTokens(r, 1<<20)
			if err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("%s, %.60q:\n got %.300q (%v)\nwant %.300q", name, doc, got, err, want)
			}
		}
	}
}

func TestXMLScannerRefuses(t *testing.T) {
	t.Parallel()
	for doc, want := range map[string]string{
		`<!DOCTYPE x [<!ENTITY a "aaaa">]><x>&a;</x>`: "unsupported markup declaration",
		`<t>&nope;</t>`: "invalid character entity",
		`<t>&#0;</t>`:   "illegal character code U+0000",
		"<t>\x01</t>":   "illegal character code U+0001",
		"<t>\xff</t>":   "invalid UTF-8",
		`<a b="1>`:      "unexpected end of input",
		`<a b=1>`:       "unquoted attribute value",
		`<a ` + strings.Repeat("b", maxTag+10) + `="1">`: errTagTooLong.Error(),
		`<t><![CDATA[never ends`:                         "unexpected end of input in CDATA",
		`<a><!-- never ends`:                             "unexpected end of input",
	} {
		_, err := scanTokens(strings.NewReader(doc), 1<<20)
		if err == nil {
			// Text is checked where it is used; scanTokens uses all of it.
			t.Errorf("%.40q: read without error, want %q", doc, want)
			continue
		}
		var se *syntaxError
		if !strings.Contains(err.Error(), want) || (!errors.As(err, &se) && !errors.Is(err, errTagTooLong)) {
			t.Errorf("%.40q: %v, want %q", doc, err, want)
		}
	}
}

// The span limit stops an element that streams on without end, in bounded memory.
func TestXMLScannerSpanLimit(t *testing.T) {
	t.Parallel()
	r := io.MultiReader(strings.NewReader("<row><c><v>"), &endless{'A', 100 << 20})
	s := newXMLScanner(r, 1<<30, nil)
	if s.Next() != tokStart {
		t.Fatal("no start tag")
	}
	s.limitSpan(1 << 20)
	text := sheettype.NewText(10)
	for s.Next() != tokErr {
		s.readText(&text)
	}
	if !errors.Is(s.err, errSpan) || string(text.Bytes()) != "AAAAAAAAAA" || !text.Cut() || len(s.buf) > scanBuffer {
		t.Fatalf("err %v, text %q (cut %v), buffer %d", s.err, text.Bytes(), text.Cut(), len(s.buf))
	}
}

// FuzzXMLScanner holds the scanner to encoding/xml on every document encoding/xml reads,
// fed in reads of any size, and to its text cap.
func FuzzXMLScanner(f *testing.F) {
	for _, doc := range scannerDocs {
		if len(doc) < 1000 {
			f.Add([]byte(doc), uint8(3), uint8(5))
		}
	}
	f.Fuzz(func(t *testing.T, doc []byte, chunk, textCap uint8) {
		got, err := scanTokens(&chunked{doc, int(chunk) + 1}, 1<<20)
		want, werr := stdTokens(doc)
		if werr == nil && !bytes.Contains(doc, []byte("<!")) || werr == nil && err == nil {
			if err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
				t.Fatalf("reads of %d:\n got %q (%v)\nwant %q", chunk+1, got, err, want)
			}
		}
		// With a cap, each text is the capped prefix of the full one.
		capped, cerr := scanTokens(&chunked{doc, int(chunk) + 1}, int(textCap)+1)
		if err == nil && cerr == nil {
			if len(capped) != len(got) {
				t.Fatalf("%d tokens capped, %d not", len(capped), len(got))
			}
			for i := range got {
				if capped[i] != got[i] && !(strings.HasPrefix(got[i], "T ") && strings.HasPrefix(got[i], capped[i]) && sheettype.RuneStarts([]byte(capped[i][2:])) == int(textCap)+1) {
					t.Fatalf("token %d: capped %q, full %q", i, capped[i], got[i])
				}
			}
		}
	})
}
