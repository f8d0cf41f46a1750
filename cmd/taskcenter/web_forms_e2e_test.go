package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// A form sent twice makes one task: the export form is submitted twice at once (a double
// click, Enter twice) and then once more with another filter; the page's Idempotency-Key
// makes the first two one export, and the third a second one.
func TestTheExportFormSentTwiceMakesOneTask(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	e, api := startEnv(t, nil, "api") // no worker: the exports wait, so they can be counted
	b.signIn(api.base, aliceToken)
	b.wait("an empty list that offers the first step", `!!document.querySelector("#list-msg #empty-import") && !!document.querySelector("#list-msg #empty-export")`, 10*time.Second)
	b.run("the export form", chromedp.Navigate(api.base+"/new/export"), chromedp.WaitVisible(chromedp.CSS("#export-form")))
	b.run("submit it twice at once", chromedp.Evaluate[chromedp.Void](
		`(() => { const f = document.querySelector("#export-form");
			for (let i = 0; i < 2; i++) f.dispatchEvent(new Event("submit", { cancelable: true })); })()`))
	b.wait("the answer", `!!document.querySelector("#open-task")`, 10*time.Second)
	exports := func() int {
		return e.count(`SELECT count(*) FROM tasks WHERE type = 'export:customers' AND owner = 'alice'`)
	}
	if n := exports(); n != 1 {
		t.Fatalf("two submits of one form made %d exports, want 1", n)
	}
	b.run("the export form again", chromedp.Navigate(api.base+"/new/export"), chromedp.WaitVisible(chromedp.CSS("#export-form")))
	b.run("another filter", chromedp.SendKeys(chromedp.CSS(`input[name="city"]`), "Shanghai"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector("#export-form").requestSubmit()`))
	b.wait("the answer", `!!document.querySelector("#open-task")`, 10*time.Second)
	if n := exports(); n != 2 {
		t.Fatalf("a second export with another filter: %d exports, want 2", n)
	}

	// Its page: the filter as a person reads it, moments with their time zone (UTC on
	// hover), the id whole with a copy button.
	b.wait("the task's page", `location.pathname.startsWith("/tasks/") && document.querySelector("#task-no").innerText !== ""`, 10*time.Second)
	b.wait("the facts", `(() => {
		const dd = [...document.querySelectorAll("#task-facts dd")].map(d => [d.innerText, d.title]);
		return dd.some(([text]) => text === "City: Shanghai") &&
			dd.some(([text, title]) => / UTC([+-]\d+(:\d\d)?)?$/.test(text) && /Z$/.test(title));
	})()`, 10*time.Second)
	// Its title is the API's in the page's language, on its page, in the window's title and
	// on the list: the page has no title rule of its own.
	id := eval[string](b, `document.querySelector("#task-no").innerText`)
	for _, lang := range []string{"zh", "en"} {
		var view taskJSON
		api.do("GET", "/api/v1/tasks/"+id, aliceToken, nil, "Accept-Language", lang).json(t, &view)
		title := view.Title
		if title == "" || !strings.Contains(title, "Shanghai") {
			t.Fatalf("the API's title of %s in %s is %q", id, lang, title)
		}
		b.run("the task's page, "+lang, chromedp.Navigate(api.base+"/tasks/"+id+"?lang="+lang))
		b.wait("the task's page, "+lang, `document.querySelector("#task-no").innerText !== ""`, 10*time.Second)
		if got := eval[[]string](b, `[document.querySelector("#task-title").innerText, document.title]`); got[0] != title || got[1] != title+" · taskcenter" {
			t.Errorf("the page (%s) titles the task %q, the window %q; the API's title is %q", lang, got[0], got[1], title)
		}
		b.run("the list, "+lang, chromedp.Navigate(api.base+"/?lang="+lang))
		b.wait("the task's row", `!!document.querySelector('#tasks tr[data-id="`+id+`"] a.title')`, 10*time.Second)
		if got := eval[string](b, `document.querySelector('#tasks tr[data-id="`+id+`"] a.title').innerText`); got != title {
			t.Errorf("the list (%s) titles the task %q; the API's title is %q", lang, got, title)
		}
	}
	b.run("back to its page", chromedp.Navigate(api.base+"/tasks/"+id))
	b.wait("its page", `document.querySelector("#task-no").innerText !== ""`, 10*time.Second)
	if ws := eval[string](b, `getComputedStyle(document.querySelector("#task-no")).whiteSpace`); ws != "nowrap" {
		t.Errorf("the id may wrap: white-space %q", ws)
	}
	b.click("copy the id", "#copy-id")
	b.wait("copied", `document.querySelector("#copy-id").innerText === "Copied"`, 5*time.Second)

	// The import form sent twice at once makes one import too: an upload's key is its
	// content with the choices that change what it does (the same file again answers the
	// first task).
	file := filepath.Join(t.TempDir(), "twice.csv")
	if err := os.WriteFile(file, []byte("code,name,phone\nT001,name,13800138001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.run("the import form", chromedp.Navigate(api.base+"/new/import"), chromedp.WaitVisible(chromedp.CSS("#import-form")))
	b.run("pick the file", chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{file}))
	// The page counts the answers its uploads get, so the test waits for both.
	b.run("submit it twice at once", chromedp.Evaluate[chromedp.Void](
		`(() => { window.__answered = 0; const fetch0 = window.fetch;
			window.fetch = function (url) { const p = fetch0.apply(this, arguments);
				if (String(url).endsWith("/api/v1/imports")) p.then(() => window.__answered++, () => window.__answered++);
				return p; };
			const f = document.querySelector("#import-form");
			for (let i = 0; i < 2; i++) f.dispatchEvent(new Event("submit", { cancelable: true })); })()`))
	b.wait("both answered", `window.__answered === 2 && ["200", "202"].includes(document.querySelector("#answer").dataset.status || "")`, 30*time.Second)
	if n := e.count(`SELECT count(*) FROM tasks WHERE type = 'import:customers' AND owner = 'alice'`); n != 1 {
		t.Fatalf("two submits of one import form made %d imports, want 1", n)
	}
}
