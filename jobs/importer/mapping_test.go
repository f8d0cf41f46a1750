package importer

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestAMappingIsAppliedBeforeTheAliases(t *testing.T) {
	t.Parallel()
	header := []string{"会员号", "姓名", "联系电话", "手机", "城市"}
	t.Run("without a mapping the unknown headers are named with the fields missing", func(t *testing.T) {
		cols, _, err := mapHeader(header, nil)
		var mc *missingColumns
		if !errors.As(err, &mc) {
			t.Fatalf("err = %v, want missing columns", err)
		}
		p := headerProblem(1, header, cols, nil)
		if !slices.Equal(p.UnknownHeaders, []string{"会员号", "姓名", "联系电话"}) || !slices.Equal(p.MissingFields, []string{"code", "name"}) ||
			!strings.Contains(p.describe(), `"会员号", "姓名", "联系电话"`) {
			t.Fatalf("header problem %+v", p)
		}
	})
	t.Run("the mapping's header wins over an alias of the same field", func(t *testing.T) {
		m := mappingOf(map[string]string{"会员号": "code", "姓名": "name", "联系电话 ": "phone"})
		cols, known, err := mapHeader(header, m)
		if err != nil || cols[fCode] != 0 || cols[fName] != 1 || cols[fPhone] != 2 || cols[fCity] != 4 || known != 5 {
			t.Fatalf("cols %v known %d err %v", cols, known, err)
		}
		if cols.maxColumn() != 4 {
			t.Fatalf("the highest column read is %d, want 4", cols.maxColumn())
		}
	})
}

func TestABadMappingIsNamed(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		cols map[string]string
		says string
	}{
		{"a field that does not exist", map[string]string{"a": "nme"}, `"nme" is not a field`},
		{"a field twice", map[string]string{"a": "code", "b": "code"}, `both "a" and "b" to code`},
		{"a header twice once normalised", map[string]string{"Tel": "phone", " tel ": "name"}, "twice"},
		{"an empty header", map[string]string{" ": "phone"}, "empty"},
	} {
		err := CheckColumns(c.cols)
		var fp *FileProblem
		if !errors.As(err, &fp) || fp.Code != "bad_columns" || fp.Field != "columns" || !strings.Contains(fp.Message, c.says) {
			t.Errorf("%s: %v, want bad_columns saying %q", c.name, err, c.says)
		}
	}
	if _, err := ParseColumns(`["phone"]`); err == nil {
		t.Error("a JSON array was taken for a mapping")
	}
	if cols, err := ParseColumns(`{"联系电话": "Phone"}`); err != nil || cols["联系电话"] != "Phone" {
		t.Errorf("a good mapping: %v %v", cols, err)
	}
}

func TestTheHeaderKeyIsTheHeaderSet(t *testing.T) {
	t.Parallel()
	a := HeaderKey([]string{"会员号", "姓名", "联系电话", ""})
	if b := HeaderKey([]string{" 联系电话", "会员号", "姓名"}); a != b {
		t.Error("the same headers in another order and spacing have another key")
	}
	if c := HeaderKey([]string{"会员号", "姓名", "电话号码"}); a == c {
		t.Error("another header set has the same key")
	}
}
