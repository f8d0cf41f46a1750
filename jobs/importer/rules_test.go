package importer

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/task"
)

func TestHeaderMapping(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		header  []string
		want    map[field]int
		wantErr string
	}{
		{"english in any order with extras", []string{"Phone", "note", " Code ", "NAME", "level"}, map[field]int{fPhone: 0, fCode: 2, fName: 3, fLevel: 4, fEmail: -1}, ""},
		{"chinese with markers", []string{"客户编号*", "客户名称(必填)", "手机号（必填）", "邮箱", "城市", "等级"}, map[field]int{fCode: 0, fName: 1, fPhone: 2, fEmail: 3, fCity: 4, fLevel: 5}, ""},
		{"bom and underscores", []string{"\uFEFFcustomer_code", "customer_name", "mobile"}, map[field]int{fCode: 0, fName: 1, fPhone: 2}, ""},
		{"missing required", []string{"code", "email"}, nil, "missing required column(s): name (客户名称), phone (手机号)"},
		{"same field twice", []string{"code", "name", "phone", "手机号"}, nil, "columns C and D both hold phone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cols, _, err := mapHeader(tt.header, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for f, i := range tt.want {
				if cols[f] != i {
					t.Errorf("%s at %d, want %d", fieldNames[f], cols[f], i)
				}
			}
		})
	}
}

func TestRowValidation(t *testing.T) {
	t.Parallel()
	cols, _, err := mapHeader([]string{"code", "name", "phone", "email", "city", "level"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		row  []string
		want string // the row's message; empty for a valid row
	}{
		{"valid", []string{"C001", "Alice", "13800138000", "a@example.com", "上海", "黄金"}, ""},
		{"trimmed and short row", []string{"  C002 ", " Bob ", " 13800138001 "}, ""},
		{"numeric phone cell", []string{"C003", "n", "13800138000"}, ""},
		{"scientific phone with all digits", []string{"C004", "n", "1.3800138E10"}, ""},
		{"float phone", []string{"C005", "n", "13800138000.0"}, ""},
		{"spaced phone with +86", []string{"C006", "n", "+86 138-0013-8000"}, ""},
		{"rounded phone", []string{"C007", "n", "1.38001E+10"}, "phone: 1.38001E+10 is a rounded number"},
		{"short phone", []string{"C008", "n", "1380013800"}, "phone: must be 11 digits starting with 1"},
		{"landline", []string{"C009", "n", "02112345678"}, "phone: must be 11 digits starting with 1"},
		{"missing name and phone", []string{"C010", "", ""}, "name: is required; phone: is required"},
		{"bad code", []string{"C 011", "n", "13800138000"}, "code: must be 1 to 32 letters"},
		{"long code", []string{strings.Repeat("A", 33), "n", "13800138000"}, "code: must be 1 to 32"},
		{"bad email", []string{"C012", "n", "13800138000", "not-an-email"}, "email: is not a valid email address"},
		{"email with name", []string{"C013", "n", "13800138000", "Bob <b@x.com>"}, "email: is not a valid"},
		{"email without domain dot", []string{"C016", "n", "13800138000", "a@localhost"}, "email: is not a valid"},
		{"email with double dot", []string{"C017", "n", "13800138000", "a..b@x.com"}, "email: is not a valid"},
		{"email with two ats", []string{"C018", "n", "13800138000", "a@b@x.com"}, "email: is not a valid"},
		{"email plus tag", []string{"C019", "n", "13800138000", "first.last+tag@sub.example.co"}, ""},
		{"bad level", []string{"C014", "n", "13800138000", "", "", "vip"}, "level: must be normal, silver, gold, platinum or diamond"},
		{"32k name", []string{"C015", strings.Repeat("名", 32767), "13800138000"}, "name: must be at most 100 characters (this one has 32767)"},
		{"several problems", []string{"", "n", "123", "x@"}, "code: is required; phone: must be 11 digits starting with 1; email: is not a valid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, errs := cols.validate(7, tt.row, nil)
			_, msg := rowMessage(errs)
			if tt.want == "" {
				if len(errs) > 0 {
					t.Fatalf("valid row rejected: %s", msg)
				}
				if c.Row != 7 || c.Phone == "" || len(c.Phone) != 11 {
					t.Fatalf("customer = %+v", c)
				}
				return
			}
			if !strings.HasPrefix(msg, tt.want) && !strings.Contains(msg, tt.want) {
				t.Fatalf("message = %q, want %q", msg, tt.want)
			}
		})
	}
	c, _ := cols.validate(2, []string{"1001.0", "n", "13800138000", "A@Example.com", "", "Gold"}, nil)
	if c.Code != "1001" || c.Level != "gold" || c.Email != "a@example.com" || c.Phone != "13800138000" {
		t.Fatalf("normalised customer = %+v", c)
	}
	if c, _ := cols.validate(2, []string{"C1", "n", "1.3800138E10"}, nil); c.Phone != "13800138000" {
		t.Fatalf("scientific phone = %q", c.Phone)
	}
}

