package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// A messy import's page explains itself: the rejected rows counted by field above the first
// rejected rows, with the fields' names in the page's language; the log grouped under a
// heading per attempt, its newest lines first, earlier ones on "Load earlier lines"; and
// the whole log downloads as text.
func TestWebPageExplainsAMessyImport(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	e := newEnv(t, nil)
	p := e.start("all")
	final := p.importMessy("messy.xlsx", excelizeMessy(t))
	// A later attempt's 120 lines: more than the page's first read, so the first attempt's
	// lines are behind "Load earlier lines".
	e.exec(`INSERT INTO task_logs (task_id, attempt, level, message)
		SELECT id, 2, 'info', 'later line ' || n FROM tasks, generate_series(1, 120) n WHERE task_no = ?`, final.ID)

	b.signIn(p.base, aliceToken)
	b.run("open the import", chromedp.Navigate(p.base+"/tasks/"+final.ID))
	b.wait("the breakdown", `document.querySelectorAll("#rejected-fields li").length === 5 && !document.querySelector("#rejected-breakdown").hidden`, 15*time.Second)
	fields := eval[string](b, `Array.from(document.querySelectorAll("#rejected-fields li")).map(li => li.innerText.replace(/\s+/g, " ")).join(" · ")`)
	if fields != "code 2 · name 2 · email 1 · level 1 · phone 1" {
		t.Fatalf("rejected rows by field: %q", fields)
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

	// In Chinese the fields are named as the template names them.
	b.click("switch to Chinese", "#lang-switch")
	b.wait("the Chinese breakdown", `document.querySelectorAll("#rejected-fields li").length === 5 && document.querySelector("#rejected-breakdown h2").innerText === "按字段统计的被拒绝行"`, 15*time.Second)
	if zh := eval[string](b, `document.querySelector("#rejected-fields li").innerText.replace(/\s+/g, " ")`); zh != "客户编号 2" {
		t.Fatalf("the first field in Chinese: %q", zh)
	}
	b.checkNoErrorsBut(nil)
}
