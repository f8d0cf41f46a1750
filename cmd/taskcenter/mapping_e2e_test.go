package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// memberCSV is a customer file whose headers the import does not know (会员号, 姓名, 联系电话)
// beside two it does (城市, 邮箱), in the order given, with a row per code.
func memberCSV(headers []string, codes ...string) []byte {
	var b strings.Builder
	b.WriteString(strings.Join(headers, ",") + "\n")
	for i, code := range codes {
		cells := map[string]string{"会员号": code, "姓名": "会员 " + code, "联系电话": "1380013800" + string(rune('0'+i)),
			"电话号码": "1380013800" + string(rune('0'+i)), "城市": "上海", "邮箱": strings.ToLower(code) + "@example.com"}
		row := make([]string, len(headers))
		for j, h := range headers {
			row[j] = cells[h]
		}
		b.WriteString(strings.Join(row, ",") + "\n")
	}
	return []byte(b.String())
}

var memberHeaders = []string{"会员号", "姓名", "联系电话", "城市", "邮箱"}

// memberColumns maps memberCSV's unknown headers.
var memberColumns = map[string]string{"会员号": "code", "姓名": "name", "联系电话": "phone"}

// headerProblemJSON is the details of a header the import cannot use.
type headerProblemJSON struct {
	HeaderRow      int      `json:"header_row"`
	Headers        []string `json:"headers"`
	UnknownHeaders []string `json:"unknown_headers"`
	MissingFields  []string `json:"missing_fields"`
	Fields         []struct {
		Name     string            `json:"name"`
		Labels   map[string]string `json:"labels"`
		Required bool              `json:"required"`
	} `json:"fields"`
}

// taskDetails reads a task's error.details.
func taskDetails(t *testing.T, p *proc, token, id string) (code string, d headerProblemJSON) {
	t.Helper()
	var v struct {
		Error *struct {
			Code    string            `json:"code"`
			Details headerProblemJSON `json:"details"`
		} `json:"error"`
	}
	p.do("GET", "/api/v1/tasks/"+id, token, nil).json(t, &v)
	if v.Error == nil {
		t.Fatalf("task %s has no error", id)
	}
	return v.Error.Code, v.Error.Details
}

func columnsField(t *testing.T, cols map[string]string) map[string]string {
	t.Helper()
	b, err := json.Marshal(cols)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"columns": string(b)}
}

// submitted reads a submit's answer: its status and task id.
func submitted(t *testing.T, res response) (int, string) {
	t.Helper()
	var out struct {
		Task struct {
			ID string `json:"id"`
		} `json:"task"`
	}
	if res.status == http.StatusAccepted || res.status == http.StatusOK {
		res.json(t, &out)
	}
	return res.status, out.Task.ID
}