// A cell the reader cut at the cell limit (and flagged) makes its row a row error that says
// so, whatever the part that was read looks like.
func TestLongCellRejectsItsRow(t *testing.T) {
	t.Parallel()
	cols, _, _ := mapHeader([]string{"code", "name", "phone"}, nil)
	name := strings.Repeat("名", config.Default().Import.MaxCellChars)
	_, errs := cols.validate(2, []string{"C1", name, "13800138000"}, []int{1})
	if _, msg := rowMessage(errs); msg != "name: must be at most 100 characters (this one has more than 32,767)" {
		t.Fatalf("row 2 message = %q", msg)
	}
	shared := strings.Repeat("x", config.Default().Import.MaxCellChars)
	_, errs = cols.validate(3, []string{shared, "n", "13800138001", shared}, []int{0, 3})
	if _, msg := rowMessage(errs); msg != "code: must be 1 to 32 letters, digits, '-' or '_' (this one has more than 32,767)" {
		t.Fatalf("row 3 message = %q", msg)
	}
}

// A rejected row keeps a bounded copy of its cells.
func TestRejectedRowCopyIsBounded(t *testing.T) {
	t.Parallel()
	wide := make([]string, 20_000)
	for i := range wide {
		wide[i] = strings.Repeat("x", 1000)
	}
	it := item(5, []task.FieldMessage{msgTooLong.of("name", "100", "1000")}, wide)
	var cells []string
	if err := json.Unmarshal(it.Raw, &cells); err != nil {
		t.Fatal(err)
	}
	if len(it.Raw) > maxRawRowBytes+4<<10 || cells[len(cells)-1] != "…" || !strings.HasSuffix(cells[0], "…") || utf8.RuneCountInString(cells[0]) != maxRawCellChars+1 {
		t.Fatalf("raw copy of %d bytes, %d cells, first %q", len(it.Raw), len(cells), cells[0][:10])
	}
	small := []string{"C1", "n", "13800138000"}
	if got := rawCells(small); &got[0] != &small[0] {
		t.Fatal("a small row was copied")
	}
}

// A file over the upload limit is told the limit in the unit it was set in, in each
// language: never "the 0 MB limit" for a limit that is not a whole MiB.
func TestTheUploadLimitIsSaidInTheUnitItWasSetIn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		limit  int64
		en, zh string
	}{
		{2 << 20, "The file is larger than the 2 MB upload limit.", "文件超过了 2 MB 的上传大小限制。"},
		{1_500_000, "The file is larger than the 1,500,000 bytes upload limit.", "文件超过了 1,500,000 字节 的上传大小限制。"},
		{512 << 10, "The file is larger than the 512 KB upload limit.", "文件超过了 512 KB 的上传大小限制。"},
	} {
		p := TooLargeProblem(tc.limit)
		m := msg.Message{Code: "problem." + p.Code, Params: p.Params}
		if en, zh := m.English(), m.In(msg.ZH); en != tc.en || zh != tc.zh {
			t.Errorf("limit %d: %q / %q, want %q / %q", tc.limit, en, zh, tc.en, tc.zh)
		}
	}
}
