package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// hostileValue is a string sent through every parameter.
type hostileValue struct {
	name  string
	value string
	// odd: a value Postgres can hold; it must reach the store as data and get a normal
	// answer. Otherwise the API must refuse it with a 4xx problem naming the parameter.
	odd bool
}

func hostileValues() []hostileValue {
	return []hostileValue{
		{"NUL", "a\x00b", false},
		{"invalid UTF-8", "a\xff\xfeb", false},
		{"huge", strings.Repeat("x", 100_000), false},
		{"single quote", "o'brien", true},
		{"double quote", `say "hi"`, true},
		{"question mark", "?", true},
		{"placeholder", "$1", true},
		{"cast", "a::text", true},
		{"backslash", `C:\path\`, true},
		{"injection", "' OR 1=1 --", true},
		{"like wildcards", "%_%", true},
		{"semicolon", "x; DROP TABLE tasks", true},
		{"bun placeholder", "?0 ?TableName", true},
	}
}

// assertRefused checks a 4xx problem that names field.
func assertRefused(t *testing.T, rec *httptest.ResponseRecorder, field string) {
	t.Helper()
	if rec.Code >= 500 || rec.Code < 400 {
		t.Fatalf("%d %.300s, want a 4xx naming %s", rec.Code, rec.Body, field)
	}
	p := problemOf(t, rec)
	for _, f := range p.Errors {
		if f.Field == field || strings.HasPrefix(f.Field, field+"[") {
			return
		}
	}
	t.Fatalf("%d %+v does not name %s", rec.Code, p, field)
}

func assertNo5xx(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	if rec.Code >= 500 {
		t.Fatalf("%d %.300s", rec.Code, rec.Body)
	}
}

// Every query parameter, filter field, header and {id}, sent every hostile value: nothing
// answers 5xx; what Postgres cannot hold is refused naming the parameter; quotes, ?, $1,
// :: and backslashes are data and get the normal answer.
func TestHostileValuesNeverAnswer500(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	done := e.finishedExport(nil) // so lists have a row to (not) match

	t.Run("list query parameters", func(t *testing.T) {
		for _, param := range []string{"q", "status", "type", "owner", "created_from", "created_to", "sort", "limit", "cursor", "unknown"} {
			for _, v := range hostileValues() {
				t.Run(param+"/"+v.name, func(t *testing.T) {
					rec := e.call("GET", "/api/v1/tasks?"+param+"="+url.QueryEscape(v.value), adminToken, nil)
					switch {
					case !v.odd:
						assertRefused(t, rec, param)
					case param == "unknown":
						if rec.Code != http.StatusOK {
							t.Fatalf("%d %.300s, want the list", rec.Code, rec.Body)
						}
					case param == "type" || param == "owner" || param == "q": // "%_%" too: wildcards are text
						var list ListView
						if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &list) != nil || len(list.Items) != 0 {
							t.Fatalf("%d %.300s, want an empty list", rec.Code, rec.Body)
						}
					default: // an enum, a time, a number, a cursor: refused as such
						assertRefused(t, rec, param)
					}
				})
			}
		}
	})

	t.Run("task id of every route", func(t *testing.T) {
		routes := []struct{ method, suffix string }{
			{"GET", ""}, {"POST", "/cancel"}, {"POST", "/retry"}, {"GET", "/result"}, {"GET", "/error-report"},
		}
		for _, rt := range routes {
			for _, v := range hostileValues() {
				t.Run(rt.method+rt.suffix+"/"+v.name, func(t *testing.T) {
					rec := e.call(rt.method, "/api/v1/tasks/"+url.PathEscape(v.value)+rt.suffix, aliceToken, nil)
					if !v.odd {
						assertRefused(t, rec, "id")
						return
					}
					if p := problemOf(t, rec); rec.Code != http.StatusNotFound || p.Code != "task_not_found" {
						t.Fatalf("%d %+v, want 404 task_not_found", rec.Code, p)
					}
				})
			}
		}
	})

	t.Run("bulk action ids", func(t *testing.T) {
		for _, action := range []string{"cancel", "retry"} {
			for _, v := range hostileValues() {
				t.Run(action+"/"+v.name, func(t *testing.T) {
					// Written by hand: json.Marshal would mend invalid UTF-8 before it is sent.
					body := `{"ids":["tsk_A","` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\x00", `\u0000`).Replace(v.value) + `"]}`
					rec := e.call("POST", "/api/v1/tasks/"+action, aliceToken, strings.NewReader(body))
					// A JSON body's invalid UTF-8 is read as U+FFFD (as in every JSON body): an id
					// no task has.
					mended := v.name == "invalid UTF-8"
					if !v.odd && !mended {
						assertRefused(t, rec, "ids[1]")
						return
					}
					var out BulkView
					if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &out) != nil || len(out.Results) != 2 ||
						(out.Results[1].ID != v.value && !mended) || out.Results[1].Outcome != BulkNotFound {
						t.Fatalf("%d %.300s, want not_found for it", rec.Code, rec.Body)
					}
				})
			}
		}
	})

	t.Run("export filter fields", func(t *testing.T) {
		fields := []struct {
			typ, field string
			list       bool
			oddStatus  int // the answer to an odd value
		}{
			{"customers", "city", false, http.StatusAccepted},
			{"customers", "level", false, http.StatusUnprocessableEntity},
			{"customers", "code_prefix", false, http.StatusAccepted},
			{"tasks", "status", true, http.StatusUnprocessableEntity},
			{"tasks", "type", true, http.StatusAccepted},
			{"tasks", "owner", false, http.StatusAccepted},
			{"tasks", "created_from", false, http.StatusBadRequest}, // not a time
			{"tasks", "created_to", false, http.StatusBadRequest},
		}
		for _, f := range fields {
			for _, v := range hostileValues() {
				t.Run(f.typ+"."+f.field+"/"+v.name, func(t *testing.T) {
					var fv any = v.value
					if f.list {
						fv = []string{v.value}
					}
					// Raw bytes, so invalid UTF-8 arrives as sent.
					filter, _ := json.Marshal(map[string]any{f.field: fv})
					if v.name == "invalid UTF-8" {
						filter = []byte(strings.Replace(string(filter), `\ufffd\ufffd`, "\xff\xfe", 1))
					}
					body := `{"type":"` + f.typ + `","filter":` + string(filter) + `}`
					rec := e.call("POST", "/api/v1/exports", adminToken, strings.NewReader(body))
					switch {
					case v.name == "invalid UTF-8":
						// encoding/json reads invalid bytes as U+FFFD: the value is then fine.
						assertNo5xx(t, rec)
					case !v.odd:
						assertRefused(t, rec, "filter."+f.field)
					case rec.Code != f.oddStatus:
						t.Fatalf("%d %.300s, want %d", rec.Code, rec.Body, f.oddStatus)
					case rec.Code == http.StatusAccepted:
						var sub SubmitView
						json.Unmarshal(rec.Body.Bytes(), &sub) //nolint:errcheck
						if !strings.Contains(string(sub.Task.Params), mustJSON(v.value)) {
							t.Fatalf("params %s do not keep %q", sub.Task.Params, v.value)
						}
					}
				})
			}
		}
	})

	t.Run("headers", func(t *testing.T) {
		for _, v := range hostileValues() {
			t.Run("Idempotency-Key/"+v.name, func(t *testing.T) {
				body := `{"type":"customers","filter":{"city":"` + strings.ReplaceAll(v.name, " ", "-") + `"}}`
				send := func() *httptest.ResponseRecorder {
					return e.call("POST", "/api/v1/exports", aliceToken, strings.NewReader(body), "Idempotency-Key", v.value)
				}
				rec := send()
				if !v.odd {
					assertRefused(t, rec, "Idempotency-Key")
					return
				}
				if rec.Code != http.StatusAccepted {
					t.Fatalf("%d %.300s", rec.Code, rec.Body)
				}
				if again := send(); again.Code != http.StatusOK || !strings.Contains(again.Body.String(), `"duplicate":true`) {
					t.Fatalf("the same key again: %d %.300s", again.Code, again.Body)
				}
			})
			t.Run("Idempotency-Key on POST /api/v1/tasks/"+v.name, func(t *testing.T) {
				rec := e.call("POST", "/api/v1/tasks", aliceToken, strings.NewReader(`{"type":"bench:noop"}`), "Idempotency-Key", v.value)
				if !v.odd {
					assertRefused(t, rec, "Idempotency-Key")
					return
				}
				if rec.Code != http.StatusAccepted {
					t.Fatalf("%d %.300s", rec.Code, rec.Body)
				}
			})
			t.Run("X-Request-ID/"+v.name, func(t *testing.T) {
				rec := e.call("GET", "/api/v1/tasks/"+done.TaskNo, aliceToken, nil, "X-Request-ID", v.value)
				if rec.Code != http.StatusOK || !validRequestID.MatchString(rec.Header().Get("X-Request-ID")) {
					t.Fatalf("%d X-Request-ID %q", rec.Code, rec.Header().Get("X-Request-ID"))
				}
			})
		}
	})

	t.Run("generic task params and type", func(t *testing.T) {
		for _, v := range hostileValues() {
			t.Run("params/"+v.name, func(t *testing.T) {
				body := `{"type":"bench:noop","params":{"note":` + mustJSON(v.value) + `}}`
				if v.name == "invalid UTF-8" {
					body = `{"type":"bench:noop","params":{"note":"a` + "\xff\xfe" + `b"}}`
				}
				rec := e.call("POST", "/api/v1/tasks", aliceToken, strings.NewReader(body))
				switch {
				case v.name == "NUL":
					assertRefused(t, rec, "params.note")
				case v.name == "invalid UTF-8":
					if rec.Code != http.StatusAccepted || !strings.Contains(rec.Body.String(), "a\uFFFD\uFFFDb") {
						t.Fatalf("%d %.300s, want the bytes stored as U+FFFD", rec.Code, rec.Body)
					}
				default:
					if rec.Code != http.StatusAccepted {
						t.Fatalf("%d %.300s", rec.Code, rec.Body)
					}
				}
			})
			t.Run("type/"+v.name, func(t *testing.T) {
				rec := e.call("POST", "/api/v1/tasks", aliceToken, strings.NewReader(`{"type":`+mustJSON(v.value)+`}`))
				assertNo5xx(t, rec)
				if rec.Code != http.StatusUnprocessableEntity && rec.Code != http.StatusBadRequest {
					t.Fatalf("%d %.300s", rec.Code, rec.Body)
				}
				if len(rec.Body.String()) > 2000 {
					t.Fatalf("the problem quotes the whole value back: %d bytes", rec.Body.Len())
				}
			})
		}
	})

	t.Run("import form fields", func(t *testing.T) {
		csv := []byte("code,name,phone\nC1,A,13800000001\n")
		for _, v := range hostileValues() {
			for _, field := range []string{"mode", "sheet"} {
				t.Run(field+"/"+v.name, func(t *testing.T) {
					value := v.value
					if len(value) > 200 {
						value = value[:200] // the form caps fields at 256 bytes
					}
					body, ct := multipartBody(t, "c.csv", csv, map[string]string{field: value})
					rec := e.call("POST", "/api/v1/imports", aliceToken, body, "Content-Type", ct)
					assertNo5xx(t, rec)
					if rec.Code < 400 && !(field == "sheet" && v.odd) {
						t.Fatalf("%d %.300s, want a refusal", rec.Code, rec.Body)
					}
				})
			}
			t.Run("filename/"+v.name, func(t *testing.T) {
				name := v.value
				if len(name) > 300 {
					name = name[:300]
				}
				body, ct := multipartBody(t, name+".csv", append(csv, []byte(v.name)...), nil)
				rec := e.call("POST", "/api/v1/imports", aliceToken, body, "Content-Type", ct)
				assertNo5xx(t, rec)
			})
		}
	})

	// Nothing above reached Postgres as an error.
	if strings.Contains(e.logs.String(), `"level":"ERROR"`) {
		t.Fatalf("the API logged errors:\n%s", e.logs.String())
	}
	var n int
	if err := e.pg.DB.NewRaw("SELECT count(*) FROM tasks WHERE params::text LIKE '%?%'").Scan(context.Background(), &n); err != nil || n == 0 {
		t.Fatalf("no task kept a '?' in its params (%d, %v)", n, err)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprint(err))
	}
	return string(b)
}

