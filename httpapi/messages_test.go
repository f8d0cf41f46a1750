package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/taskcenter/taskcenter/internal/msg"
)

// What the API says to a person comes as a catalogue message beside its English: a log
// line's code and params, an import's first rejected rows read back into messages, and a
// refusal's params, each rendering to the English the API sends with it.
func TestTheAPISendsMessagesAsCodeAndParams(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	ctx := context.Background()
	imp := e.finishedImport(nil)
	if _, err := e.pg.DB.ExecContext(ctx, `UPDATE tasks SET result = result || ?::jsonb WHERE id = ?`,
		`{"first_errors": ["row 3, phone: must be 11 digits starting with 1; email: is not a valid email address", "row 4, code: C1 already exists"]}`,
		imp.ID); err != nil {
		t.Fatal(err)
	}
	if rec := e.call("POST", "/api/v1/tasks/"+imp.TaskNo+"/cancel", aliceToken, nil); rec.Code != http.StatusConflict {
		t.Fatalf("cancel a finished task: %d %s", rec.Code, rec.Body)
	} else {
		var p struct {
			Code, Detail string
			Params       msg.Params
		}
		json.Unmarshal(rec.Body.Bytes(), &p) //nolint:errcheck // checked below
		if p.Code != "status_conflict" || p.Params["status"] != "PARTIAL_SUCCESS" || p.Params["op"] != "cancel" ||
			msg.Render(msg.ZH, "problem."+p.Code, p.Params) != "任务当前状态（部分成功）已不允许取消。" {
			t.Fatalf("refusal %+v", p)
		}
	}
	rec := e.call("GET", "/api/v1/tasks/"+imp.TaskNo+"/result", aliceToken, nil)
	var p struct {
		Code, Detail string
		Params       msg.Params
	}
	if json.Unmarshal(rec.Body.Bytes(), &p) != nil || p.Code != "no_result" || p.Params["status"] != "PARTIAL_SUCCESS" ||
		msg.Render(msg.EN, "problem."+p.Code, p.Params) != p.Detail {
		t.Fatalf("result of an import: %d %s", rec.Code, rec.Body)
	}

	rec = e.call("GET", "/api/v1/tasks/"+imp.TaskNo, aliceToken, nil)
	var d DetailView
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &d) != nil {
		t.Fatalf("detail: %d %s", rec.Code, rec.Body)
	}
	fem := d.Result.FirstErrorMessages
	if len(fem) != 2 || fem[0].Row != 3 || len(fem[0].Parts) != 2 || fem[0].Parts[0].Field != "phone" || fem[0].Parts[0].Code != "row.phone" ||
		fem[0].Parts[1].Code != "row.email" || fem[1].Parts[0].Code != "row.exists" || fem[1].Parts[0].Params["value"] != "C1" {
		t.Fatalf("first error messages %+v", fem)
	}
	// A cancelled export's log says who cancelled it.
	sub := e.callJSON("POST", "/api/v1/exports", aliceToken, map[string]any{"type": "customers"})
	var submitted SubmitView
	if sub.Code != http.StatusAccepted || json.Unmarshal(sub.Body.Bytes(), &submitted) != nil {
		t.Fatalf("export: %d %s", sub.Code, sub.Body)
	}
	if rec := e.call("POST", "/api/v1/tasks/"+submitted.Task.ID+"/cancel", aliceToken, nil); rec.Code != http.StatusOK {
		t.Fatalf("cancel: %d %s", rec.Code, rec.Body)
	}
	rec = e.call("GET", "/api/v1/tasks/"+submitted.Task.ID+"/logs", aliceToken, nil)
	var logs LogPageView
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &logs) != nil {
		t.Fatalf("logs: %d %s", rec.Code, rec.Body)
	}
	coded := 0
	for _, l := range logs.Items {
		if l.Code == "log.cancelled_by" && l.Params["who"] == "alice" && msg.Render(msg.ZH, l.Code, l.Params) == "alice 已取消" {
			coded++
		}
		if got := msg.Render(msg.EN, l.Code, l.Params); got != l.Message {
			t.Errorf("log line %q: its message %s %v reads %q", l.Message, l.Code, l.Params, got)
		}
	}
	if coded == 0 {
		t.Fatalf("no cancelled-by line with its code among %+v", logs.Items)
	}
}

// The catalogue is served in the language asked for (?lang=, else Accept-Language), so a
// client says the API's {code, params} in its reader's language.
func TestTheMessageCatalogueIsServedPerLanguage(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	for _, tc := range []struct {
		query, acceptLanguage, lang, imported string
	}{
		{"?lang=zh", "", "zh", "已导入 {total} 行中的 {success} 行；{failed} 行失败"},
		{"", "zh-CN,zh;q=0.9,en;q=0.8", "zh", "已导入 {total} 行中的 {success} 行；{failed} 行失败"},
		{"", "", "en", "imported {success} of {total} rows; {failed} failed"},
		{"?lang=en", "zh-CN", "en", "imported {success} of {total} rows; {failed} failed"},
	} {
		var headers []string
		if tc.acceptLanguage != "" {
			headers = []string{"Accept-Language", tc.acceptLanguage}
		}
		rec := e.call("GET", "/api/v1/messages"+tc.query, aliceToken, nil, headers...)
		var v MessagesView
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &v) != nil {
			t.Fatalf("messages%s: %d %s", tc.query, rec.Code, rec.Body)
		}
		if v.Lang != tc.lang || v.Messages["log.imported"] != tc.imported || len(v.Messages) != len(msg.Codes()) ||
			rec.Header().Get("Content-Language") != tc.lang {
			t.Fatalf("messages%s (Accept-Language %q): lang %q, log.imported %q, %d messages", tc.query, tc.acceptLanguage,
				v.Lang, v.Messages["log.imported"], len(v.Messages))
		}
	}
}
