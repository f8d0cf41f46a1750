package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/taskcenter/taskcenter/internal/msg"
)

func TestTheLanguageComesFromTheEnvironmentUnlessTheFlagSays(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want msg.Lang
	}{
		{nil, msg.EN},
		{map[string]string{"LANG": "zh_CN.UTF-8"}, msg.ZH},
		{map[string]string{"LANG": "C.UTF-8"}, msg.EN},
		{map[string]string{"TC_LANG": "zh", "LANG": "en_US.UTF-8"}, msg.ZH},
		{map[string]string{"TC_LANG": "en", "LANG": "zh_CN.UTF-8"}, msg.EN},
		{map[string]string{"LC_ALL": "en_US.UTF-8", "LANG": "zh_CN.UTF-8"}, msg.EN},
		{map[string]string{"LC_MESSAGES": "zh_CN.UTF-8", "LANG": "en_US.UTF-8"}, msg.ZH},
	} {
		if got := langOf(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("with %v: %s, want %s", tc.env, got, tc.want)
		}
	}
	_, out, _ := runTCWith(t, nil, "help")
	for _, line := range []string{
		"tc — the taskcenter command line\n\nusage: tc [--url URL] [--token TOKEN] [--json] COMMAND [ARGS]\n\n",
		"  import FILE [--mode upsert|insert|replace] [--sheet S] [--column H=FIELD ...] [--dry-run] [--wait]\n" +
			strings.Repeat(" ", 60) + "import customers from .xlsx or .csv\n",
		"  export customers|tasks [--filter k=v ...] [--wait]        export to .xlsx (-o to download when done)\n",
		"Exit codes: 0 SUCCESS, 2 PARTIAL_SUCCESS, 1 FAILED, TIMEOUT or CANCELLED (or a failed\n",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("the English help lacks %q:\n%s", line, out)
		}
	}
	zh := map[string]string{"TC_LANG": "zh"}
	for _, args := range [][]string{{"--lang", "en", "help"}, {"--lang=en", "--help"}} {
		if _, out, _ := runTCWith(t, zh, args...); !strings.HasPrefix(out, "tc — the taskcenter command line") {
			t.Errorf("tc %v with TC_LANG=zh: %.40q", args, out)
		}
	}
	for _, args := range [][]string{{"--lang", "zh", "help"}, {"import", "--help", "--lang", "zh"}, {"ls", "--lang=zh", "-h"}} {
		if _, out, _ := runTCWith(t, nil, args...); !strings.HasPrefix(out, "tc — taskcenter 命令行\n\n用法：tc [--url URL]") {
			t.Errorf("tc %v: %.60q", args, out)
		}
	}
}

