package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/taskcenter/taskcenter/httpapi/identity"
	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/httpapi/request"
	"github.com/taskcenter/taskcenter/jobs/export"
	"github.com/taskcenter/taskcenter/store"
)

// The fuzzers run their seed corpus (below and under testdata/fuzz) in every `go test`;
// `make fuzz` runs each for minutes (see the Makefile target).

// storeAccepts reports whether Postgres takes s as a text parameter.
func storeAccepts(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// jsonbAccepts reports whether Postgres takes doc as jsonb: valid JSON in UTF-8 without
// \u0000 or a lone surrogate escape.
func jsonbAccepts(doc []byte) bool {
	if !json.Valid(doc) || !utf8.Valid(doc) {
		return false
	}
	// jsonb refuses the escapes \u0000 and lone surrogates (\ud800-\udfff). Read the escapes
	// as escapes: "\\ud8" is a backslash and the letters ud8, which jsonb takes.
	for i := 0; i < len(doc); i++ {
		if doc[i] != '\\' {
			continue
		}
		i++
		if doc[i] != 'u' {
			continue
		}
		code, err := strconv.ParseUint(string(doc[i+1:i+5]), 16, 16)
		if err != nil || code == 0 || code >= 0xd800 && code <= 0xdfff {
			return false
		}
		i += 4
	}
	return true
}

func mustBeProblem(t *testing.T, err error, what string) {
	t.Helper()
	var p *problem.Problem
	if !errors.As(err, &p) {
		var ferr *export.FilterError
		if errors.As(err, &ferr) {
			p = toProblem(err)
		} else {
			t.Fatalf("%s: %T %v is not a problem", what, err, err)
		}
	}
	if p.Status < 400 || p.Status >= 500 {
		t.Fatalf("%s: status %d for %v", what, p.Status, err)
	}
}

// FuzzExportRequest decodes an export request body and validates both filter types:
// nothing panics, every refusal is a 4xx problem, and whatever is accepted is something
// Postgres takes (text without NUL, times in range, params jsonb can store).
func FuzzExportRequest(f *testing.F) {
	for _, seed := range []string{
		`{"type":"customers"}`,
		`{"type":"customers","filter":{"city":"Shanghai","level":"gold","code_prefix":"C00"}}`,
		`{"type":"tasks","filter":{"status":["FAILED","TIMEOUT"],"type":["export:tasks"],"owner":"alice"}}`,
		`{"type":"tasks","filter":{"created_from":"2026-01-01T00:00:00Z","created_to":"2026-02-01T00:00:00+08:00"}}`,
		`{"type":"tasks","filter":{"created_from":"0000-01-01T00:00:00Z"}}`,
		`{"type":"tasks","filter":{"created_to":"9999-12-31T23:59:59-23:59"}}`,
		`{"type":"customers","filter":{"city":"a\u0000b"}}`,
		`{"type":"customers","filter":{"city":"\ud800"}}`,
		`{"type":"customers","filter":{"city":"x","City":"y"}}`,
		`{"type":"customers"} {"type":"tasks"}`,
		`{"type":"tasks","filter":{"status":[` + strings.Repeat(`"FAILED",`, 25) + `"FAILED"]}}`,
		`{"type":"customers","filter":{"code_prefix":"%_\\"}}`,
		`{"type":"customers","filter":{"city":"?","level":"$1","code_prefix":"::"}}`,
		`{"type":"customers","filter":{"city":"` + "\u202e" + `"}}`,
		`[{"type":"customers"}]`,
		`{"type":1e999}`,
		`{"filter":null,"type":"tasks"}`,
		"{\"type\":\"customers\",\"filter\":{\"city\":\"\xff\"}}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest("POST", "/api/v1/exports", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		var req exportRequest
		if err := request.DecodeJSON(r, &req); err != nil {
			mustBeProblem(t, err, "decodeJSON")
			return
		}
		if cf, err := request.DecodeFilter[export.CustomerFilter](req.Filter); err != nil {
			mustBeProblem(t, err, "customer filter")
		} else {
			for _, s := range []string{cf.City, cf.Level, cf.CodePrefix} {
				if !storeAccepts(s) || utf8.RuneCountInString(s) > export.MaxFilterText {
					t.Fatalf("customer filter %+v accepted with %q", cf, s)
				}
			}
			params, err := json.Marshal(export.CustomerParams{Filter: cf})
			if err != nil || !jsonbAccepts(params) {
				t.Fatalf("customer params %s (%v) would not store", params, err)
			}
		}
		if tf, err := request.DecodeFilter[export.TaskFilter](req.Filter); err != nil {
			mustBeProblem(t, err, "task filter")
		} else {
			for _, s := range append(slicesOf(tf), tf.Owner) {
				if !storeAccepts(s) {
					t.Fatalf("task filter %+v accepted with %q", tf, s)
				}
			}
			for _, tm := range []*time.Time{tf.CreatedFrom, tf.CreatedTo} {
				if tm != nil && !export.TimeInRange(*tm) {
					t.Fatalf("task filter accepted time %v", tm)
				}
			}
			if len(tf.Statuses) > export.MaxFilterItems || len(tf.Types) > export.MaxFilterItems {
				t.Fatalf("task filter accepted %d statuses, %d types", len(tf.Statuses), len(tf.Types))
			}
			params, err := json.Marshal(export.TaskParams{Filter: tf})
			if err != nil || !jsonbAccepts(params) {
				t.Fatalf("task params %s (%v) would not store", params, err)
			}
		}
	})
}

