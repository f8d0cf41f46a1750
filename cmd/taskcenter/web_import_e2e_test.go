package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// A messy import's page explains itself: the rejected rows counted by field and reason above
// the first rejected rows, with the fields' names and the reasons in the page's language;
// the log grouped under a heading per attempt, its newest lines first, earlier ones on
// "Load earlier lines"; and the whole log downloads as text.
func TestWebPageExplainsAMessyImport(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	e, p := startEnv(t, nil, "all")
	final := p.importMessy("messy.xlsx", excelizeMessy(t))
	// A later attempt's 120 lines: more than the page's first read, so the first attempt's
	// lines are behind "Load earlier lines".
	e.exec(`INSERT INTO task_logs (task_id, attempt, level, message)
		SELECT id, 2, 'info', 'later line ' || n FROM tasks, generate_series(1, 120) n WHERE task_no = ?`, final.ID)

	b.signIn(p.base, aliceToken)
	b.run("open the import", chromedp.Navigate(p.base+"/tasks/"+final.ID))
	b.wait("the breakdown", `document.querySelectorAll("#rejected-fields > li").length === 5 && !document.querySelector("#rejected-breakdown").hidden`, 15*time.Second)
	fields := eval[string](b, `Array.from(document.querySelectorAll("#rejected-fields > li")).map(li => li.querySelector(".field").innerText + " " + li.querySelector(".n").innerText).join(" · ")`)
	if fields != "code 2 · name 2 · email 1 · level 1 · phone 1" {
		t.Fatalf("rejected rows by field: %q", fields)
	}
	// Under each field, its rows by reason: the row messages, with the values a reason's one
	// row names.
	reasons := `Array.from(document.querySelectorAll("#rejected-fields > li")).map(li => li.querySelector(".field").innerText + " " +
		li.querySelector(".n").innerText + li.querySelector(".colon").innerText +
		Array.from(li.querySelectorAll(".reasons li")).map(r => r.innerText.replace(/\s+/g, " ")).join(" · ")).join(" | ")`
	if got := eval[string](b, reasons); got != "code 2: must be 1 to 32 letters, digits, '-' or '_', starting with a letter or digit 1 · C002 already appears in row 3 1 | "+
		"name 2: is required 1 · must be at most 100 characters (this one has 101) 1 | email 1: is not a valid email address 1 | "+
		"level 1: must be normal, silver, gold, platinum or diamond (普通, 白银, 黄金, 铂金, 钻石) 1 | phone 1: must be 11 digits starting with 1 1" {
		t.Fatalf("rejected rows by field and reason: %q", got)
	}
	if above := eval[bool](b, `!!(document.querySelector("#rejected-breakdown").compareDocumentPosition(document.querySelector("#rejected-rows")) & Node.DOCUMENT_POSITION_FOLLOWING)`); !above {
		t.Fatal("the breakdown is not above the first rejected rows")
	}

	b.wait("the newest lines, one attempt", `document.querySelectorAll("#log-groups li").length === 100 && !document.querySelector("#log-earlier").hidden`, 10*time.Second)
	if heads := eval[string](b, `Array.from(document.querySelectorAll("#log-groups h3")).map(h => h.innerText).join("|")`); heads != "Attempt 2" {
		t.Fatalf("headings before loading earlier lines: %q", heads)
	}
	b.click("load earlier lines", "#log-earlier")
	b.wait("every line, two attempts", `document.querySelectorAll("#log-groups h3").length === 2 && document.querySelector("#log-earlier").hidden`, 10*time.Second)
	heads := eval[string](b, `Array.from(document.querySelectorAll("#log-groups h3")).map(h => h.innerText).join("|")`)
	first := eval[string](b, `document.querySelector("#log-groups ol").innerText`)
	last := eval[string](b, `Array.from(document.querySelectorAll("#log-groups li")).pop().innerText`)
	if heads != "Attempt 1|Attempt 2" || first == "" || !strings.HasSuffix(last, "later line 120") {
		t.Fatalf("grouped log: headings %q, first attempt %q, last line %q", heads, first, last)
	}

	// The whole log, as text.
	b.click("download the log", "#log-download")
	path := b.download("-log.txt", map[string]bool{})
	text, err := os.ReadFile(path)
	if err != nil || !strings.HasPrefix(string(text), "# log of task "+final.ID+"\n\n== attempt 1 ==\n") ||
		!strings.Contains(string(text), "\n== attempt 2 ==\n") || !strings.HasSuffix(string(text), " later line 120\n") {
		t.Fatalf("downloaded log (%v):\n%s", err, text)
	}

	// In Chinese the fields are named as the template names them, and the reasons are said in
	// Chinese; two rows whose codes exist, each its own, read as the reason without values.
	e.exec(`INSERT INTO task_items (task_id, row_no, field, message, messages)
		SELECT id, 90 + n, 'code', 'code: K' || n || ' already exists',
			jsonb_build_array(jsonb_build_object('field', 'code', 'code', 'row.exists', 'params', jsonb_build_object('value', 'K' || n)))
		FROM tasks, generate_series(1, 2) n WHERE task_no = ?`, final.ID)
	b.click("switch to Chinese", "#lang-switch")
	b.wait("the Chinese breakdown", `document.querySelectorAll("#rejected-fields > li").length === 5 && document.querySelector("#rejected-breakdown h2").innerText === "按字段统计的被拒绝行"`, 15*time.Second)
	if zh := eval[string](b, reasons); zh != "客户编号 4：已存在 2 · 必须是 1 到 32 个字母、数字、“-”或“_”，并以字母或数字开头 1 · C002 已在第 3 行出现 1 | "+
		"客户名称 2：必填 1 · 最多 100 个字符（此处有 101 个） 1 | 邮箱 1：不是有效的邮箱地址 1 | "+
		"等级 1：必须是 普通、白银、黄金、铂金 或 钻石（normal、silver、gold、platinum、diamond） 1 | 手机号 1：必须是以 1 开头的 11 位数字 1" {
		t.Fatalf("the breakdown in Chinese: %q", zh)
	}
	b.checkNoErrorsBut(nil)
}

