package xlsxsafe

import (
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/xuri/excelize/v2"

	"github.com/taskcenter/taskcenter/internal/storage"
)

func TestNeutralize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"=HYPERLINK(\"http://x\")": "'=HYPERLINK(\"http://x\")",
		"+1+2":                     "'+1+2",
		"-2+3":                     "'-2+3",
		"@SUM(A1)":                 "'@SUM(A1)",
		"\t=1":                     "'\t=1",
		"\r=1":                     "'\r=1",
		"plain":                    "plain",
		"a=b":                      "a=b",
		"":                         "",
		"13800138000":              "13800138000",
	} {
		if got := Neutralize(in); got != want {
			t.Errorf("Neutralize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestClip(t *testing.T) {
	t.Parallel()
	if got := Clip("short"); got != "short" {
		t.Fatalf("Clip(short) = %q", got)
	}
	long := strings.Repeat("名", MaxCellChars)
	got := Clip(long)
	if n := utf8.RuneCountInString(got); n != MaxCellChars-1 || !strings.HasSuffix(got, "…") {
		t.Fatalf("Clip of %d characters: %d characters, suffix %q", MaxCellChars, n, got[len(got)-3:])
	}
	// Excel counts UTF-16 units: a character outside the BMP counts twice.
	emoji := strings.Repeat("😀", MaxCellChars/2)
	if units := len(utf16.Encode([]rune(Clip(emoji)))); units > MaxCellChars {
		t.Fatalf("Clip left %d UTF-16 units", units)
	}
}

// Whatever it is given, a row is written: columns past XFD are dropped, long text is cut.
func TestWriterKeepsRowsWithinASheet(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	fs, err := storage.New(t.Context(), storage.Config{}, root)
	if err != nil {
		t.Fatal(err)
	}
	wide := make([]string, 20_000)
	for i := range wide {
		wide[i] = "h"
	}
	w, err := NewWriter(fs, "tsk_test", "Sheet1", wide)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	row := make([]any, 20_000)
	for i := range row {
		row[i] = "x"
	}
	row[0] = strings.Repeat("x", 40_000)
	if err := w.Row(row); err != nil {
		t.Fatalf("a row of 20,000 columns, one of 40,000 characters: %v", err)
	}
	if _, err := w.Commit(t.Context(), "results/wide.xlsx"); err != nil {
		t.Fatal(err)
	}
	f, err := excelize.OpenFile(filepath.Join(root, "results", "wide.xlsx"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := f.GetRows("Sheet1")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || len(rows[0]) != MaxColumns || len(rows[1]) != MaxColumns || !strings.HasSuffix(rows[1][0], "…") {
		t.Fatalf("rows %d, columns %d and %d", len(rows), len(rows[0]), len(rows[1]))
	}
	checkRanges(t, filepath.Join(root, "results", "wide.xlsx"), "A1:XFD2")
}
