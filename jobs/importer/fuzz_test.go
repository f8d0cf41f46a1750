package importer

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/taskcenter/taskcenter/internal/sheet/sheettest"
)

// FuzzRowRules runs the header mapping and row checks on arbitrary cells.
func FuzzRowRules(f *testing.F) {
	var spec struct {
		Header []string
		Rows   []struct{ Cells []any }
	}
	if err := json.Unmarshal(sheettest.Fixture(f, "messy.json"), &spec); err != nil {
		f.Fatal(err)
	}
	f.Add(strings.Join(spec.Header, "\x1f"), "")
	for _, r := range spec.Rows {
		cells := make([]string, len(r.Cells))
		for i, c := range r.Cells {
			cells[i] = fmt.Sprint(c)
		}
		f.Add(strings.Join(spec.Header, "\x1f"), strings.Join(cells, "\x1f"))
	}
	f.Add("code\x1fname\x1fphone\x1femail\x1fcity\x1flevel", "C1\x1fn\x1f+86 1.3800138E10\x1fA@B.example\x1f\x1fGold")
	f.Add("code\x1fname\x1fphone", "1001.0\x1f"+strings.Repeat("x", 300)+"\x1f1.38001E+10"+strings.Repeat(" ", 500))
	codeRE := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$`)
	f.Fuzz(func(t *testing.T, header, row string) {
		cols, _, err := mapHeader(strings.Split(header, "\x1f"), nil)
		if err != nil {
			return
		}
		seen := map[int]bool{}
		for _, f := range required {
			if cols[f] < 0 || seen[cols[f]] {
				t.Fatalf("header %q maps %v", header, cols)
			}
			seen[cols[f]] = true
		}
		cells := strings.Split(row, "\x1f")
		var long []int
		if len(row)%7 == 3 && len(cells) > 1 { // now and then, a cell the reader cut
			long = []int{1}
		}
		c, errs := cols.validate(2, cells, long)
		for _, e := range errs {
			if m := e.why.text(e.args...); len(m) > 300 {
				t.Fatalf("a message echoes the input: %d bytes", len(m))
			}
		}
		if len(errs) == 0 {
			switch {
			case !codeRE.MatchString(c.Code), !phoneRE.MatchString(c.Phone),
				utf8.RuneCountInString(c.Name) > maxName || c.Name == "", utf8.RuneCountInString(c.City) > maxCity,
				c.Email != "" && (!validEmail(c.Email) || c.Email != strings.ToLower(c.Email)),
				!slices.Contains([]string{"normal", "silver", "gold", "platinum", "diamond"}, c.Level):
				t.Fatalf("row %q accepted as %+v", row, c)
			}
			for _, col := range long {
				for _, i := range cols {
					if i == col {
						t.Fatalf("a cut cell in column %d was accepted", col)
					}
				}
			}
		}
		if raw := rawJSON(cells); len(raw) > maxRawRowBytes*7+maxRawCells*8 {
			t.Fatalf("the rejected-row copy is %d bytes", len(raw))
		}
		for _, cell := range cells {
			p, why, args := normalizePhone(cell)
			if (p == "") == (why == nil) || p != "" && !phoneRE.MatchString(p) || why != nil && len(why.text(args...)) > 300 {
				t.Fatalf("normalizePhone(%q) = %q, %v %q", cell, p, why, args)
			}
			if validEmail(cell) {
				at := strings.LastIndexByte(cell, '@')
				if len(cell) > maxEmail || at < 1 || strings.ContainsAny(cell, " \t\r\n<>\x00") || !strings.Contains(cell[at:], ".") {
					t.Fatalf("validEmail(%q) = true", cell)
				}
			}
		}
	})
}

var phoneRE = regexp.MustCompile(`^1[0-9]{10}$`)
