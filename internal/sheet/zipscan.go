package sheet

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"io"

	"github.com/taskcenter/taskcenter/internal/sheet/sheettype"
)

// maxDirectoryBytes bounds the names, extra fields and comments of all the entries of an
// archive: archive/zip keeps them in memory.
const maxDirectoryBytes = 16 << 20

// checkZipDirectory bounds what archive/zip allocates when it opens the archive: it keeps a
// File (about 200 bytes, plus its name, extra field and comment) for every central directory
// record it finds, and it reads records until they stop parsing, whatever count the archive
// declares. Every record it can find starts with the signature PK\x01\x02 somewhere in the
// file, so counting those signatures in the whole file, and adding up the lengths their
// headers claim, bounds both before zip.NewReader runs. It costs one read of the upload.
func checkZipDirectory(r io.ReaderAt, size int64, lim Limits) error {
	const headerLen = 46 // fixed part of a central directory record
	sig := []byte("PK\x01\x02")
	buf := make([]byte, min(max(size, 4<<10), 1<<20))
	var (
		records   int
		metaBytes int64
		off       int64 // file offset of buf[0]
		carry     int
	)
	for off+int64(carry) < size {
		n, err := r.ReadAt(buf[carry:], off+int64(carry))
		if n == 0 && err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return err
		}
		chunk := buf[:carry+n]
		final := off+int64(len(chunk)) >= size
		next := 0 // first position not yet examined
		for i := 0; ; {
			j := bytes.Index(chunk[i:], sig)
			if j < 0 {
				next = max(len(chunk)-(headerLen-1), i)
				break
			}
			p := i + j
			if p+headerLen > len(chunk) {
				next = p // the header is cut in two: look again with more bytes
				break
			}
			records++
			metaBytes += int64(binary.LittleEndian.Uint16(chunk[p+28:])) + int64(binary.LittleEndian.Uint16(chunk[p+30:])) +
				int64(binary.LittleEndian.Uint16(chunk[p+32:]))
			if records > lim.MaxEntries {
				return tooManyParts(lim)
			}
			if metaBytes > maxDirectoryBytes {
				return sheettype.Errorf(sheettype.DamagedFile, "the workbook's table of contents is larger than %s; the file is damaged", sheettype.LimitWords(maxDirectoryBytes))
			}
			i = p + 1
		}
		if final {
			break
		}
		carry = copy(buf, chunk[next:])
		off += int64(next)
	}
	return nil
}

// scanRows counts the <row> elements of a worksheet (with or without a namespace prefix)
// with a byte scan of the decompressed XML: far cheaper than parsing it, and exact for the
// rows a well-formed sheet holds. On the way it refuses a row whose XML runs longer than
// MaxRowBytes, so a sheet that is one enormous cell fails after a few megabytes, not after
// a gigabyte. The bytes read count against b. With countBytes > 0 it stops at the first row
// that starts past that many bytes (so a row too large that starts within them is still
// found): it returns the rows it saw, the bytes before the last one, and whether they were
// the whole sheet.
func scanRows(zf *zip.File, b *budget, lim Limits, countBytes int64) (int, int64, bool, error) {
	rc, err := zf.Open()
	if err != nil {
		return 0, 0, false, err
	}
	defer rc.Close()
	r := b.reader(rc)
	const (
		keep = 64 // bytes kept from one read to the next: lookback for a prefix, and the tail
		tail = 16 // bytes at the end of a read not yet examined: a match may be cut in two
	)
	buf := make([]byte, min(max(zf.UncompressedSize64+1, 4<<10), 256<<10))
	var (
		rows    int
		off     int64 // stream offset of buf[0]
		carry   int   // bytes carried over at the start of buf
		from    int   // first position of buf not yet examined
		lastRow int64 = -1
		ended   bool  // </sheetData> seen
	)
	for {
		m, err := io.ReadFull(r, buf[carry:])
		chunk := buf[:carry+m]
		final := err != nil
		if final && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return rows, 0, false, err
		}
		upto := len(chunk) - tail
		if final {
			upto = len(chunk)
		}
		for i := from; i < upto && !ended; {
			j := bytes.Index(chunk[i:], []byte("row"))
			if j < 0 || i+j >= upto {
				break
			}
			p := i + j
			i = p + 3
			if p+3 < len(chunk) && tagNameEnds(chunk[p+3]) && opensTag(chunk, p, '<') {
				if lastRow >= 0 && off+int64(p)-lastRow > lim.MaxRowBytes {
					return rows, 0, false, rowTooLarge(rows, lim)
				}
				rows++
				lastRow = off + int64(p)
				if countBytes > 0 && lastRow >= countBytes {
					return rows, lastRow, false, nil
				}
			}
		}
		if !ended && lastRow >= 0 {
			for i := max(from, int(lastRow-off)); i < upto; {
				j := bytes.Index(chunk[i:], []byte("sheetData>"))
				if j < 0 || i+j >= upto {
					break
				}
				p := i + j
				i = p + 1
				if opensTag(chunk, p, '/') && p >= 2 {
					ended = true
					if off+int64(p)-lastRow > lim.MaxRowBytes {
						return rows, 0, false, rowTooLarge(rows, lim)
					}
					break
				}
			}
		}
		if !ended && lastRow >= 0 && off+int64(upto)-lastRow > lim.MaxRowBytes {
			return rows, 0, false, rowTooLarge(rows, lim)
		}
		if final {
			return rows, off + int64(len(chunk)), true, nil
		}
		carry = min(keep, len(chunk))
		copy(buf, chunk[len(chunk)-carry:])
		off += int64(len(chunk) - carry)
		from = carry - (len(chunk) - upto)
	}
}

// tagNameEnds reports whether c can follow an element name.
func tagNameEnds(c byte) bool {
	return c == ' ' || c == '>' || c == '/' || c == '\t' || c == '\n' || c == '\r'
}

// opensTag reports whether the name at p is the first name of a tag: preceded by '<' (or
// by "</" when mark is '/'), directly or after a prefix ("<x:row"). '<' never appears in
// XML text, so text cannot look like this.
func opensTag(b []byte, p int, mark byte) bool {
	i := p - 1
	if i >= 0 && b[i] == ':' {
		for i--; i >= 0 && p-i <= 33 && isNameByte(b[i]); i-- {
		}
	}
	if mark == '/' {
		return i >= 1 && b[i] == '/' && b[i-1] == '<'
	}
	return i >= 0 && b[i] == '<'
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
}

// rowTooLarge is the problem of a row whose XML is longer than MaxRowBytes; rows is how many
// rows came before it.
func rowTooLarge(rows int, lim Limits) *sheettype.Error {
	return sheettype.Errorf(sheettype.RowTooLarge,
		"row %d holds more than %s; a spreadsheet cell holds at most %s characters, so the file is damaged or was not made by a spreadsheet program",
		rows, sheettype.LimitWords(lim.MaxRowBytes), sheettype.Thousands(int64(lim.MaxCellChars)))
}