func slicesOf(f export.TaskFilter) []string {
	out := append([]string(nil), f.Types...)
	for _, s := range f.Statuses {
		out = append(out, string(s))
	}
	return out
}

// FuzzTaskParams decodes a generic submit's body as POST /api/v1/tasks does: what is
// accepted re-encodes to JSON that jsonb stores.
func FuzzTaskParams(f *testing.F) {
	for _, seed := range []string{
		`{"type":"bench:noop"}`,
		`{"type":"bench:noop","params":{"rows":10,"sleep_ms":5}}`,
		`{"type":"bench:noop","params":{"note":"a\u0000"}}`,
		`{"type":"bench:noop","params":{"\u0000":1}}`,
		`{"type":"bench:noop","params":{"note":"\udc00\ud800"}}`,
		`{"type":"bench:noop","params":{"n":-1e308,"m":1e-400}}`,
		`{"type":"bench:noop","params":` + strings.Repeat("[", 33) + strings.Repeat("]", 33) + `}`,
		`{"type":"bench:noop","params":{"a":1,"A":2}}`,
		"{\"type\":\"bench:noop\",\"params\":{\"k\xff\":\"v\xfe\"}}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest("POST", "/api/v1/tasks", bytes.NewReader(body))
		var req struct {
			Type   string          `json:"type"`
			Params json.RawMessage `json:"params"`
		}
		if err := request.DecodeJSON(r, &req); err != nil {
			mustBeProblem(t, err, "decodeJSON")
			return
		}
		if len(req.Params) == 0 {
			return
		}
		out, err := request.NormalizeJSON(req.Params)
		if err != nil {
			mustBeProblem(t, err, "normalizeJSON")
			return
		}
		if !jsonbAccepts(out) {
			t.Fatalf("params %q normalized to %q, which jsonb refuses", req.Params, out)
		}
	})
}

// FuzzDecodeCursor: a cursor decodes only when it is exactly what encodeCursor writes, for
// a position the store takes (an id ≥ 1, a key the sort can have).
func FuzzDecodeCursor(f *testing.F) {
	for _, seed := range []string{
		encodeCursor(store.Cursor{Key: time.Date(2026, 11, 30, 8, 0, 0, 123456000, time.UTC).UnixMicro(), ID: 42}),
		encodeCursor(store.Cursor{Key: 0, ID: 1}),
		encodeCursor(store.Cursor{Sort: store.SortLongest, Key: -1, ID: 7}),
		encodeCursor(store.Cursor{Sort: store.SortShortest, Key: math.MaxInt64, ID: math.MaxInt64}),
		encodeCursor(store.Cursor{Sort: store.SortFewestFailed, Key: 12, ID: 3}),
		encodeCursor(store.Cursor{Sort: store.SortOldest, Key: 1764489600123456, ID: 3}),
		"LTkyMjMzNzIwMzY4NTQ3NzU4MDg6MQ",      // -2^63:1
		"OTIyMzM3MjAzNjg1NDc3NTgwNzox",        // 2^63-1:1
		"KzE3MDAwMDAwMDAwMDAwMDA6MQ",          // +1700000000000000:1
		"MTcwMDAwMDAwMDAwMDAwMDotMQ",          // id -1
		"MTcwMDAwMDAwMDAwMDAwMDowMQ",          // id 01
		"Y3JlYXRlZDoxNzAwMDAwMDAwMDAwMDAwOjE", // created:1700000000000000:1 (the default sort is written without its name)
		"ZmFpbGVkOi0xOjE",                     // failed:-1:1
		"ZHVyYXRpb246LTI6MQ",                  // duration:-2:1
		"c2l6ZToxOjE",                         // size:1:1
		"bm90LWEtY3Vyc29y",
		"",
		"====",
		"MTcwMDAwMDAwMDAwMDAwMDox\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := decodeCursor(s)
		if err != nil {
			return
		}
		if c.ID < 1 || !c.Sort.Valid() || c.Sort == "" || !keyInRange(c.Sort, c.Key) {
			t.Fatalf("decodeCursor(%q) = %+v: the store would reject it", s, c)
		}
		if again := encodeCursor(*c); again != s {
			t.Fatalf("decodeCursor(%q) = %+v, which encodes to %q", s, c, again)
		}
	})
}

