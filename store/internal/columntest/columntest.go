// Package columntest checks, for the tests of store and its subpackages, that the column
// list each package's statements name is exactly its model's columns, in model order: a
// field added to a model without its column (or the reverse) fails a test, not production.
package columntest

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Check fails t for each model of lists (model type → the column list its statements name)
// whose list differs from the model's bun columns.
func Check(t testing.TB, lists map[reflect.Type]string) {
	t.Helper()
	for typ, cols := range lists {
		var want []string
		for i := range typ.NumField() {
			tag := typ.Field(i).Tag.Get("bun")
			name, _, _ := strings.Cut(tag, ",")
			if name == "" || strings.HasPrefix(tag, "table:") {
				continue
			}
			want = append(want, name)
		}
		var got []string
		for c := range strings.SplitSeq(cols, ",") {
			got = append(got, strings.TrimSpace(c))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: column list %v, model %v", typ.Name(), got, want)
		}
	}
}