// A server with an import to submit, follow and show, a task that refuses a cancel, and a
// list.
func langServer(t *testing.T) string {
	t.Helper()
	const imported = `{"id":"tsk_IMP","type":"import:customers","status":"SUCCESS","counts":{"total":3,"success":3,"failed":0},` +
		`"params":{"mode":"replace"},"result":{"summary":{"total":3,"success":3,"inserted":1,"updated":1,"unchanged":1,"removed":2},"dry_run":true,` +
		`"first_errors":["row 3, phone: must be 11 digits starting with 1"],"first_error_messages":[{"row":3,"parts":[{"field":"phone","code":"row.phone"}]}]},` +
		`"links":{"self":"/api/v1/tasks/tsk_IMP","undo":"/api/v1/tasks/tsk_IMP/undo"},` +
		`"attempts":[{"attempt":1,"trigger":"first","worker":"w1","status":"SUCCESS"}],` +
		`"logs":[{"at":"2026-12-01T08:00:00Z","attempt":1,"level":"info","message":"imported 3 of 3 rows; 0 failed",` +
		`"code":"log.imported","params":{"success":"3","total":"3","failed":"0"}}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/events"):
			http.Error(w, `{"status":404,"code":"no_route"}`, http.StatusNotFound)
		case r.URL.Path == "/api/v1/imports":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusAccepted)
			fmt.Fprint(w, `{"task":{"id":"tsk_IMP","type":"import:customers","status":"PENDING"}}`)
		case r.URL.Path == "/api/v1/tasks/tsk_IMP":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, imported)
		case r.URL.Path == "/api/v1/tasks/tsk_IMP/cancel":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `{"status":409,"code":"status_conflict","detail":"cannot cancel a task that is SUCCESS",`+
				`"params":{"op":"cancel","status":"SUCCESS"},"request_id":"req7"}`)
		case r.URL.Path == "/api/v1/exports":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			fmt.Fprint(w, `{"status":422,"code":"bad_filter","detail":"the filter is not valid: city: must be at most 64 characters",`+
				`"errors":[{"field":"filter.city","message":"must be at most 64 characters","code":"field_error.too_long","params":{"max":"64"}}],"request_id":"req8"}`)
		case r.URL.Path == "/api/v1/tasks":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"items":[{"id":"tsk_IMP","type":"import:customers","status":"SUCCESS","created_at":"2026-12-01T08:00:00Z"}],"total":3}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// runTCWith runs tc with the environment vars added to the server's URL and a good token.
func runTCWith(t *testing.T, vars map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	getenv := func(k string) string { return vars[k] }
	code := run(context.Background(), args, env{getenv: getenv, stdout: &out, stderr: &errb})
	return code, out.String(), errb.String()
}

// tc speaks Chinese when asked with --lang zh or by the locale, and its English stays as
// scripts read it: a status line, an import's summary, split and rejected rows, and a refusal.
func TestTCSpeaksTheLanguageAskedFor(t *testing.T) {
	t.Parallel()
	base := langServer(t)
	file := filepath.Join(t.TempDir(), "c.csv")
	if err := os.WriteFile(file, []byte("code,name,phone\nA1,a,13800000001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"TASKCENTER_URL": base, "TASKCENTER_TOKEN": "good-token-0123456789"}
	withLang := map[string]string{"LANG": "zh_CN.UTF-8"}
	for k, v := range vars {
		withLang[k] = v
	}
	for _, tc := range []struct {
		name string
		vars map[string]string
		lang []string
		says []string // what stdout and stderr say, in order of the commands below
	}{
		{"english", vars, nil, []string{
			"submitted tsk_IMP (import:customers), PENDING",
			"SUCCESS tsk_IMP import:customers: 3 rows, 3 ok, 0 rejected\n  1 inserted, 1 updated, 1 unchanged, 2 removed\n  dry run: nothing was written\n  row 3, phone: must be 11 digits starting with 1\n  undo: tc undo tsk_IMP",
			"tc: cannot cancel a task that is SUCCESS\n  (409 status_conflict, request req7)",
			"tc: the filter is not valid: city: must be at most 64 characters\n  filter.city: must be at most 64 characters\n",
		}},
		{"--lang zh", vars, []string{"--lang", "zh"}, []string{
			"已提交 tsk_IMP（客户导入），排队中",
			"成功 tsk_IMP 客户导入：共 3 行，成功 3，拒绝 0\n  新增 1，更新 1，未变 1，删除 2\n  试运行：未写入任何数据\n  第 3 行，手机号：必须是以 1 开头的 11 位数字\n  撤销：tc undo tsk_IMP",
			"tc: 任务当前状态（成功）已不允许取消。\n  （409 status_conflict，请求 req7）",
			"tc: 筛选条件无效。\n  filter.city：最多 64 个字符\n",
		}},
		{"LANG=zh_CN.UTF-8", withLang, nil, []string{
			"已提交 tsk_IMP（客户导入），排队中",
			"成功 tsk_IMP 客户导入：共 3 行，成功 3，拒绝 0\n  新增 1，更新 1，未变 1，删除 2",
			"tc: 任务当前状态（成功）已不允许取消。",
			"filter.city：最多 64 个字符",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, args := range [][]string{{"import", file}, {"watch", "tsk_IMP"}, {"cancel", "tsk_IMP"}, {"export", "customers", "--filter", "city=" + strings.Repeat("x", 65)}} {
				_, out, errOut := runTCWith(t, tc.vars, append(tc.lang, args...)...)
				if !strings.Contains(out+errOut, tc.says[i]) {
					t.Errorf("tc %v says\n%s%s\nnot\n%s", args, out, errOut, tc.says[i])
				}
			}
		})
	}
}

// In Chinese, what tc says holds no English word: only data (ids, the problem's code, the
// request id, a worker's name), its own name and the commands and flags it names stay in
// Latin letters.
func TestChineseLeavesNoEnglishWord(t *testing.T) {
	t.Parallel()
	base := langServer(t)
	vars := map[string]string{"TASKCENTER_URL": base, "TASKCENTER_TOKEN": "good-token-0123456789", "TC_LANG": "zh"}
	file := filepath.Join(t.TempDir(), "c.csv")
	if err := os.WriteFile(file, []byte("code,name,phone\nA1,a,13800000001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := regexp.MustCompile(`^tc:|tsk_[A-Za-z0-9]+|\btc [a-z-]+ \S+|--[a-z-]+|status_conflict|bad_filter|filter\.city|req[78]|\bw1\b`)
	word := regexp.MustCompile(`[A-Za-z]+`)
	said := 0
	for _, args := range [][]string{
		{"import", file}, {"watch", "tsk_IMP"}, {"show", "tsk_IMP"}, {"cancel", "tsk_IMP"}, {"ls", "--limit", "1"},
		{"export", "customers", "--filter", "city=" + strings.Repeat("x", 65)},
	} {
		_, out, errOut := runTCWith(t, vars, args...)
		for line := range strings.Lines(out + errOut) {
			said++
			if w := word.FindString(data.ReplaceAllString(line, "")); w != "" {
				t.Errorf("tc %v says %q in English: %q", args, w, line)
			}
		}
	}
	if said < 15 {
		t.Fatalf("tc said only %d lines", said)
	}
}
