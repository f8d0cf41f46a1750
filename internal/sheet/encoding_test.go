package sheet

import (
	"bytes"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"golang.org/x/text/encoding/charmap"

	"github.com/taskcenter/taskcenter/internal/sheet/sheettest"
	"github.com/taskcenter/taskcenter/internal/sheet/sheettype"
)

// A file that is neither UTF-8 nor Chinese GB18030 is refused at submit, saying what was tried.
func TestCSVEncodingsThatAreRefused(t *testing.T) {
	t.Parallel()
	latin1 := func(s string) []byte {
		b, err := charmap.ISO8859_1.NewEncoder().Bytes([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	random := make([]byte, 4096)
	rand.Read(random) //nolint:errcheck
	gbk := sheettest.Fixture(t, "messy-gbk.csv")
	for name, c := range map[string]struct {
		csv       []byte
		enc       string
		code      sheettype.Code
		substring []string
	}{
		"latin-1, an accent before a comma": {latin1("code,name,phone,city\r\nC1,José,13800138000,São Paulo\r\n"), "", "unknown_encoding",
			[]string{"tried UTF-8", "tried GB18030/GBK", "line 2"}},
		"latin-1 that decodes as GBK": {latin1("code,name,phone,city\r\nC1,Müller Françoise,13800138000,Zürich\r\nC2,Jürgen Böhm,13800138001,Düsseldorf\r\n"), "", "unknown_encoding",
			[]string{"not as Chinese text", "Latin-1"}},
		"GBK without a known header": {sheettest.Fixture(t, "messy-gbk.csv")[bytes.IndexByte(gbk, '\n')+1:], "", "unknown_encoding", []string{"names the columns"}},
		"random binary":              {random, "", "", nil},
		"GBK sent as utf-8":          {gbk, "utf-8", "not_utf8", []string{"byte 0xBF on line 1", "encoding=gb18030"}},
		"an unknown encoding":        {gbk, "big5", "bad_encoding", []string{"utf-8, gb18030 or auto"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := inspectPath(writeTemp(t, "x.csv", c.csv), CSV, "", Limits{})
			if c.enc != "" {
				var e Encoding
				if e, err = ParseEncoding(c.enc); err == nil {
					_, err = inspectChoice(writeTemp(t, "x.csv", c.csv), Choice{Format: CSV, Encoding: e}, Limits{})
				}
			}
			var fp *sheettype.Error
			if !errors.As(err, &fp) {
				t.Fatalf("accepted (%v)", err)
			}
			if c.code != "" && fp.Code != c.code {
				t.Fatalf("%s: %s, want %s", fp.Code, fp.Message, c.code)
			}
			for _, s := range c.substring {
				if !strings.Contains(fp.Message, s) {
					t.Errorf("%q does not say %q", fp.Message, s)
				}
			}
		})
	}
	// Asked for, GB18030 is read without the detection's checks; auto takes the GBK fixture.
	for _, enc := range []Encoding{EncodingGB18030, EncodingAuto} {
		ins, err := inspectChoice(writeTemp(t, "x.csv", gbk), Choice{Format: CSV, Encoding: enc}, Limits{})
		if err != nil || ins.Encoding != EncodingGB18030 || ins.Rows != 16 {
			t.Fatalf("%s: %+v, %v", enc, ins, err)
		}
	}
	if ins, err := inspectPath(writeTemp(t, "x.csv", sheettest.Fixture(t, "messy-bom.csv")), CSV, "", Limits{}); err != nil || ins.Encoding != EncodingUTF8 {
		t.Fatalf("UTF-8 with a BOM: %+v, %v", ins, err)
	}
}