// A file whose headers the import does not know fails, and its page asks which column is
// which: the choice imports the stored file again (no upload) with the mapping. A dry run's
// page offers to run it for real, the same way.
func TestTheMappingFormImportsTheUploadedFileAgain(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	e, p := startEnv(t, nil, "all")
	b.signIn(p.base, aliceToken)

	file := filepath.Join(t.TempDir(), "members.csv")
	if err := os.WriteFile(file, memberCSV(memberHeaders, "W1", "W2"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.run("open the import page", chromedp.Navigate(p.base+"/new/import"), chromedp.WaitVisible(chromedp.CSS("#file")))
	b.run("pick the file", chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{file}))
	b.click("upload it", "#import-submit")
	b.wait("the task's page to show the failure and the mapping form", `location.pathname.startsWith("/tasks/") &&
		document.querySelector("#task-status").dataset.status === "FAILED" && !document.querySelector("#mapping").hidden &&
		["code", "name", "phone"].every(f => !!document.querySelector("#map-" + f)) && !document.querySelector("#map-email")`, 30*time.Second)
	var failedID string
	failedID = evalInto(b, `location.pathname.slice("/tasks/".length)`, failedID)
	var options []string
	options = evalInto(b, `[...document.querySelectorAll("#map-phone option")].map(o => o.value)`, options)
	if len(options) != len(memberHeaders)+1 || options[3] != "联系电话" {
		t.Fatalf("the phone select offers %q, want a blank choice and the file's headers", options)
	}
	b.run("map the columns", chromedp.SetValue(chromedp.CSS("#map-code"), "会员号"), chromedp.SetValue(chromedp.CSS("#map-name"), "姓名"),
		chromedp.SetValue(chromedp.CSS("#map-phone"), "联系电话"))
	b.click("import with the mapping", "#mapping-submit")
	b.wait("the new task to succeed", `location.pathname.startsWith("/tasks/") && location.pathname !== "/tasks/`+failedID+`" &&
		document.querySelector("#task-status").dataset.status === "SUCCESS"`, 30*time.Second)
	if n := e.count("SELECT count(*) FROM customers WHERE code IN ('W1', 'W2') AND phone <> ''"); n != 2 {
		t.Fatalf("the mapped import wrote %d customers, want 2", n)
	}
	// The second task imported the first one's stored upload: one file, no second upload.
	if n := e.count(`SELECT count(DISTINCT params->>'upload') FROM tasks WHERE owner = 'alice'`); n != 1 {
		t.Fatalf("the two tasks read %d uploads, want the one", n)
	}
	if n := e.count(`SELECT count(*) FROM tasks WHERE owner = 'alice' AND params->'columns'->>'联系电话' = 'phone'`); n != 1 {
		t.Fatalf("%d tasks carry the mapping, want 1", n)
	}

	// A dry run's page offers to run it for real: the same upload, dry_run off.
	dry := p.submitImport(aliceToken, "members.csv", memberCSV(memberHeaders, "W3"), map[string]string{"dry_run": "true"})
	p.waitStatus(aliceToken, dry.ID, 30*time.Second, "SUCCESS")
	b.run("open the dry run", chromedp.Navigate(p.base+"/tasks/"+dry.ID))
	b.wait("the offer to run it for real", `!!document.querySelector("#run-for-real")`, 15*time.Second)
	b.click("run it for real", "#run-for-real")
	b.wait("the real run", `location.pathname !== "/tasks/`+dry.ID+`" && location.pathname.startsWith("/tasks/") &&
		document.querySelector("#task-status").dataset.status === "SUCCESS"`, 30*time.Second)
	if n := e.count(`SELECT count(*) FROM tasks WHERE owner = 'alice' AND params->>'dry_run' IS NULL AND params->>'upload' = (SELECT params->>'upload' FROM tasks WHERE task_no = ?)`, dry.ID); n != 1 {
		t.Fatalf("%d real runs of the dry run's upload, want 1", n)
	}
}

// A dry run, a replace and its undo, as a person does them on the page: the import form with
// "Dry run" ticked and mode replace says what the replace would do and that nothing was
// written; "Run it for real" does it (the customers not in the file are gone); "Undo this
// import", once its confirm is accepted, opens the undo's task, and when that finishes the
// customers are as they were before the replace. The finished pages say the same in 中文.
func TestWebDryRunReplaceAndUndo(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	e, p := startEnv(t, nil, "all")
	e.seedCustomers(5) // C000001…C000005
	// Every column of every customer, id included: an undo brings a removed customer back
	// with its id, so "as before" is the whole table.
	table := func() string {
		t.Helper()
		var s string
		err := e.db().NewRaw(`SELECT coalesce(string_agg(concat_ws('|', id, code, name, phone, email, city, level), E'\n' ORDER BY code), '')
			FROM customers`).Scan(context.Background(), &s)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := table()

	file := filepath.Join(t.TempDir(), "whole-list.csv")
	csv := "code,name,phone,email,city,level\n" +
		"C000001,Renamed,13800000001,c1@example.com,Shanghai,gold\n" + // updated
		"C000002,Customer 2,13800000002,c2@example.com,Shanghai,gold\n" + // unchanged
		"N000001,New,13900000001,,Hangzhou,silver\n" // inserted; C000003…5 are not in the file
	if err := os.WriteFile(file, []byte(csv), 0o600); err != nil {
		t.Fatal(err)
	}
	const split = "1 inserted · 1 updated · 1 unchanged · 3 removed"

	// facts is the task page's facts as a person reads them, label → value.
	const facts = `Object.fromEntries([...document.querySelectorAll("#task-facts dt")].map(dt => [dt.innerText, dt.nextElementSibling ? dt.nextElementSibling.innerText : ""]))`
	finished := func(status string) string {
		return `location.pathname.startsWith("/tasks/") && document.querySelector("#task-status").dataset.status === "` + status + `"`
	}
	here := func() string { return eval[string](b, `location.pathname.slice("/tasks/".length)`) }

	// --- the dry run of a replace --------------------------------------------------------------
	b.signIn(p.base, aliceToken)
	b.run("open the import page", chromedp.Navigate(p.base+"/new/import"), chromedp.WaitVisible(chromedp.CSS("#file")))
	b.run("pick the file", chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{file}))
	b.click("choose replace", `input[name="mode"][value="replace"]`)
	b.click("tick dry run", "#dry-run")
	b.wait("replace and dry run chosen", `document.querySelector('input[name="mode"][value="replace"]').checked && document.querySelector("#dry-run").checked`, 5*time.Second)
	b.click("submit", "#import-submit")
	b.wait("the dry run to finish and say what it would do", finished("SUCCESS")+` && (() => { const f = `+facts+`;
		return f["Changes"] === "would be: `+split+`" && (f["Dry run"] || "").startsWith("Nothing was written") &&
			f["Rows"] === "3 / 3 / 0" && !!document.querySelector("#run-for-real"); })()`, 30*time.Second)
	dryID := here()
	if got := eval[bool](b, `!!document.querySelector("#undo")`); got {
		t.Error("a dry run's page offers to undo it")
	}
	if after := table(); after != before {
		t.Fatalf("the dry run wrote to the customers:\nbefore\n%s\nafter\n%s", before, after)
	}

	// --- run it for real ----------------------------------------------------------------------
	b.click("run it for real", "#run-for-real")
	b.wait("the real replace to finish with the real counts", `location.pathname !== "/tasks/`+dryID+`" && `+finished("SUCCESS")+` && (() => { const f = `+facts+`;
		return f["Changes"] === "`+split+`" && !("Dry run" in f) && f["Rows"] === "3 / 3 / 0" && !!document.querySelector("#undo"); })()`, 30*time.Second)
	replaceID := here()
	var codes string
	if err := e.db().NewRaw(`SELECT string_agg(code || ':' || name, ',' ORDER BY code) FROM customers`).Scan(context.Background(), &codes); err != nil {
		t.Fatal(err)
	}
	if codes != "C000001:Renamed,C000002:Customer 2,N000001:New" {
		t.Fatalf("after the replace the customers are %s, want the file's three", codes)
	}

	// --- the same pages in 中文 ---------------------------------------------------------------
	b.run("the dry run in Chinese", chromedp.Navigate(p.base+"/tasks/"+dryID+"?lang=zh"))
	b.wait("the Chinese dry-run note", `document.documentElement.lang === "zh-CN" && (() => { const f = `+facts+`;
		return (f["试运行"] || "").startsWith("未写入任何数据") && f["变更"] !== undefined; })() &&
		(document.querySelector("#run-for-real") || {}).innerText === "正式导入"`, 15*time.Second)
	if got := eval[map[string]string](b, facts); !strings.HasPrefix(got["变更"], "预计：") || !strings.Contains(got["变更"], "删除 3") {
		t.Errorf("the dry run's changes in Chinese: %q", got["变更"])
	}
	b.run("the replace in Chinese", chromedp.Navigate(p.base+"/tasks/"+replaceID+"?lang=zh"))
	b.wait("the Chinese undo button", `document.documentElement.lang === "zh-CN" && `+finished("SUCCESS")+` &&
		(document.querySelector("#undo") || {}).innerText === "撤销此次导入"`, 15*time.Second)
	if got := eval[map[string]string](b, facts); got["变更"] != "新增 1 · 更新 1 · 未变 1 · 删除 3" {
		t.Errorf("the replace's changes in Chinese: %q", got["变更"])
	}

	// --- undo it, accepting the confirm ------------------------------------------------------
	b.run("the replace in English", chromedp.Navigate(p.base+"/tasks/"+replaceID+"?lang=en"))
	b.wait("the English undo button", `document.documentElement.lang === "en" && `+finished("SUCCESS")+` &&
		(document.querySelector("#undo") || {}).innerText === "Undo this import"`, 15*time.Second)
	// The confirm is the browser's own dialog: the click waits on it until it is answered,
	// so it is accepted from here, as a person clicks OK.
	dialogCtx, stopDialogs := context.WithCancel(b.ctx)
	var (
		mu     sync.Mutex
		asked  []string
		done   = make(chan struct{})
		dialog = chromedp.Events(dialogCtx, page.JavascriptDialogOpening)
	)
	go func() {
		defer close(done)
		for ev, err := range dialog {
			if err != nil {
				return
			}
			mu.Lock()
			asked = append(asked, string(ev.Type)+": "+ev.Message)
			mu.Unlock()
			if _, err := chromedp.Call(dialogCtx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true}); err != nil && dialogCtx.Err() == nil {
				t.Errorf("accept the confirm: %v", err)
			}
		}
	}()
	b.click("undo this import", "#undo")
	b.wait("the undo's own task to finish", `location.pathname !== "/tasks/`+replaceID+`" && `+finished("SUCCESS")+` &&
		document.querySelector("#task-type").innerText !== "" && document.querySelector("#task-facts .counts .bad").innerText === "0"`, 30*time.Second)
	stopDialogs()
	<-done
	mu.Lock()
	if len(asked) != 1 || !strings.HasPrefix(asked[0], "confirm: Undo this import?") {
		t.Errorf("the dialogs the undo asked: %q, want its one confirm", asked)
	}
	mu.Unlock()
	undoID := here()
	if n := e.count(`SELECT count(*) FROM tasks WHERE task_no = ? AND type = 'import:customers-undo'`, undoID); n != 1 {
		t.Fatalf("the page after the undo is task %s, not the import's undo", undoID)
	}
	if after := table(); after != before {
		t.Fatalf("after the undo the customers are not as before the replace:\nbefore\n%s\nafter\n%s", before, after)
	}
	b.checkNoErrorsBut(nil)
}