func TestImportColumnMapping(t *testing.T) {
	t.Parallel()
	e, p := startEnv(t, nil, "all")

	// A file whose headers the import does not know fails, naming them and the fields
	// missing, with the fields a mapping form offers.
	first := p.submitImport(aliceToken, "members.csv", memberCSV(memberHeaders, "M1", "M2"), nil)
	failed := p.waitStatus(aliceToken, first.ID, 30*time.Second, "FAILED", "SUCCESS", "PARTIAL_SUCCESS")
	if failed.Status != "FAILED" || !strings.Contains(failed.Error.Message, `"会员号", "姓名", "联系电话"`) {
		t.Fatalf("unknown headers: %s %+v", failed.Status, failed.Error)
	}
	code, details := taskDetails(t, p, aliceToken, first.ID)
	if code != "missing_columns" || details.HeaderRow != 1 || !slices.Equal(details.Headers, memberHeaders) ||
		!slices.Equal(details.UnknownHeaders, []string{"会员号", "姓名", "联系电话"}) ||
		!slices.Equal(details.MissingFields, []string{"code", "name", "phone"}) || len(details.Fields) != 6 ||
		details.Fields[2].Name != "phone" || details.Fields[2].Labels["zh"] != "手机号" || !details.Fields[2].Required {
		t.Fatalf("error.details = %s %+v", code, details)
	}

	t.Run("a bad mapping is refused, naming what is wrong", func(t *testing.T) {
		for _, c := range []struct {
			name    string
			columns map[string]string
			code    string
			detail  string
		}{
			{"a field that does not exist", map[string]string{"会员号": "code", "姓名": "nme"}, "bad_columns", `"nme" is not a field`},
			{"a field twice", map[string]string{"会员号": "code", "姓名": "code"}, "bad_columns", "both"},
			{"a header not in the file", map[string]string{"会员编号": "code", "姓名": "name", "联系电话": "phone"}, "unknown_column", `"会员编号", which is not a header of the file`},
		} {
			res := p.upload(aliceToken, "members.csv", memberCSV(memberHeaders, "M1"), columnsField(t, c.columns))
			var prob struct {
				Code, Detail string
				Errors       []struct{ Field string }
			}
			res.json(t, &prob)
			if res.status != http.StatusUnprocessableEntity || prob.Code != c.code || !strings.Contains(prob.Detail, c.detail) ||
				len(prob.Errors) != 1 || prob.Errors[0].Field != "columns" {
				t.Errorf("%s: %d %s", c.name, res.status, res.body)
			}
		}
		// A mapping that leaves a required field open is refused at submit with the details.
		res := p.upload(aliceToken, "members.csv", memberCSV(memberHeaders, "M1"), columnsField(t, map[string]string{"会员号": "code", "姓名": "name"}))
		var prob struct {
			Code    string
			Details headerProblemJSON
		}
		res.json(t, &prob)
		if res.status != http.StatusUnprocessableEntity || prob.Code != "missing_columns" ||
			!slices.Equal(prob.Details.MissingFields, []string{"phone"}) || !slices.Equal(prob.Details.UnknownHeaders, []string{"联系电话"}) {
			t.Errorf("partial mapping: %d %s", res.status, res.body)
		}
	})

	// Re-submitted with a mapping, without uploading again: the rows are imported.
	res := p.do("POST", "/api/v1/imports", aliceToken, map[string]any{"from_task": first.ID, "columns": memberColumns})
	status, mappedID := submitted(t, res)
	if status != http.StatusAccepted || mappedID == first.ID {
		t.Fatalf("re-submit: %d %s", status, res.body)
	}
	mapped := p.waitStatus(aliceToken, mappedID, 30*time.Second, "SUCCESS", "FAILED", "PARTIAL_SUCCESS")
	if mapped.Status != "SUCCESS" || mapped.Counts.Success != 2 || e.count("SELECT count(*) FROM customers WHERE code IN ('M1', 'M2') AND phone LIKE '1380013800%' AND city = '上海'") != 2 {
		t.Fatalf("mapped import: %s %+v", mapped.Status, mapped.Counts)
	}
	var params struct {
		Params struct {
			Upload   string            `json:"upload"`
			Filename string            `json:"filename"`
			Columns  map[string]string `json:"columns"`
		} `json:"params"`
	}
	p.do("GET", "/api/v1/tasks/"+mappedID, aliceToken, nil).json(t, &params)
	if params.Params.Filename != "members.csv" || params.Params.Columns["联系电话"] != "phone" {
		t.Fatalf("re-submitted params: %+v", params.Params)
	}
	// The stored upload of the first task was read again: no second file.
	if n := e.count("SELECT count(*) FROM tasks WHERE task_no = ? AND params->>'upload' = ?", first.ID, params.Params.Upload); n != 1 {
		t.Fatalf("the re-submit read another upload than %s", params.Params.Upload)
	}
	if n := e.count("SELECT count(*) FROM uploads"); n != 1 {
		t.Fatalf("%d uploads recorded after one upload and a re-submit, want 1", n)
	}
	// The same re-submit again is the same task.
	if status, again := submitted(t, p.do("POST", "/api/v1/imports", aliceToken, map[string]any{"from_task": first.ID, "columns": memberColumns})); status != http.StatusOK || again != mappedID {
		t.Fatalf("the same re-submit: %d %s, want 200 %s", status, again, mappedID)
	}

	t.Run("the saved mapping is applied to the same header set, in any order", func(t *testing.T) {
		reordered := []string{"邮箱", "联系电话", "城市", "姓名", "会员号"}
		task := p.submitImport(aliceToken, "members-2.csv", memberCSV(reordered, "M3", "M4", "M5"), nil)
		final := p.waitStatus(aliceToken, task.ID, 30*time.Second, "SUCCESS", "FAILED", "PARTIAL_SUCCESS")
		if final.Status != "SUCCESS" || final.Counts.Success != 3 {
			t.Fatalf("same headers: %s %+v", final.Status, final.Error)
		}
		logs := p.do("GET", "/api/v1/tasks/"+task.ID+"/logs", aliceToken, nil)
		if !strings.Contains(string(logs.body), "applied your saved column mapping from ") {
			t.Fatalf("the log does not say the saved mapping was applied: %s", logs.body)
		}
	})
	t.Run("not to another header set", func(t *testing.T) {
		other := []string{"会员号", "姓名", "电话号码", "城市", "邮箱"}
		task := p.submitImport(aliceToken, "members-3.csv", memberCSV(other, "M6"), nil)
		if final := p.waitStatus(aliceToken, task.ID, 30*time.Second, "SUCCESS", "FAILED", "PARTIAL_SUCCESS"); final.Status != "FAILED" {
			t.Fatalf("another header set: %s", final.Status)
		}
	})
	t.Run("not to another owner", func(t *testing.T) {
		task := p.submitImport(bobToken, "members.csv", memberCSV(memberHeaders, "B1"), nil)
		if final := p.waitStatus(bobToken, task.ID, 30*time.Second, "SUCCESS", "FAILED", "PARTIAL_SUCCESS"); final.Status != "FAILED" {
			t.Fatalf("bob's import: %s", final.Status)
		}
	})
	t.Run("a mapping sent with an upload is applied", func(t *testing.T) {
		task := p.submitImport(bobToken, "members-b.csv", memberCSV(memberHeaders, "B2"), columnsField(t, memberColumns))
		if final := p.waitStatus(bobToken, task.ID, 30*time.Second, "SUCCESS", "FAILED", "PARTIAL_SUCCESS"); final.Status != "SUCCESS" ||
			e.count("SELECT count(*) FROM customers WHERE code = 'B2'") != 1 {
			t.Fatalf("upload with columns: %s %+v", final.Status, final.Error)
		}
	})
	t.Run("another user's task cannot be re-submitted", func(t *testing.T) {
		res := p.do("POST", "/api/v1/imports", bobToken, map[string]any{"from_task": first.ID, "columns": memberColumns})
		if res.status != http.StatusNotFound || !strings.Contains(string(res.body), "task_not_found") {
			t.Fatalf("bob re-submits alice's task: %d %s", res.status, res.body)
		}
	})
	t.Run("a swept upload answers 410", func(t *testing.T) {
		// What the upload sweeper does: the file and its record go.
		if err := os.Remove(filepath.Join(e.dataDir, filepath.FromSlash(params.Params.Upload))); err != nil {
			t.Fatal(err)
		}
		e.exec("DELETE FROM uploads WHERE path = ?", params.Params.Upload)
		res := p.do("POST", "/api/v1/imports", aliceToken, map[string]any{"from_task": first.ID, "columns": memberColumns, "mode": "insert"})
		if res.status != http.StatusGone || !strings.Contains(string(res.body), "upload_missing") || !strings.Contains(string(res.body), "upload the file again") {
			t.Fatalf("swept upload: %d %s", res.status, res.body)
		}
	})
}
