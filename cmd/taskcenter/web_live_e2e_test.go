package main

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The page changes in place while a task streams its progress: the row, the chip, the bar,
// the counts and the action buttons a person may be pointing at stay the same elements, so
// that a click in progress, the keyboard focus and a click right after an update all land.

// shownJS is true when the element sel is there for a person to use: shown and enabled.
func shownJS(sel string) string {
	q, _ := json.Marshal(sel)
	return `(e => !!e && !e.disabled && e.checkVisibility({visibilityProperty: true}))(document.querySelector(` + string(q) + `))`
}

// mark sets a property on each element the selectors find now; kept tells later whether
// the page still shows those very elements.
func (b *browserSession) mark(sels ...string) {
	b.t.Helper()
	q, _ := json.Marshal(sels)
	eval[bool](b, `(`+string(q)+`).forEach(s => { const e = document.querySelector(s);
		if (!e) throw new Error("nothing to mark at " + s); e.__marked = s; }); true`)
}

// replaced returns the selectors that now find another element than the one marked (or
// none).
func (b *browserSession) replaced(sels ...string) []string {
	b.t.Helper()
	q, _ := json.Marshal(sels)
	return eval[[]string](b, `(`+string(q)+`).filter(s => { const e = document.querySelector(s); return !e || e.__marked !== s; })`)
}

// countUpdates records each text the element sel shows from now on, whichever element the
// selector finds at each change of the page; updates says how many it has seen.
func (b *browserSession) countUpdates(sel string) {
	b.t.Helper()
	q, _ := json.Marshal(sel)
	eval[bool](b, `window.__shown = []; new MutationObserver(() => {
		const e = document.querySelector(`+string(q)+`), v = e && e.textContent;
		if (v && window.__shown[window.__shown.length - 1] !== v) window.__shown.push(v);
	}).observe(document.body, {subtree: true, childList: true, characterData: true, attributes: true}); true`)
}

func (b *browserSession) updates() int {
	b.t.Helper()
	return eval[int](b, `window.__shown.length`)
}

// waitUpdates waits until the page has shown n more updates than it had when asked, while
// cond (a JavaScript condition) holds all along the wait's end.
func (b *browserSession) waitUpdates(what string, n int, cond string) {
	b.t.Helper()
	from := b.updates()
	b.wait(what, `window.__shown.length >= `+strconv.Itoa(from+n)+` && (`+cond+`)`, 60*time.Second)
}

func (b *browserSession) focused(sel string) bool {
	b.t.Helper()
	q, _ := json.Marshal(sel)
	return eval[bool](b, `document.activeElement === document.querySelector(`+string(q)+`)`)
}

