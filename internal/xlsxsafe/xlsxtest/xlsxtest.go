// Package xlsxtest reads back what a written .xlsx says about itself, for tests: each
// worksheet's declared dimension beside the range its cells really cover.
package xlsxtest

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"
)

// SheetRanges reads the workbook at path: one "declared=used" per worksheet, sorted, where
// declared is its <dimension ref> and used the range its cells cover, written as a
// spreadsheet writes it (a single cell, or none, is "A1").
func SheetRanges(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return SheetRangesOf(t, b)
}

// SheetRangesOf is SheetRanges of a workbook in memory.
func SheetRangesOf(t testing.TB, workbook []byte) []string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(workbook), int64(len(workbook)))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range zr.File {
		if !strings.HasPrefix(f.Name, "xl/worksheets/") || !strings.HasSuffix(f.Name, ".xml") || strings.Count(f.Name, "/") != 2 {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		declared, used := readRange(t, f.Name, rc)
		rc.Close()
		out = append(out, declared+"="+used)
	}
	slices.Sort(out)
	return out
}

// readRange is one worksheet's declared dimension and the range of its cells.
func readRange(t testing.TB, name string, r io.Reader) (declared, used string) {
	t.Helper()
	c1, r1, c2, r2 := 0, 0, 0, 0
	dec := xml.NewDecoder(r)
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		el, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		for _, a := range el.Attr {
			switch {
			case el.Name.Local == "dimension" && a.Name.Local == "ref":
				declared = a.Value
			case el.Name.Local == "c" && a.Name.Local == "r":
				col, row, err := excelize.CellNameToCoordinates(a.Value)
				if err != nil {
					t.Fatalf("%s: cell %q: %v", name, a.Value, err)
				}
				if c1 == 0 {
					c1, r1, c2, r2 = col, row, col, row
				}
				c1, r1, c2, r2 = min(c1, col), min(r1, row), max(c2, col), max(r2, row)
			}
		}
	}
	if c1 == 0 {
		return declared, "A1"
	}
	from, _ := excelize.CoordinatesToCellName(c1, r1)
	to, _ := excelize.CoordinatesToCellName(c2, r2)
	if from == to {
		return declared, from
	}
	return declared, from + ":" + to
}
