package xls_test

// The .xls reader is fuzzed as the import uses it, through package sheet: Inspect (submit's
// checks) and Open (the rows). `go test` runs the seed corpus (the .xls fixtures, and every
// crasher ever found, under testdata/fuzz/FuzzXLSReader/); `go test -fuzz '^FuzzXLSReader$'`
// explores.

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/taskcenter/taskcenter/internal/sheet"
	"github.com/taskcenter/taskcenter/internal/sheet/sheettype"
	"github.com/taskcenter/taskcenter/internal/sheet/xls"
)

// fuzzLimits are small, so the fuzzer meets every bound.
var fuzzLimits = sheet.Limits{MaxUncompressed: 1 << 20, MaxEntries: 64, MaxRows: 1000, MaxCellChars: 64,
	MaxColumns: 64, MaxRowBytes: 4096, MaxSharedStrings: 1000}

// isProblem reports whether err is a *sheettype.Error: whatever the bytes, reading them
// fails only in words for the uploader, never with an error the runtime would retry.
func isProblem(err error) bool {
	var fp *sheettype.Error
	return errors.As(err, &fp)
}

// isHeader is a header rule few rows meet, so Inspect reads the head of every sheet of a
// workbook looking for the one that starts with the column names.
func isHeader(cells []string) bool {
	return len(cells) > 1 && cells[0] == "code" && cells[1] == "name"
}

// xlsFile is one of the .xls files testdata/imports holds.
type xlsFile struct {
	name string
	data []byte
}

// xlsFixtures reads every .xls in testdata/imports (the spreadsheet programs' own files),
// failing tb when there are none.
func xlsFixtures(tb testing.TB) []xlsFile {
	tb.Helper()
	paths, _ := filepath.Glob("../../../testdata/imports/*.xls")
	if len(paths) == 0 {
		tb.Fatal("no .xls fixtures in testdata/imports")
	}
	files := make([]xlsFile, 0, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		files = append(files, xlsFile{name: filepath.Base(p), data: b})
	}
	return files
}

// upload is an .xls held in memory, as sheet.Open reads a stored one.
type upload struct{ *bytes.Reader }

func (upload) Close() error { return nil }

// FuzzXLSReader reads arbitrary bytes as an .xls: submit's checks, then every row. Whatever
// the bytes, reading fails only with a file problem, and rows keep every bound.
func FuzzXLSReader(f *testing.F) {
	for _, x := range xlsFixtures(f) {
		f.Add(x.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := sheet.Inspect(bytes.NewReader(data), int64(len(data)), sheet.Choice{Format: sheet.XLS},
			sheet.Options{Limits: fuzzLimits, Count: sheet.CountAlways, IsHeader: isHeader})
		if err != nil && !isProblem(err) {
			t.Fatalf("Inspect: %v (%T) is not a file problem", err, err)
		}
		src, err := sheet.Open(upload{bytes.NewReader(data)}, sheet.Inspection{Format: sheet.XLS}, fuzzLimits, "")
		if err != nil {
			if !isProblem(err) {
				t.Fatalf("open: %v (%T) is not a file problem", err, err)
			}
			return
		}
		defer src.Close()
		last := 0
		for src.Next() {
			n, cells := src.Row()
			if n != last+1 || len(cells) > xls.MaxColumns || len(cells) > fuzzLimits.MaxColumns {
				t.Fatalf("row %d after %d with %d cells", n, last, len(cells))
			}
			for _, c := range cells {
				if !utf8.ValidString(c) || utf8.RuneCountInString(c) > fuzzLimits.MaxCellChars || strings.ContainsRune(c, 0) {
					t.Fatalf("row %d: cell %q breaks a bound", n, c)
				}
			}
			last = n
		}
		if err := src.Err(); err != nil && !isProblem(err) {
			t.Fatalf("read: %v (%T) is not a file problem", err, err)
		}
	})
}

// A cut-short or damaged .xls is refused in the uploader's words: no library name, offsets
// or io errors ("mscfb: … EOF; 7680") in the message.
func TestDamagedXLSIsExplainedWithoutParserInternals(t *testing.T) {
	t.Parallel()
	for _, x := range xlsFixtures(t) {
		b := x.data
		for _, cut := range []int{520, 1024, 4096, len(b) / 2, len(b) - 1} {
			if cut <= 0 || cut >= len(b) {
				continue
			}
			data := b[:cut]
			_, err := sheet.Inspect(bytes.NewReader(data), int64(len(data)), sheet.Choice{Format: sheet.XLS},
				sheet.Options{Limits: fuzzLimits, Count: sheet.CountAlways, IsHeader: isHeader})
			if err == nil {
				continue // a cut that leaves a readable workbook
			}
			msg := err.Error()
			if !isProblem(err) || strings.Contains(msg, "mscfb") || strings.Contains(msg, "EOF") || strings.Contains(msg, "sector") {
				t.Errorf("%s cut at %d: %q", x.name, cut, msg)
			}
		}
	}
}