func TestWebPageKeepsItsControlsThroughLiveUpdates(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	e := newEnv(t, map[string]string{
		"TASKCENTER_EXPORT_PAGE_SIZE":     "100", // a progress event every few pages, for as long as the test needs
		"TASKCENTER_CLEANUP_SPEC":         "@every 1h",
		"TASKCENTER_WORKER_POLL_INTERVAL": "100ms",
	})
	e.seedCustomers(100_000)
	api := e.start("api")
	b.signIn(api.base, aliceToken)
	id := api.submitExport(aliceToken, map[string]any{"type": "customers"}).ID

	// --- the list: the row stays, its link keeps the focus and takes a click --------------
	// The worker starts once the row is marked: every update of the export comes after.
	b.run("open the list", chromedp.Navigate(api.base+"/"))
	row := `#tasks tr[data-id="` + id + `"]`
	b.wait("the new export in the list", shownJS(row)+` && document.querySelector('`+row+` .chip').innerText === "Pending"`, 15*time.Second)
	listParts := []string{row, row + " a.title", row + " .chip", row + " .progress", row + " .counts", row + " .age"}
	b.mark(listParts...)
	b.countUpdates(row + " .progress .pct")
	b.run("focus the task's link", chromedp.Focus(chromedp.CSS(row+" a.title")))
	e.start("worker")
	b.waitUpdates("the list to show the export running", 4, `document.querySelector('`+row+` .chip').innerText === "Running"`)
	if r := b.replaced(listParts...); len(r) > 0 {
		t.Fatalf("live updates replaced these parts of the row: %v (the bar showed %v)", r, eval[[]string](b, `window.__shown`))
	}
	if !b.focused(row + " a.title") {
		t.Fatalf("the task's link lost the focus to a live update")
	}
	b.click("open the task while it runs", row+" a.title")

	// --- the task page: the buttons stay, a held click and the focus survive updates -------
	b.wait("the task page, running, with Cancel", `location.pathname === "/tasks/`+id+`" && document.querySelector("#task-status").innerText === "Running" && `+
		shownJS("#cancel"), 15*time.Second)
	detailParts := []string{"#cancel", "#task-status", "#task-progress", "#task-facts .counts", "#task-facts dd:last-of-type"}
	b.mark(detailParts...)
	b.countUpdates("#task-progress .pct")
	b.run("focus Cancel", chromedp.Focus(chromedp.CSS("#cancel")))
	b.waitUpdates("the page to follow the export", 4, `document.querySelector("#task-status").innerText === "Running"`)
	if r := b.replaced(detailParts...); len(r) > 0 {
		t.Fatalf("live updates replaced these parts of the task page: %v (the bar showed %v)", r, eval[[]string](b, `window.__shown`))
	}
	if !b.focused("#cancel") {
		t.Fatalf("Cancel lost the focus to a live update")
	}

	// A person presses the mouse button on Cancel, the page updates under it, then lets go:
	// that is a click on Cancel only if the button is still the one pressed.
	var x, y float64
	b.run("find Cancel", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) (err error) {
		x, y, err = clickPoint(ctx, tg, "#cancel")
		return err
	}))
	b.run("press the mouse button on Cancel", chromedp.MouseEvent(chromedp.MousePressed, x, y, chromedp.ButtonLeft, chromedp.ClickCount(1)))
	b.waitUpdates("the page to update under the pressed button", 3, `document.querySelector("#task-status").innerText === "Running"`)
	if r := b.replaced(detailParts...); len(r) > 0 || !eval[bool](b, `document.querySelector("#cancel").matches(":active")`) {
		t.Fatalf("while Cancel was held down, live updates replaced %v (or it is no longer the button pressed)", r)
	}
	b.run("let go of the mouse button", chromedp.MouseEvent(chromedp.MouseReleased, x, y, chromedp.ButtonLeft, chromedp.ClickCount(1)))
	// After the cancelled event the page reads the task again and says who cancelled it.
	b.wait("the export cancelled, by alice, with Retry", `document.querySelector("#task-status").innerText === "Cancelled" && `+shownJS("#retry")+`
		&& document.querySelector("#task-cancelled-by").innerText.startsWith("Cancelled by alice")`, 60*time.Second)
	if got := api.task(aliceToken, id); got.Status != "CANCELLED" {
		t.Fatalf("after the held click on Cancel the export is %s", got.Status)
	}
	if !eval[bool](b, `document.querySelector("#task-progress").__marked === "#task-progress" && !document.querySelector("#cancel")`) {
		t.Fatalf("the ended task's page: the bar was replaced or Cancel is still offered")
	}

	// --- Retry, clicked as soon as it is there, then Cancel by keyboard while it runs -------
	b.click("retry it", "#retry")
	b.wait("the retry to run, with Cancel", `document.querySelector("#task-status").innerText === "Running" && `+shownJS("#cancel")+` && !document.querySelector("#retry")`, 60*time.Second)
	b.mark(detailParts...)
	b.run("focus Cancel", chromedp.Focus(chromedp.CSS("#cancel")))
	b.waitUpdates("the page to follow the retry", 4, `document.querySelector("#task-status").innerText === "Running"`)
	if r := b.replaced(detailParts...); len(r) > 0 || !b.focused("#cancel") {
		t.Fatalf("during the retry, live updates replaced %v (Cancel focused: %v)", r, b.focused("#cancel"))
	}
	b.run("press Enter on the focused Cancel", chromedp.KeyEvent("\r"))
	b.wait("the retry cancelled, with Retry", `document.querySelector("#task-status").innerText === "Cancelled" && `+shownJS("#retry"), 60*time.Second)
	got := api.task(aliceToken, id)
	if got.Status != "CANCELLED" || len(got.Attempts) < 2 {
		t.Fatalf("after Retry and Cancel: %s with %d attempts", got.Status, len(got.Attempts))
	}
	t.Logf("the bar showed %d values on the task page", b.updates())

	b.checkNoErrorsBut(nil)
}
