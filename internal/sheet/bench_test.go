package sheet

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/taskcenter/taskcenter/internal/sheet/sheettest"
	"github.com/taskcenter/taskcenter/internal/sheet/sheettype"
)

// benchRows is the size of the benchmark sheets: enough rows that reading them, not opening
// the workbook, is what is measured.
const benchRows = 20_000

// benchBook is a workbook of benchRows rows of eight cells written as Excel writes them
// (every cell with its reference and style) and its sheet's XML size: a code and a name from
// the shared strings (or inline, as stream writers put them), a phone and an amount as
// numbers, a date serial, a boolean, a blank styled cell and a note.
func benchBook(b *testing.B, inline bool) ([]byte, int) {
	b.Helper()
	str := func(ref, s string, i int) string {
		if inline {
			return fmt.Sprintf(`<c r="%s" s="1" t="inlineStr"><is><t>%s</t></is></c>`, ref, s)
		}
		return fmt.Sprintf(`<c r="%s" s="1" t="s"><v>%d</v></c>`, ref, i)
	}
	var sheet strings.Builder
	sheet.WriteString(`<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` + "\n" +
		`<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><dimension ref="A1:H20001"/><sheetData>`)
	sheet.WriteString(`<row r="1" spans="1:8">`)
	for i, h := range []string{"code", "name", "phone", "amount", "joined", "active", "blank", "note"} {
		sheet.WriteString(str(fmt.Sprintf("%s1", sheettype.ColumnName(i)), h, i))
	}
	sheet.WriteString(`</row>`)
	var sst strings.Builder
	sst.WriteString(`<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">`)
	for _, h := range []string{"code", "name", "phone", "amount", "joined", "active", "blank", "note"} {
		fmt.Fprintf(&sst, `<si><t>%s</t></si>`, h)
	}
	for n := 2; n <= benchRows+1; n++ {
		code, name := fmt.Sprintf("C%06d", n), fmt.Sprintf("客户 %d 号", n)
		fmt.Fprintf(&sst, `<si><t>%s</t></si><si><t>%s</t></si>`, code, name)
		fmt.Fprintf(&sheet, `<row r="%d" spans="1:8">%s%s<c r="C%d" s="2"><v>138%08d</v></c><c r="D%d" s="3"><v>%d.25</v></c>`+
			`<c r="E%d" s="4"><v>45%03d</v></c><c r="F%d" t="b"><v>1</v></c><c r="G%d" s="1"/>%s</row>`,
			n, str(fmt.Sprintf("A%d", n), code, 8+2*(n-2)), str(fmt.Sprintf("B%d", n), name, 9+2*(n-2)),
			n, n, n, n*7, n, n%1000, n, n, str(fmt.Sprintf("H%d", n), "a note &amp; more", 8))
	}
	sheet.WriteString(`</sheetData></worksheet>`)
	sst.WriteString(`</sst>`)
	var sstPieces []sheettest.Piece
	if !inline {
		sstPieces = []sheettest.Piece{sheettest.Text(sst.String())}
	}
	return sheettest.Zip(b, sheettest.BookParts([]sheettest.Piece{sheettest.Text(sheet.String())}, sstPieces)...), sheet.Len()
}

// BenchmarkXLSXRows reads every row of a workbook, as the import does: MB/s are of the
// sheet's XML.
func BenchmarkXLSXRows(b *testing.B) {
	for _, bc := range []struct {
		name   string
		inline bool
	}{{"shared", false}, {"inline", true}} {
		b.Run(bc.name, func(b *testing.B) {
			data, xmlSize := benchBook(b, bc.inline)
			tmp := b.TempDir()
			b.SetBytes(int64(xmlSize))
			b.ReportAllocs()
			rows := 0
			for b.Loop() {
				src, err := newXLSXSource(bytes.NewReader(data), int64(len(data)), "", Limits{}, tmp)
				if err != nil {
					b.Fatal(err)
				}
				for src.Next() {
					rows++
				}
				if err := src.Err(); err != nil {
					b.Fatal(err)
				}
				src.Close()
			}
			b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
