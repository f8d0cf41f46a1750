package main

import (
	"archive/zip"
	"bufio"
	"bytes"
	"compress/flate"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"
)

// hostilePiece is b repeated times (once when times is 0) in a zip part being built.
type hostilePiece struct {
	b     []byte
	times int
}

func hp(s string) hostilePiece { return hostilePiece{b: []byte(s)} }

// megabytesOf is n MiB of c, as one compressed megabyte repeated.
func megabytesOf(c byte, n int) hostilePiece {
	return hostilePiece{b: bytes.Repeat([]byte{c}, 1<<20), times: n}
}

// hostilePart is one file of a hand-built zip; declare, when set, is the size its headers
// claim instead of the real one.
type hostilePart struct {
	name    string
	pieces  []hostilePiece
	declare uint64
}

// hostileZip builds a zip whose parts are deflated piece by piece: each piece is compressed
// once and its sync-flushed output repeated, so a gigabyte of text costs a megabyte and
// milliseconds.
func hostileZip(t *testing.T, parts ...hostilePart) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	// Each distinct piece is compressed once (a compressor costs ~1 MB to set up: 10,001
	// parts took a minute under the race detector), and so is the closing empty block.
	blocks := map[string][]byte{}
	deflated := func(b []byte, flush bool) []byte {
		key := fmt.Sprint(flush) + string(b)
		if out, ok := blocks[key]; ok {
			return out
		}
		var block bytes.Buffer
		fw, _ := flate.NewWriter(&block, flate.BestCompression)
		fw.Write(b) //nolint:errcheck
		if flush {
			fw.Flush() //nolint:errcheck
		} else {
			fw.Close() //nolint:errcheck
		}
		blocks[key] = block.Bytes()
		return block.Bytes()
	}
	for _, p := range parts {
		var data bytes.Buffer
		var crc uint32
		var size uint64
		for _, pc := range p.pieces {
			block := deflated(pc.b, true)
			for range max(pc.times, 1) {
				data.Write(block)
				crc = crc32.Update(crc, crc32.IEEETable, pc.b)
				size += uint64(len(pc.b))
			}
		}
		data.Write(deflated(nil, false))
		if p.declare != 0 {
			size = p.declare
		}
		w, err := zw.CreateRaw(&zip.FileHeader{Name: p.name, Method: zip.Deflate, CRC32: crc,
			CompressedSize64: uint64(data.Len()), UncompressedSize64: size})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data.Bytes()) //nolint:errcheck
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// hostileBook is a one-sheet workbook around the given sheet and shared strings XML.
func hostileBook(sheet, sst []hostilePiece) []hostilePart {
	parts := []hostilePart{
		{name: "[Content_Types].xml", pieces: []hostilePiece{hp(`<Types/>`)}},
		{name: "xl/workbook.xml", pieces: []hostilePiece{hp(`<workbook xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>`)}},
		{name: "xl/_rels/workbook.xml.rels", pieces: []hostilePiece{hp(`<Relationships><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/><Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/></Relationships>`)}},
		{name: "xl/worksheets/sheet1.xml", pieces: sheet},
	}
	if sst != nil {
		parts = append(parts, hostilePart{name: "xl/sharedStrings.xml", pieces: sst})
	}
	return parts
}

const hostileHeader = `<row r="1"><c t="inlineStr"><is><t>code</t></is></c><c t="inlineStr"><is><t>name</t></is></c><c t="inlineStr"><is><t>phone</t></is></c></row>`

