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

// BenchmarkWideRows reads a hostile wide workbook: every row 16,000 cells wide, six of them
// used, the rest shared strings. "kept" reads as the import does once it has mapped the
// header (KeepColumns(256): the columns an error report keeps), "all" decodes every cell.
// A 1.4 MB workbook of 3,000 such rows cost the import minutes of CPU before the reader
// skipped the cells past the kept columns; ns/op here is per workbook of wideRows rows.
func BenchmarkWideRows(b *testing.B) {
	const (
		wideRows  = 200
		wideCells = 16_000
	)
	var row strings.Builder
	row.WriteString(`<row>`)
	for i := range wideCells {
		if i < 6 {
			fmt.Fprintf(&row, `<c t="inlineStr"><is><t>v%d</t></is></c>`, i)
			continue
		}
		fmt.Fprintf(&row, `<c t="s"><v>%d</v></c>`, i%4)
	}
	row.WriteString(`</row>`)
	sst := []sheettest.Piece{sheettest.Text(`<sst><si><t>a</t></si><si><t>b &amp; c</t></si><si><t>名字</t></si><si><t>_x0041_</t></si></sst>`)}
	data := sheettest.Zip(b, sheettest.BookParts(sheetXML(sheettest.Text(headerRow), sheettest.Piece{B: []byte(row.String()), Times: wideRows}), sst)...)
	for _, bc := range []struct {
		name string
		keep int
	}{{"kept", 256}, {"all", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			tmp := b.TempDir()
			b.SetBytes(int64(row.Len() * wideRows))
			for b.Loop() {
				src, err := newXLSXSource(bytes.NewReader(data), int64(len(data)), "", Limits{}, tmp)
				if err != nil {
					b.Fatal(err)
				}
				src.keepColumns(bc.keep)
				rows := 0
				for src.Next() {
					if _, cells := src.Row(); len(cells) > max(bc.keep, 6) && bc.keep > 0 {
						b.Fatalf("row of %d cells read, keeping %d", len(cells), bc.keep)
					}
					rows++
				}
				if err := src.Err(); err != nil || rows != wideRows+1 {
					b.Fatalf("%d rows, %v", rows, err)
				}
				src.Close()
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)/wideRows*3000, "s/3000rows")
		})
	}
}
