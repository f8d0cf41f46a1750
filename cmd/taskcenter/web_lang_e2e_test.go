package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/taskcenter/taskcenter/jobs"
)

// untranslatedJS lists the words a page shows in the wrong language: in Chinese, words in
// Latin letters; in English, Chinese characters. It reads what a person reads (the text
// shown, the options of the selects, placeholders and labels for screen readers) and passes
// over user data: elements marked data-user (ids, titles, file names, owners) and the values
// named in an element's data-values (the params of a message it says). A few names are the
// same in both languages (formats, units, the language switch).
const untranslatedJS = `(() => {
	const zh = document.documentElement.lang.startsWith("zh");
	// The product's name, formats, units, the language switch; the values a file may hold
	// (levels, headers) as the import takes them, which its messages name in both languages.
	const same = new Set(zh ? ["taskcenter", "UTC", "KB", "MB", "GB", "xlsx", "xls", "csv", "CSV", "UTF", "GBK", "API", "English",
		"normal", "silver", "gold", "platinum", "diamond"]
		: ["中文", "普通", "白银", "黄金", "铂金", "钻石", "客户编号", "客户名称", "手机号", "邮箱", "城市", "等级"]);
	const pattern = zh ? /[A-Za-z]{2,}/g : /\p{Script=Han}+/gu;
	const out = [];
	const check = (node, text, where) => {
		const el = node.nodeType === 1 ? node : node.parentElement;
		if (!el || el.closest("script, style, template, [data-user]")) return;
		for (let a = el; a; a = a.parentElement) {
			if (a.dataset && a.dataset.values) for (const v of JSON.parse(a.dataset.values)) if (v) text = text.split(v).join(" ");
		}
		for (const w of text.match(pattern) || []) if (!same.has(w)) out.push(w + " in " + where + ": " + JSON.stringify(text.trim().slice(0, 100)));
	};
	const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
	for (let n; (n = walk.nextNode());) {
		const el = n.parentElement;
		if (!el || el.closest("[hidden], select") || el.getClientRects().length === 0) continue;
		check(n, n.nodeValue, el.tagName.toLowerCase() + (el.id ? "#" + el.id : ""));
	}
	for (const o of document.querySelectorAll("select option")) check(o, o.textContent, "option");
	for (const e of document.querySelectorAll("[placeholder], [aria-label], input[type=submit]")) {
		if (e.closest("[hidden]")) continue;
		for (const a of ["placeholder", "aria-label", "value"]) if (e.hasAttribute(a) && (a !== "value" || e.type === "submit")) check(e, e.getAttribute(a), a);
	}
	// The window's title is the page's title: user data as the page shows it.
	let title = document.title;
	for (const e of document.querySelectorAll("[data-user]")) if (e.textContent) title = title.split(e.textContent).join(" ");
	for (const e of document.querySelectorAll("[data-values]")) for (const v of JSON.parse(e.dataset.values)) if (v) title = title.split(v).join(" ");
	check(document.body, title, "title");
	return out;
})()`

