package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
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

	"github.com/taskcenter/taskcenter/internal/sheet/sheettest"
)

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

	gigaCell := []sheettest.Piece{sheettest.Text(`<row r="2"><c r="A2" t="inlineStr"><is><t>`), sheettest.Repeat("A", 1000<<20), sheettest.Text(`</t></is></c></row>`)}
	// Declares two rows, holds 1.1 million.
	lying := []sheettest.Piece{sheettest.Text(`<worksheet><dimension ref="A1:C2"/><sheetData>` + hostileHeader),
		{B: []byte(strings.Repeat(`<row><c><v>1</v></c></row>`, 1000)), Times: 1100}, sheettest.Text(`</sheetData></worksheet>`)}
	wrap := sheettest.BookParts([]sheettest.Piece{sheettest.Text(`<worksheet><sheetData>` + hostileHeader), sheettest.Repeat(" ", 64<<20), sheettest.Text(`</sheetData></worksheet>`)}, nil)
	wrap[3].Declare = 1 << 63
	wrap = append(wrap, sheettest.Part{Name: "xl/media/padding.bin", Pieces: []sheettest.Piece{sheettest.Text("x")}, Declare: 1 << 63})
	manyParts := sheettest.BookParts([]sheettest.Piece{sheettest.Text(`<worksheet><sheetData>` + hostileHeader + `</sheetData></worksheet>`)}, nil)
	for i := range 10_001 {
		manyParts = append(manyParts, sheettest.Part{Name: fmt.Sprintf("xl/media/%d", i), Pieces: []sheettest.Piece{sheettest.Text("x")}})
	}

	type hostile struct {
		name    string
		file    string
		content func() io.Reader
		status  int    // at submit: 202, or the refusal
		code    string // the refusal's or the failure's code
		says    string
	}
	book := func(parts []sheettest.Part) func() io.Reader {
		b := sheettest.Zip(t, parts...)
		return func() io.Reader { return bytes.NewReader(b) }
	}
	cases := []hostile{
		{"a 1,000 MiB cell that deflates to 1 MB", "cell.xlsx",
			book(sheettest.BookParts(append([]sheettest.Piece{sheettest.Text(`<worksheet><sheetData>` + hostileHeader)}, append(gigaCell, sheettest.Text(`</sheetData></worksheet>`))...), nil)),
			422, "row_too_large", "row 2 holds more than 8 MB"},
		{"the same cell under a plausible dimension", "cell-declared.xlsx",
			book(sheettest.BookParts(append([]sheettest.Piece{sheettest.Text(`<worksheet><dimension ref="A1:C100000"/><sheetData>` + hostileHeader)}, append(gigaCell, sheettest.Text(`</sheetData></worksheet>`))...), nil)),
			202, "row_too_large", "row 2 holds more than 8 MB"},
		{"a 1,000 MiB shared string", "sst.xlsx",
			book(sheettest.BookParts([]sheettest.Piece{sheettest.Text(`<worksheet><dimension ref="A1:C2"/><sheetData>` + hostileHeader + `<row r="2"><c t="s"><v>0</v></c></row></sheetData></worksheet>`)},
				[]sheettest.Piece{sheettest.Text(`<sst><si><t>`), sheettest.Repeat("A", 1000<<20), sheettest.Text(`</t></si></sst>`)})),
			202, "row_too_large", "shared string 0 of the workbook holds more than 8 MB"},
		{"ZIP64 sizes that wrap around", "wrap.xlsx", book(wrap), 413, "too_large_uncompressed", "claim to expand to more than any disk holds"},
		{"10,001 parts", "parts.xlsx", book(manyParts), 422, "damaged_file", "more than 10,000 parts"},
		// Submit counts the first rows only and accepts it; the worker counts every row
		// before its first batch.
		{"a dimension that hides 1.1 million rows", "lying.xlsx", book(sheettest.BookParts(lying, nil)), 202, "too_many_rows", "has 1,100,000 rows, over the limit of 1,000,000"},
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
