package sheettype

import "testing"

func TestColumnName(t *testing.T) {
	t.Parallel()
	for i, want := range map[int]string{0: "A", 25: "Z", 26: "AA", 27: "AB", 701: "ZZ", 702: "AAA"} {
		if got := ColumnName(i); got != want {
			t.Errorf("ColumnName(%d) = %s, want %s", i, got, want)
		}
	}
}