// Every page of the web UI, in each state a person meets (the list, empty and full; a task
// of each status; the import and export forms and their refusals, one naming the field at
// fault; sign-in and its refusal, sign-out; a task that is not there), reads in the viewer's
// language alone: no English left on the Chinese page, no Chinese on the English one,
// outside user data. The titles the product gives tasks (an export's filter, a list of
// statuses, an import's file) are the page's words, so they are read too.
func TestEveryPageSpeaksTheViewersLanguage(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("browser test")
	}
	b := newBrowser(t)
	e := newEnv(t, map[string]string{
		"TASKCENTER_CLEANUP_SPEC":         "@every 1h",
		"TASKCENTER_WORKER_POLL_INTERVAL": "100ms",
	})
	e.seedCustomers(50)
	api := e.start("api")
	base := api.base

	// Tasks in every status a person can find: waiting ones before any worker runs, then the
	// outcomes of real runs. TIMEOUT and RETRY_WAIT are set on waiting tasks, as the cleanup
	// and a transient fault leave them.
	pending := api.submitExport(aliceToken, map[string]any{"type": "customers", "filter": map[string]any{"city": "上海"}})
	// Its job is taken out of the queue, so it waits however long the test takes.
	queues, err := e.inspector().Queues()
	if err != nil {
		t.Fatal(err)
	}
	held := false
	for _, q := range queues {
		held = held || e.inspector().DeleteTask(q, jobs.JobID(pending.ID, 0)) == nil
	}
	if !held {
		t.Fatalf("the job of %s is in none of the queues %v", pending.ID, queues)
	}
	cancelled := api.submitExport(aliceToken, map[string]any{"type": "tasks", "filter": map[string]any{"status": []string{"FAILED", "TIMEOUT"}}})
	if res := api.do("POST", "/api/v1/tasks/"+cancelled.ID+"/cancel", aliceToken, nil); res.status != 200 {
		t.Fatalf("cancel: %d %s", res.status, res.body)
	}
	timedOut := api.submitExport(aliceToken, map[string]any{"type": "customers", "filter": map[string]any{"level": "gold"}})
	e.exec(`UPDATE tasks SET status = 'TIMEOUT', error_code = 'timeout', error_message = 'the worker stopped reporting for 1800 seconds',
		error_params = '{"seconds": "1800"}', finished_at = now() WHERE task_no = ?`, timedOut.ID)
	retryWait := api.submitExport(aliceToken, map[string]any{"type": "customers", "filter": map[string]any{"code_prefix": "C1"}})
	e.exec(`UPDATE tasks SET status = 'RETRY_WAIT', retry_count = 1, next_retry_at = now() + interval '1 day', error_code = 'transient',
		error_message = 'a temporary error interrupted the task', error_params = NULL WHERE task_no = ?`, retryWait.ID)
	var messy []byte
	messy, err = os.ReadFile(filepath.Join("..", "..", "testdata", "imports", "messy-openpyxl.xlsx"))
	if err != nil {
		t.Fatal(err)
	}
	// A replace: with rows rejected it removes nothing, and its page says why.
	partial := api.submitImport(aliceToken, "messy.xlsx", messy, map[string]string{"lang": "en", "mode": "replace"})
	failed := api.submitImport(aliceToken, "wrong-header.csv", []byte("foo,bar\n1,2\n"), map[string]string{"lang": "en"})
	e.start("worker")
	done := api.submitExport(aliceToken, map[string]any{"type": "customers"})
	api.waitStatus(aliceToken, partial.ID, time.Minute, "PARTIAL_SUCCESS")
	api.waitStatus(aliceToken, failed.ID, time.Minute, "FAILED")
	api.waitStatus(aliceToken, done.ID, time.Minute, "SUCCESS")

	type page struct {
		name, path, ready string
		act               func() // after it is ready: a person's action that leads to the state checked
		after             string // and the condition that says the state is there
		// titles selects the titles the product gave the page's tasks: the walk reads them as
		// the page's own words (they are not marked as user data).
		titles string
		// refused is the HTTP status the page's request is meant to be refused with: the
		// browser logs it as a console error, the one the page expects.
		refused string
	}
	detail := func(name, id, status string) page {
		return page{name: "detail " + name, path: "/tasks/" + id, titles: "#task-title",
			ready: `document.querySelector("#task-status").dataset.status === "` + status + `" && !document.querySelector("#timeline").hidden
				&& document.querySelector("#timeline li") !== null`}
	}
	signedIn := []page{
		{name: "list", path: "/", ready: `document.querySelectorAll("#tasks tbody tr").length === 7`, titles: "#tasks a.title"},
		{name: "list, nothing matches", path: "/?q=nothing-has-this-name", ready: `!!document.querySelector("#empty-reset")`},
		{name: "list, retry refused", path: "/", ready: `document.querySelectorAll("#tasks tbody tr").length === 7`,
			act: func() {
				b.click("tick the finished export", `#tasks tr[data-id="`+done.ID+`"] .pick`)
				b.click("retry it", "#retry-selected")
			}, after: `document.querySelector("#bulk-results li[data-outcome=not_allowed]") !== null`},
		detail("PENDING", pending.ID, "PENDING"),
		detail("CANCELLED", cancelled.ID, "CANCELLED"),
		detail("TIMEOUT", timedOut.ID, "TIMEOUT"),
		detail("RETRY_WAIT", retryWait.ID, "RETRY_WAIT"),
		func() page {
			p := detail("PARTIAL_SUCCESS", partial.ID, "PARTIAL_SUCCESS")
			p.ready += ` && !!document.querySelector("#task-facts dd[data-fact=removed]")`
			return p
		}(),
		func() page {
			// Refused for its header: no retry (the same file would fail again), the form for
			// a corrected file instead.
			p := detail("FAILED", failed.ID, "FAILED")
			p.ready += ` && !!document.querySelector("#upload-corrected") && !document.querySelector("#retry")`
			return p
		}(),
		detail("SUCCESS", done.ID, "SUCCESS"),
		{name: "detail, not found", path: "/tasks/tsk_NOSUCHTASK", refused: "404", ready: `document.querySelector("#detail-msg").dataset.state === "not-found"`},
		{name: "import", path: "/new/import", ready: `!!document.querySelector("#import-form")`},
		{name: "import, no file", path: "/new/import", ready: `!!document.querySelector("#import-form")`,
			act: func() { b.click("upload nothing", "#import-submit") }, after: `document.querySelector("#answer").innerText !== ""`},
		{name: "import, refused", path: "/new/import", refused: "415", ready: `!!document.querySelector("#import-form")`,
			act: func() {
				notSheet := filepath.Join(t.TempDir(), "notes.xlsx")
				os.WriteFile(notSheet, []byte("these are notes, not a spreadsheet"), 0o644) //nolint:errcheck,gosec
				b.run("pick a file that is not a spreadsheet", chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{notSheet}))
				b.click("upload it", "#import-submit")
			}, after: `(document.querySelector("#answer").dataset.status || "").startsWith("4")`},
		{name: "export", path: "/new/export", ready: `!!document.querySelector("#export-form")`},
		// A refusal that names a field and says what is wrong with it (errors[]).
		{name: "export, field refused", path: "/new/export", refused: "422", ready: `!!document.querySelector("#export-form")`,
			act: func() {
				b.click("export the task list", `#export-form input[name=type][value=tasks]`)
				b.run("ask for tasks created from a day after the last one", chromedp.SetValue(chromedp.CSS(`#export-form input[name=created_from]`), "2026-12-02"),
					chromedp.SetValue(chromedp.CSS(`#export-form input[name=created_to]`), "2026-11-01"))
				b.click("export them", "#export-submit")
			}, after: `document.querySelector("#answer").dataset.status === "422" && document.querySelector("#answer li") !== null`},
		{name: "console sign-out", path: "/monitor/logout", ready: `!!document.querySelector("form")`},
	}
	signedOut := []page{
		{name: "sign-in", path: "/login", ready: `!!document.querySelector("#token")`},
		{name: "sign-in, refused", path: "/login", refused: "401", ready: `!!document.querySelector("#token")`,
			act: func() {
				b.run("sign in with a wrong token", chromedp.SendKeys(chromedp.CSS("#token"), "not-a-token\r"))
			},
			after: `!!document.querySelector(".error, .msg.error, [role=alert]") && location.pathname === "/login"`},
		{name: "list, empty (bob)", path: "/", ready: `!!document.querySelector("#empty-import")`},
	}

	// Per page and language: untranslated strings, console errors (and uncaught exceptions),
	// requests leaving this machine and loads that failed — each wanted 0.
	total := 0
	lines := []string{fmt.Sprintf("  %-26s %-4s %12s %14s %16s %12s", "page", "lang", "untranslated", "console errors", "requests leaving", "failed loads")}
	net := b.watchNetwork()
	scan := func(lang string, p page) {
		requestsBefore, failedBefore := net.seen()
		problemsBefore := b.problemCount()
		b.run("open "+p.name, chromedp.Navigate(base+p.path))
		b.wait(p.name+" ("+lang+")", `document.documentElement.lang.startsWith("`+lang+`") && (`+p.ready+`)`, 30*time.Second)
		if p.act != nil {
			p.act()
			b.wait(p.name+" ("+lang+"), after the action", p.after, 30*time.Second)
		}
		if p.titles != "" {
			var checked int
			checked = evalInto(b, `[...document.querySelectorAll(`+strconv.Quote(p.titles)+`)].filter(e => e.textContent && !e.closest("[data-user]")).length`, checked)
			if checked == 0 {
				t.Errorf("%s (%s): no title the product gave is checked (%s is marked as user data, or empty)", p.name, lang, p.titles)
			}
		}
		var words []string
		words = evalInto(b, untranslatedJS, words)
		requests, failed := net.seen()
		away := leaving(requests[len(requestsBefore):], base)
		failed = failed[len(failedBefore):]
		var problems int
		for _, pr := range b.problemsSince(problemsBefore) {
			if p.refused != "" && strings.Contains(pr, "status of "+p.refused+" ") {
				continue // the refusal the page is meant to meet
			}
			problems++
			t.Errorf("%s (%s): the browser reported %s", p.name, lang, pr)
		}
		lines = append(lines, fmt.Sprintf("  %-26s %-4s %12d %14d %16d %12d", p.name, lang, len(words), problems, len(away), len(failed)))
		total += len(words) + problems + len(away) + len(failed)
		for _, w := range words {
			t.Errorf("%s (%s): untranslated %s", p.name, lang, w)
		}
		for _, r := range away {
			t.Errorf("%s (%s): a request left the machine: %s", p.name, lang, r)
		}
		for _, f := range failed {
			t.Errorf("%s (%s): a load failed: %s", p.name, lang, f)
		}
	}
	for _, lang := range []string{"en", "zh"} {
		// The language is the viewer's choice (?lang=, remembered in a cookie).
		b.run("choose "+lang, chromedp.Navigate(base+"/login?lang="+lang))
		b.signIn(base, aliceToken)
		for _, p := range signedIn {
			scan(lang, p)
		}
		b.run("sign out", chromedp.Navigate(base+"/"))
		b.wait("the list", `!!document.querySelector("#signout")`, 10*time.Second)
		b.click("sign out", "#signout")
		b.wait("signed out", `location.pathname === "/login"`, 10*time.Second)
		for _, p := range signedOut {
			if strings.HasPrefix(p.name, "list") {
				b.signIn(base, bobToken)
			}
			scan(lang, p)
		}
		b.click("sign bob out", "#signout")
		b.wait("signed out", `location.pathname === "/login"`, 10*time.Second)
	}
	testReport(t, "languages", fmt.Sprintf("every page in each language (want 0 everywhere):\n%s\n  total %d\n", strings.Join(lines, "\n"), total))
}