// uploadStream posts a multipart import whose file content is streamed from r.
func uploadStream(t *testing.T, base, filename string, r io.Reader) response {
	t.Helper()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		fw, err := mw.CreateFormFile("file", filename)
		if err == nil {
			_, err = io.Copy(fw, r)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	req, _ := http.NewRequest("POST", base+"/api/v1/imports", pr)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	res, err := checkedClient(t).Do(req)
	if err != nil {
		t.Fatalf("upload %s: %v", filename, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// repeatReader streams n bytes of pattern.
type repeatReader struct {
	pattern []byte
	n       int64
	off     int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	if r.off == 0 && len(r.pattern) < 64<<10 {
		// The same stream in large copies: a one-byte pattern copied byte by byte took 80 s
		// for 500 MB under the race detector.
		r.pattern = bytes.Repeat(r.pattern, (64<<10)/len(r.pattern)+1)
	}
	k := 0
	for k < len(p) && int64(k) < r.n {
		c := copy(p[k:min(len(p), k+int(min(r.n-int64(k), int64(len(r.pattern)-r.off))))], r.pattern[r.off:])
		r.off = (r.off + c) % len(r.pattern)
		k += c
	}
	r.n -= int64(k)
	return k, nil
}

// memory samples a process's resident memory from /proc until stopped.
type memory struct {
	pid     int
	mu      sync.Mutex
	maxRSS  int64 // kB, the largest VmRSS sampled
	samples int
	stop    chan struct{}
	done    chan struct{}
}

func watchMemory(pid int) *memory {
	m := &memory{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if rss, _ := procStatus(pid, "VmRSS"); rss > 0 {
				m.mu.Lock()
				m.maxRSS, m.samples = max(m.maxRSS, rss), m.samples+1
				m.mu.Unlock()
			}
			select {
			case <-m.stop:
				return
			case <-t.C:
			}
		}
	}()
	return m
}

func (m *memory) finish() (maxRSS int64, samples int) {
	close(m.stop)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.maxRSS, m.samples
}

// procStatus reads a "Vm…: N kB" line of /proc/<pid>/status.
func procStatus(pid int, key string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && k == key {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", key, pid)
}

// Every hostile file of the hostile-input round, against the real binary (api and worker in one
// process): each is refused at submit or ends FAILED as bad input, with words a person
// understands, no retry and no alert; a normal import beside them succeeds; the process
// stays under 300 MB and keeps answering /healthz.
func TestHostileUploadsKeepTheProcessSmallAndAnswering(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]string{
		"TASKCENTER_IMPORT_MAX_UPLOAD_BYTES": strconv.Itoa(600 << 20), // room for a 500 MB CSV
	})
	bin := e.startBinary("api,worker")
	api := &proc{t: t, client: checkedClient(t), base: bin.base}
	pid := bin.cmd.Process.Pid
	mem := watchMemory(pid)

	// /healthz must keep answering, promptly, all along.
	var healthFailures atomic.Int32
	var slowest atomic.Int64
	stopHealth := make(chan struct{})
	healthDone := make(chan struct{})
	go func() {
		defer close(healthDone)
		client := checkedClient(t)
		client.Timeout = 2 * time.Second
		for {
			began := time.Now()
			res, err := client.Get(bin.base + "/healthz")
			if err != nil || res.StatusCode != http.StatusOK {
				healthFailures.Add(1)
			}
			if err == nil {
				res.Body.Close()
			}
			slowest.Store(max(slowest.Load(), int64(time.Since(began))))
			select {
			case <-stopHealth:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()

	gigaCell := []hostilePiece{hp(`<row r="2"><c r="A2" t="inlineStr"><is><t>`), megabytesOf('A', 1000), hp(`</t></is></c></row>`)}
	// Declares two rows, holds 1.1 million.
	lying := []hostilePiece{hp(`<worksheet><dimension ref="A1:C2"/><sheetData>` + hostileHeader),
		{b: []byte(strings.Repeat(`<row><c><v>1</v></c></row>`, 1000)), times: 1100}, hp(`</sheetData></worksheet>`)}
	wrap := hostileBook([]hostilePiece{hp(`<worksheet><sheetData>` + hostileHeader), megabytesOf(' ', 64), hp(`</sheetData></worksheet>`)}, nil)
	wrap[3].declare = 1 << 63
	wrap = append(wrap, hostilePart{name: "xl/media/padding.bin", pieces: []hostilePiece{hp("x")}, declare: 1 << 63})
	manyParts := hostileBook([]hostilePiece{hp(`<worksheet><sheetData>` + hostileHeader + `</sheetData></worksheet>`)}, nil)
	for i := range 10_001 {
		manyParts = append(manyParts, hostilePart{name: fmt.Sprintf("xl/media/%d", i), pieces: []hostilePiece{hp("x")}})
	}

	type hostile struct {
		name    string
		file    string
		content func() io.Reader
		status  int    // at submit: 202, or the refusal
		code    string // the refusal's or the failure's code
		says    string
	}
	book := func(parts []hostilePart) func() io.Reader {
		b := hostileZip(t, parts...)
		return func() io.Reader { return bytes.NewReader(b) }
	}
	cases := []hostile{
		{"a 1,000 MiB cell that deflates to 1 MB", "cell.xlsx",
			book(hostileBook(append([]hostilePiece{hp(`<worksheet><sheetData>` + hostileHeader)}, append(gigaCell, hp(`</sheetData></worksheet>`))...), nil)),
			422, "row_too_large", "row 2 holds more than 8 MB"},
		{"the same cell under a plausible dimension", "cell-declared.xlsx",
			book(hostileBook(append([]hostilePiece{hp(`<worksheet><dimension ref="A1:C100000"/><sheetData>` + hostileHeader)}, append(gigaCell, hp(`</sheetData></worksheet>`))...), nil)),
			202, "row_too_large", "row 2 holds more than 8 MB"},
		{"a 1,000 MiB shared string", "sst.xlsx",
			book(hostileBook([]hostilePiece{hp(`<worksheet><dimension ref="A1:C2"/><sheetData>` + hostileHeader + `<row r="2"><c t="s"><v>0</v></c></row></sheetData></worksheet>`)},
				[]hostilePiece{hp(`<sst><si><t>`), megabytesOf('A', 1000), hp(`</t></si></sst>`)})),
			202, "row_too_large", "shared string 0 of the workbook holds more than 8 MB"},
		{"ZIP64 sizes that wrap around", "wrap.xlsx", book(wrap), 413, "too_large_uncompressed", "claim to expand to more than any disk holds"},
		{"10,001 parts", "parts.xlsx", book(manyParts), 422, "damaged_file", "more than 10,000 parts"},
		{"a dimension that hides 1.1 million rows", "lying.xlsx", book(hostileBook(lying, nil)), 422, "too_many_rows", "has 1,100,000 rows, over the limit of 1,000,000"},
		{"an unclosed quote over 20 lines of 1 MB", "quote.csv",
			func() io.Reader {
				line := append(bytes.Repeat([]byte("A"), 1<<20), '\n')
				return io.MultiReader(strings.NewReader("code,name,phone\nC1,\"n"), &repeatReader{pattern: line, n: int64(20 * len(line))})
			},
			202, "row_too_large", "a quote (\") opened in that row is never closed"},
		{"a 500 MB field", "field.csv",
			func() io.Reader {
				return io.MultiReader(strings.NewReader("code,name,phone\nC1,"), &repeatReader{pattern: []byte("A"), n: 500 << 20})
			},
			422, "row_too_large", "line 2 is longer than 8 MB"},
	}

	normal := sheetBytes(t, func(f *excelize.File) {
		f.SetSheetRow("Sheet1", "A1", &[]any{"code", "name", "phone"}) //nolint:errcheck
		for i := 2; i <= 41; i++ {
			f.SetSheetRow("Sheet1", fmt.Sprintf("A%d", i), &[]any{fmt.Sprintf("N%d", i), "normal", 13800000000 + i}) //nolint:errcheck
		}
	})
	began := time.Now()
	normalTask := api.submitImport(aliceToken, "normal.xlsx", normal, nil)

	var accepted []struct {
		hostile
		id string
	}
	for _, c := range cases {
		res := uploadStream(t, bin.base, c.file, c.content())
		if res.status != c.status {
			t.Errorf("%s: submit answered %d %s, want %d", c.name, res.status, res.body, c.status)
			continue
		}
		if c.status != http.StatusAccepted {
			var prob struct{ Code, Detail string }
			json.Unmarshal(res.body, &prob) //nolint:errcheck
			if prob.Code != c.code || !strings.Contains(prob.Detail, c.says) {
				t.Errorf("%s: refused with %s %q, want %s saying %q", c.name, prob.Code, prob.Detail, c.code, c.says)
			}
			continue
		}
		var out struct{ Task taskJSON }
		res.json(t, &out)
		accepted = append(accepted, struct {
			hostile
			id string
		}{c, out.Task.ID})
	}
	for _, a := range accepted {
		final := api.waitStatus(aliceToken, a.id, 60*time.Second, "FAILED", "SUCCESS", "PARTIAL_SUCCESS", "RETRY_WAIT")
		if final.Status != "FAILED" || final.Error == nil || final.Error.Code != a.code || !strings.Contains(final.Error.Message, a.says) ||
			final.Retry != 0 || len(final.Attempts) != 1 {
			t.Errorf("%s: ended %s %+v after %d attempts (retries %d); want FAILED %s saying %q, no retry",
				a.name, final.Status, final.Error, len(final.Attempts), final.Retry, a.code, a.says)
		}
	}
	final := api.waitStatus(aliceToken, normalTask.ID, 60*time.Second, "SUCCESS", "FAILED", "PARTIAL_SUCCESS")
	if final.Status != "SUCCESS" || final.Counts.Success != 40 {
		t.Errorf("the normal import beside them: %s with %d imported, want SUCCESS with 40", final.Status, final.Counts.Success)
	}
	took := time.Since(began)

	close(stopHealth)
	<-healthDone
	maxRSS, samples := mem.finish()
	hwm, err := procStatus(pid, "VmHWM")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d hostile files in %s: peak RSS (VmHWM) %d MB, largest sampled VmRSS %d MB over %d samples; /healthz slowest %s, %d failures",
		len(cases), took.Round(time.Millisecond), hwm>>10, maxRSS>>10, samples, time.Duration(slowest.Load()).Round(time.Millisecond), healthFailures.Load())
	if peak := max(hwm, maxRSS); peak > 300<<10 {
		t.Errorf("peak RSS %d MB, over 300 MB", peak>>10)
	}
	if n := healthFailures.Load(); n > 0 {
		t.Errorf("/healthz failed %d times", n)
	}
	if alerts := bin.logs.matching("ALERT"); len(alerts) > 0 {
		t.Errorf("hostile input raised alerts: %v", alerts)
	}
}
