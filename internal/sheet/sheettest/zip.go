package sheettest

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"hash/crc32"
	"strings"
	"testing"
)

// Piece is B repeated Times times (once when Times is 0) in a zip part being built.
type Piece struct {
	B     []byte
	Times int64
}

// Text is s, once.
func Text(s string) Piece { return Piece{B: []byte(s)} }

// Repeat is s repeated until it makes n bytes (n a multiple of len(s), and of 1 MiB when it
// is larger; len(s) a power of two up to 1 KiB). A large n is one compressed megabyte
// repeated, so a gigabyte costs milliseconds and a megabyte of the zip.
func Repeat(s string, n int64) Piece {
	const chunk = 1 << 20
	if n >= chunk {
		if chunk%len(s) != 0 || n%chunk != 0 {
			panic("sheettest.Repeat: sizes do not divide")
		}
		return Piece{B: []byte(strings.Repeat(s, chunk/len(s))), Times: n / chunk}
	}
	return Piece{B: []byte(strings.Repeat(s, int(n)/len(s)))}
}

// Part is one file of a zip being built; Declare, when set, is the uncompressed size its
// headers claim instead of the real one.
type Part struct {
	Name    string
	Pieces  []Piece
	Declare uint64
}

// Zip builds a zip archive whose parts are deflated piece by piece: each piece is compressed
// once and its sync-flushed, byte-aligned output repeated, so a hostile file (a gigabyte cell,
// a part that lies about its size, ten thousand parts) costs a megabyte and milliseconds.
func Zip(t testing.TB, parts ...Part) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	// Each distinct piece is compressed once (a compressor costs ~1 MB to set up: 10,001
	// parts took a minute under the race detector), and so is the closing empty block.
	blocks := map[string][]byte{}
	flushed := func(b []byte) []byte {
		if out, ok := blocks[string(b)]; ok {
			return out
		}
		var block bytes.Buffer
		fw, _ := flate.NewWriter(&block, flate.BestCompression)
		fw.Write(b) //nolint:errcheck // into memory
		fw.Flush()  //nolint:errcheck // into memory
		blocks[string(b)] = block.Bytes()
		return block.Bytes()
	}
	var final bytes.Buffer
	fw, _ := flate.NewWriter(&final, flate.BestCompression)
	fw.Close() //nolint:errcheck // into memory: the final, empty block
	for _, p := range parts {
		var data bytes.Buffer
		var crc uint32
		var size uint64
		for _, pc := range p.Pieces {
			block := flushed(pc.B)
			for range max(pc.Times, 1) {
				data.Write(block)
				crc = crc32.Update(crc, crc32.IEEETable, pc.B)
				size += uint64(len(pc.B))
			}
		}
		data.Write(final.Bytes())
		if p.Declare != 0 {
			size = p.Declare
		}
		w, err := zw.CreateRaw(&zip.FileHeader{Name: p.Name, Method: zip.Deflate, CRC32: crc,
			CompressedSize64: uint64(data.Len()), UncompressedSize64: size})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data.Bytes()) //nolint:errcheck // into memory
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// BookParts are the parts of a one-sheet workbook, its sheet named "S", around the sheet's
// XML and the shared strings' (none when sst is nil).
func BookParts(sheet, sst []Piece) []Part {
	parts := []Part{
		{Name: "[Content_Types].xml", Pieces: []Piece{Text(`<Types/>`)}},
		{Name: "xl/workbook.xml", Pieces: []Piece{Text(`<workbook xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="S" sheetId="1" r:id="rId1"/></sheets></workbook>`)}},
		{Name: "xl/_rels/workbook.xml.rels", Pieces: []Piece{Text(`<Relationships><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/><Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/></Relationships>`)}},
		{Name: "xl/worksheets/sheet1.xml", Pieces: sheet},
	}
	if sst != nil {
		parts = append(parts, Part{Name: "xl/sharedStrings.xml", Pieces: sst})
	}
	return parts
}