// FuzzCursorRoundTrip: every position of a real task survives encode and decode, in every
// sort.
func FuzzCursorRoundTrip(f *testing.F) {
	f.Add(uint8(0), int64(1764489600123456), int64(1))
	f.Add(uint8(1), int64(0), int64(1<<62))
	f.Add(uint8(2), int64(-1), int64(5))
	f.Add(uint8(3), int64(math.MaxInt64), int64(9))
	f.Add(uint8(4), int64(253402300799999999), int64(9))
	f.Add(uint8(5), int64(-3), int64(9))
	f.Fuzz(func(t *testing.T, which uint8, key, id int64) {
		sorts := store.Sorts()
		sort := sorts[int(which)%len(sorts)]
		c := store.Cursor{Sort: sort, Key: key, ID: id}
		got, err := decodeCursor(encodeCursor(c))
		valid := id >= 1 && keyInRange(sort, key)
		switch {
		case valid && err != nil:
			t.Fatalf("cursor %+v does not survive a round trip: %v", c, err)
		case !valid && err == nil:
			t.Fatalf("cursor %+v of no real task decodes", c)
		case valid && *got != c:
			t.Fatalf("round trip of %+v gives %+v", c, got)
		}
	})
}

// FuzzListQuery: a list query is refused with a 4xx problem, or gives a filter whose
// every value the store takes.
func FuzzListQuery(f *testing.F) {
	for _, seed := range []string{
		"status=FAILED,timeout&type=export:tasks&limit=10",
		"created_to=0000-01-01T00:00:00Z",
		"created_from=2026-01-01T00:00:00Z&created_to=2025-01-01T00:00:00Z",
		"type=%00&owner=%FF",
		"cursor=LTkyMjMzNzIwMzY4NTQ3NzU4MDg6MQ",
		"limit=-1&limit=999999999999999999999",
		"a=%zz;b=1",
		"type=" + strings.Repeat("t,", 30),
		"owner=bob",
		"q=100%25_done&sort=-duration",
		"q=%00&sort=size",
		"sort=failed&cursor=ZHVyYXRpb246LTE6MQ",
		"q=" + strings.Repeat("x", 201),
	} {
		f.Add(seed, true)
		f.Add(seed, false)
	}
	f.Fuzz(func(t *testing.T, rawQuery string, admin bool) {
		p := identity.Principal{User: "alice", Role: "user"}
		if admin {
			p.Role = "admin"
		}
		lf, err := parseListQuery(rawQuery, p)
		if err != nil {
			mustBeProblem(t, err, "list query")
			return
		}
		for _, s := range append(append([]string(nil), lf.Types...), lf.Owner) {
			if !storeAccepts(s) {
				t.Fatalf("query %q gives %q", rawQuery, s)
			}
		}
		if !admin && lf.Owner != "" && lf.Owner != "alice" {
			t.Fatalf("query %q lets a user list %q's tasks", rawQuery, lf.Owner)
		}
		for _, st := range lf.Statuses {
			if !st.Valid() {
				t.Fatalf("query %q gives status %q", rawQuery, st)
			}
		}
		for _, tm := range []*time.Time{lf.CreatedFrom, lf.CreatedTo} {
			if tm != nil && !export.TimeInRange(*tm) {
				t.Fatalf("query %q gives time %v", rawQuery, tm)
			}
		}
		if lf.After != nil && (lf.After.ID < 1 || lf.After.Sort != lf.Sort || !keyInRange(lf.After.Sort, lf.After.Key)) {
			t.Fatalf("query %q gives cursor %+v for sort %q", rawQuery, lf.After, lf.Sort)
		}
		if !lf.Sort.Valid() || lf.Sort == "" {
			t.Fatalf("query %q gives sort %q", rawQuery, lf.Sort)
		}
		if !storeAccepts(lf.Search) || utf8.RuneCountInString(lf.Search) > export.MaxSearch {
			t.Fatalf("query %q gives search %q", rawQuery, lf.Search)
		}
		if lf.Limit < 0 || lf.Limit > 200 {
			t.Fatalf("query %q gives limit %d", rawQuery, lf.Limit)
		}
	})
}
