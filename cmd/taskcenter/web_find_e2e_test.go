package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// findJS defines the page's facts the find-and-act test reads (the count on a status tab,
// the ids of the rows in order, a row's status, the range line) and is true: each condition
// starts with it, so the facts are there on whichever page the tab has loaded since.
const findJS = `(() => {
	window.__tab = s => document.querySelector('#status-tabs button[data-status="' + s + '"] .n').textContent;
	window.__rows = () => Array.from(document.querySelectorAll("#tasks tbody tr")).map(tr => tr.dataset.id).join(",");
	window.__status = id => (document.querySelector('#tasks tr[data-id="' + id + '"]') || {dataset: {}}).dataset.status;
	window.__range = () => document.querySelector("#range").textContent;
	return true; })() && `

// A person finds tasks on the page and acts on several at once: the status tabs count what
// the API counts, the search finds an import by its file name, the sort and the page size
// change the page, "1–20 of N" pages with next and previous, two ticked tasks are cancelled
// with one click and both show CANCELLED, a retry of a waiting and a cancelled task says
// which was not allowed, and a reload or the language switch keeps the search and the tab.
func TestWebPageFindsAndActsOnTasks(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	e, api := startEnv(t, nil, "api") // no worker: every task waits until the person acts on it
	base := api.base

	// 19 exports, the first one cancelled, then three imports (the newest).
	var exports []string
	for range 19 {
		exports = append(exports, api.submitExport(aliceToken, map[string]any{"type": "customers"}).ID)
	}
	if res := api.do("POST", "/api/v1/tasks/"+exports[0]+"/cancel", aliceToken, nil); res.status != http.StatusOK {
		t.Fatalf("cancel: %d %s", res.status, res.body)
	}
	csv := func(i int) []byte { return fmt.Appendf(nil, "code,name,phone\nF%03d,name %d,13800138%03d\n", i, i, i) }
	budget := api.submitImport(aliceToken, "预算 Budget-2026.csv", csv(1), nil).ID
	q1 := api.submitImport(aliceToken, "q1-customers.csv", csv(2), nil).ID
	q2 := api.submitImport(aliceToken, "q2-customers.csv", csv(3), nil).ID
	api.submitImport(bobToken, "budget-bob.csv", csv(4), nil)

	b.signIn(base, aliceToken)
	b.wait("the counts and the first page", findJS+`__tab("") === "22" && __tab("PENDING") === "21" && __tab("CANCELLED") === "1" && __tab("FAILED") === "0"
		&& __range() === "1–20 of 22" && __rows().startsWith("`+q2+`,`+q1+`,`+budget+`,") && !document.querySelector("#next").disabled`, 15*time.Second)

	// --- next and previous -------------------------------------------------------------
	b.click("the next page", "#next")
	b.wait("the last two", findJS+`__range() === "21–22 of 22" && __rows() === "`+exports[1]+`,`+exports[0]+`" && document.querySelector("#next").disabled`, 10*time.Second)
	b.click("the previous page", "#prev")
	b.wait("the first page again", findJS+`__range() === "1–20 of 22" && __rows().startsWith("`+q2+`,")`, 10*time.Second)

	// --- the sort and the page size ------------------------------------------------------
	b.run("oldest first", chromedp.SendKeys(chromedp.CSS("#sort"), kb.ArrowDown)) // from newest first to the next choice
	b.wait("the oldest first", findJS+`__rows().startsWith("`+exports[0]+`,`+exports[1]+`,") && location.search.includes("sort=-created")`, 10*time.Second)
	b.run("50 a page", chromedp.SendKeys(chromedp.CSS("#limit"), kb.ArrowDown)) // from 20 to 50
	b.wait("every task on one page", findJS+`__range() === "1–22 of 22" && document.querySelector("#next").disabled && location.search.includes("limit=50")`, 10*time.Second)
	b.click("reset the filters", `#filters button[type="reset"]`)
	b.wait("newest first, 20 a page", findJS+`__range() === "1–20 of 22" && __rows().startsWith("`+q2+`,") && location.search === ""`, 10*time.Second)
	// Most rejected rows first: two tasks given rejected rows lead, the most first.
	e.exec(`UPDATE tasks SET failed_count = CASE task_no WHEN ? THEN 5 ELSE 9 END WHERE task_no IN (?, ?)`, exports[3], exports[3], exports[7])
	b.run("most rejected rows first", chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector("#sort");
		s.value = "failed"; s.dispatchEvent(new Event("change", { bubbles: true })); })()`))
	b.wait("the most rejected first", findJS+`__rows().startsWith("`+exports[7]+`,`+exports[3]+`,") && location.search.includes("sort=failed")`, 10*time.Second)
	// Longest run first: two tasks given runs of 2 and 7 minutes lead, the longer first.
	e.exec(`UPDATE tasks SET started_at = now() - interval '10 minutes',
		finished_at = now() - interval '10 minutes' + CASE task_no WHEN ? THEN interval '2 minutes' ELSE interval '7 minutes' END
		WHERE task_no IN (?, ?)`, exports[4], exports[4], exports[9])
	b.run("longest run first", chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector("#sort");
		s.value = "duration"; s.dispatchEvent(new Event("change", { bubbles: true })); })()`))
	b.wait("the longest first", findJS+`__rows().startsWith("`+exports[9]+`,`+exports[4]+`,") && location.search.includes("sort=duration")`, 10*time.Second)
	b.click("reset the filters", `#filters button[type="reset"]`)
	b.wait("newest first again", findJS+`__rows().startsWith("`+q2+`,") && location.search === ""`, 10*time.Second)

	// --- search by file name; a reload keeps it -------------------------------------------
	b.run("type a part of the file name", chromedp.SendKeys(chromedp.CSS("#q"), "BUDGET-20"))
	b.wait("only the budget import, counted", findJS+`__rows() === "`+budget+`" && __tab("") === "1" && __tab("PENDING") === "1"
		&& __tab("CANCELLED") === "0" && __range() === "1–1 of 1" && location.search.includes("q=BUDGET-20")`, 10*time.Second)
	b.run("reload", chromedp.Reload())
	b.wait("the search kept", findJS+`document.querySelector("#q").value === "BUDGET-20" && __rows() === "`+budget+`"`, 10*time.Second)
	b.click("reset the search", `#filters button[type="reset"]`)
	b.wait("every task again", findJS+`__tab("") === "22" && __rows().startsWith("`+q2+`,`+q1+`,")`, 10*time.Second)

	// --- search by title, by task id and by the console's job id -------------------------
	for _, s := range []struct{ q, finds string }{{"Import q2", q2}, {exports[5], exports[5]}, {exports[5] + "-a0", exports[5]}} {
		b.run("search "+s.q, chromedp.SendKeys(chromedp.CSS("#q"), s.q))
		b.wait("only "+s.finds, findJS+`__rows() === "`+s.finds+`" && __range() === "1–1 of 1"`, 10*time.Second)
		b.click("reset the search", `#filters button[type="reset"]`)
		b.wait("every task again", findJS+`__tab("") === "22"`, 10*time.Second)
	}

	// --- select two, cancel them ----------------------------------------------------------
	b.click("tick q1", `#tasks tr[data-id="`+q1+`"] .pick`)
	b.click("tick q2", `#tasks tr[data-id="`+q2+`"] .pick`)
	b.wait("two ticked", `document.querySelector("#selected-count").textContent === "2 selected" && !document.querySelector("#cancel-selected").disabled`, 5*time.Second)
	b.click("cancel the selected", "#cancel-selected")
	b.wait("both CANCELLED, each answered, the counts moved", findJS+`__status("`+q1+`") === "CANCELLED" && __status("`+q2+`") === "CANCELLED"
		&& document.querySelectorAll('#bulk-results li[data-outcome="done"]').length === 2
		&& __tab("CANCELLED") === "3" && __tab("PENDING") === "19" && document.querySelector("#selected-count").textContent === ""`, 15*time.Second)
	bulkShot := b.screenshot("find-cancelled")
	answer := eval[string](b, `document.querySelector("#bulk-answer").innerText`)
	if !strings.Contains(answer, "Cancelled 2 of 2.") || strings.Count(answer, "— Cancelled") != 2 {
		t.Fatalf("the bulk answer says:\n%s", answer)
	}
	for _, id := range []string{q1, q2} {
		if got := api.task(aliceToken, id).Status; got != "CANCELLED" {
			t.Fatalf("the API says %s is %s", id, got)
		}
	}

	// --- retry a waiting and a cancelled task: each answered -------------------------------
	b.click("tick the budget import", `#tasks tr[data-id="`+budget+`"] .pick`)
	b.click("tick q1", `#tasks tr[data-id="`+q1+`"] .pick`)
	b.click("retry the selected", "#retry-selected")
	b.wait("q1 retried, the waiting one not allowed", findJS+`__status("`+q1+`") === "PENDING"
		&& !!document.querySelector('#bulk-results li[data-id="`+q1+`"][data-outcome="done"]')
		&& !!document.querySelector('#bulk-results li[data-id="`+budget+`"][data-outcome="not_allowed"]') && __tab("CANCELLED") === "2"`, 15*time.Second)
	answer = eval[string](b, `document.querySelector('#bulk-results li[data-id="`+budget+`"]').innerText`)
	if !strings.Contains(answer, "not allowed: cannot retry a task that is PENDING") {
		t.Fatalf("the refused retry says %q", answer)
	}

	// --- a status tab; the language switch keeps it ----------------------------------------
	b.click("the Cancelled tab", `#status-tabs button[data-status="CANCELLED"]`)
	b.wait("the cancelled tasks", findJS+`__rows() === "`+q2+`,`+exports[0]+`" && __range() === "1–2 of 2" && location.search.includes("status=CANCELLED")
		&& document.querySelector('#status-tabs button[data-status="CANCELLED"]').getAttribute("aria-pressed") === "true"`, 10*time.Second)
	b.click("switch to Chinese", "#lang-switch")
	b.wait("the Chinese page, same tab", `document.documentElement.lang === "zh-CN" && location.search.includes("status=CANCELLED")
		&& document.querySelectorAll("#tasks tbody tr").length === 2 && document.querySelector("#range").textContent === "第 1–2 条，共 2 条"
		&& document.querySelector('#status-tabs button[data-status="CANCELLED"]').getAttribute("aria-pressed") === "true"`, 10*time.Second)
	words := eval[string](b, `[document.querySelector("#cancel-selected").textContent, document.querySelector("#retry-selected").textContent,
		document.querySelector('#status-tabs button[data-status=""]').textContent, document.querySelector("#q").placeholder,
		document.querySelector("#sort").selectedOptions[0].textContent, document.querySelector("#next").textContent].join("|")`)
	if words != "取消所选|重试所选|全部 22|任务编号、标题或文件名|最新创建在前|下一页" {
		t.Fatalf("the Chinese page's words: %q", words)
	}
	shot := b.screenshot("find-zh")
	b.click("back to English", "#lang-switch")
	b.wait("English, same tab", `document.documentElement.lang === "en" && location.search.includes("status=CANCELLED")`, 10*time.Second)

	b.checkNoErrorsBut(nil)
	t.Logf("screenshots: %s %s", bulkShot, shot)
}