// The inputs an adversarial round found answering 500, one by one.
func TestReportedInputsAnswerProblemsNamingTheParameter(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	cursor := func(raw string) string { return base64.RawURLEncoding.EncodeToString([]byte(raw)) }
	cases := []struct {
		name, method, target, body, field string
		headers                           []string
	}{
		{"year 0 created_to", "GET", "/api/v1/tasks?created_to=0000-01-01T00:00:00Z", "", "created_to", nil},
		{"year 0 created_from", "GET", "/api/v1/tasks?created_from=0000-01-01T00:00:00Z", "", "created_from", nil},
		{"cursor of -2^63", "GET", "/api/v1/tasks?cursor=" + cursor("-9223372036854775808:1"), "", "cursor", nil},
		{"cursor id -2^63", "GET", "/api/v1/tasks?cursor=" + cursor("1700000000000000:-9223372036854775808"), "", "cursor", nil},
		{"cursor past year 9999", "GET", "/api/v1/tasks?cursor=" + cursor("9223372036854775807:1"), "", "cursor", nil},
		{"cursor with a plus sign", "GET", "/api/v1/tasks?cursor=" + cursor("+1700000000000000:1"), "", "cursor", nil},
		{"NUL in type", "GET", "/api/v1/tasks?type=%00", "", "type", nil},
		{"NUL in owner", "GET", "/api/v1/tasks?owner=a%00", "", "owner", nil},
		{"NUL in the id", "GET", "/api/v1/tasks/tsk_%00", "", "id", nil},
		{"NUL in the webhooks' owner", "GET", "/api/v1/webhooks?owner=a%00", "", "owner", nil},
		{"NUL in the tokens' owner", "GET", "/api/v1/tokens?owner=a%00", "", "owner", nil},
		{"year 0 in the audit", "GET", "/api/v1/audit?from=0000-01-01T00:00:00Zx", "", "from", nil},
		{"audit cursor of -2^63", "GET", "/api/v1/audit?cursor=-9223372036854775808", "", "cursor", nil},
		{"NUL in a filter", "POST", "/api/v1/exports", `{"type":"tasks","filter":{"type":["\u0000"]}}`, "filter.type", nil},
		{"year 0 in an export filter", "POST", "/api/v1/exports", `{"type":"tasks","filter":{"created_from":"0000-01-01T00:00:00Z"}}`, "filter.created_from", nil},
		{"invalid UTF-8 Idempotency-Key", "POST", "/api/v1/exports", `{"type":"customers"}`, "Idempotency-Key", []string{"Idempotency-Key", "k\xff"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var body io.Reader
			if c.body != "" {
				body = strings.NewReader(c.body)
			}
			assertRefused(t, e.call(c.method, c.target, adminToken, body, c.headers...), c.field)
		})
	}
	// A real cursor still works, and pages through.
	for range 3 {
		e.finishedExport(nil)
	}
	rec := e.call("GET", "/api/v1/tasks?limit=2", aliceToken, nil)
	var page ListView
	json.Unmarshal(rec.Body.Bytes(), &page) //nolint:errcheck
	if len(page.Items) != 2 || page.NextCursor == "" {
		t.Fatalf("first page: %d %s", rec.Code, rec.Body)
	}
	rec = e.call("GET", "/api/v1/tasks?limit=2&cursor="+page.NextCursor, aliceToken, nil)
	json.Unmarshal(rec.Body.Bytes(), &page) //nolint:errcheck
	if rec.Code != http.StatusOK || len(page.Items) != 1 {
		t.Fatalf("second page: %d %s", rec.Code, rec.Body)
	}
}
