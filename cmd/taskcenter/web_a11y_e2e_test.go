package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/taskcenter/taskcenter/internal/testenv"
)

// Accessibility, checked by a tool: axe-core (Deque's rules engine, the one browsers' audit
// panels run) is injected into each page the way a person reaches it, in both languages, at
// desktop width and at 390 px. axe-core is installed from the npm registry, pinned, into
// data/tools/a11y by scripts/a11y.sh (which scripts/services.sh tools runs); it is never
// served by the product.

// axeImpacts are axe's impact levels, most severe first.
var axeImpacts = []string{"critical", "serious", "moderate", "minor"}

// axeViolation is one rule a page breaks, with the elements that break it.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target  string `json:"target"`
		Summary string `json:"summary"`
	} `json:"nodes"`
}

func (v axeViolation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s): %s", v.ID, v.Impact, v.Help)
	for _, n := range v.Nodes {
		fmt.Fprintf(&b, "\n      %s — %s", n.Target, strings.ReplaceAll(n.Summary, "\n", " "))
	}
	return b.String()
}

// axeSource returns axe-core's script, installed the way `make test` does (a no-op when the
// pinned version is there already); the test is skipped only when it cannot be installed
// here, as it is when chromium cannot be.
func axeSource(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("../../scripts/a11y.sh", "install").CombinedOutput()
	if err != nil {
		t.Skipf("the accessibility test needs axe-core, which could not be installed here (scripts/a11y.sh install: %v):\n%s", err, out)
	}
	path, err := exec.Command("../../scripts/a11y.sh", "path").Output()
	if err != nil {
		t.Fatalf("scripts/a11y.sh path: %v", err)
	}
	src, err := os.ReadFile(strings.TrimSpace(string(path)))
	if err != nil {
		t.Fatalf("read axe-core: %v", err)
	}
	return string(src)
}

// axe runs axe-core on the page as it is now and returns its violations by impact. The
// script is injected once per document (a navigation loses it).
func (b *browserSession) axe(source string) axeFindings {
	b.t.Helper()
	if !eval[bool](b, `typeof window.axe === "object"`) {
		b.run("inject axe-core", chromedp.Evaluate[chromedp.Void](source+"\n;undefined"))
	}
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`axe.run(document, {resultTypes: ["violations"], rules: {"target-size": {enabled: true}}}).then(r => JSON.stringify({
		passed: r.passes.length,
		review: r.incomplete.map(v => v.id + ": " + v.nodes.map(n => n.target.join(" ") + " (" + (n.any.concat(n.all, n.none).map(c => c.message).join("; ")) + ")").join(", ")),
		violations: r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
			nodes: v.nodes.map(n => ({target: n.target.join(" "), summary: n.failureSummary || ""}))}))}))`, chromedp.EvalAwaitPromise))
	if err != nil {
		b.run("run axe-core", chromedp.Func(func(context.Context, *chromedp.Target) error { return err }))
	}
	var res struct {
		Passed     int            `json:"passed"`
		Review     []string       `json:"review"`
		Violations []axeViolation `json:"violations"`
	}
	if err := json.Unmarshal([]byte(raw), &res); err != nil {
		b.t.Fatalf("axe-core's answer: %v\n%s", err, raw)
	}
	found := axeFindings{passed: res.Passed, review: res.Review, byImpact: map[string][]axeViolation{}}
	for _, v := range res.Violations {
		found.byImpact[v.Impact] = append(found.byImpact[v.Impact], v)
	}
	return found
}

// axeFindings is what axe-core found on a page: the rules it broke, by impact, and how many
// rules it passed (none passed: nothing was checked).
type axeFindings struct {
	passed   int
	review   []string // what axe-core could not decide (a person's to look at)
	byImpact map[string][]axeViolation
}

// counts is the number of rules broken at each impact, most severe first.
func (f axeFindings) counts() string {
	var counts []string
	for _, impact := range axeImpacts {
		counts = append(counts, fmt.Sprintf("%s %d", impact, len(f.byImpact[impact])))
	}
	line := strings.Join(counts, " · ") + fmt.Sprintf("  (%d rules passed, %d to review)", f.passed, len(f.review))
	for _, impact := range axeImpacts[2:] { // the milder ones are named, to look at
		for _, v := range f.byImpact[impact] {
			line += "\n      " + impact + ": " + v.ID
		}
	}
	for _, r := range f.review {
		line += "\n      to review: " + r
	}
	return line
}

// a11yPage is a page to check: where it is and what shows it has rendered what a person
// would check (its live parts filled in).
type a11yPage struct {
	name, path, ready string
}

// a11yWidths are the viewports every page is checked at.
var a11yWidths = []struct {
	name          string
	width, height int64
	mobile        bool
}{{"desktop", 1280, 900, false}, {"390px", 390, 844, true}}

// a11yChecker runs axe-core on pages and keeps what it found, per page, language and width.
type a11yChecker struct {
	b      *browserSession
	source string
	lines  []string // the counts by impact, one line per page, language and width
	severe []string // every serious or critical violation, with where it was
}

// check checks the page the browser shows, at each width, in language lang.
func (c *a11yChecker) check(name, lang string) {
	c.b.t.Helper()
	for _, w := range a11yWidths {
		opts := []chromedp.EmulateViewportOption{}
		if w.mobile {
			opts = append(opts, chromedp.EmulateScale(2), chromedp.EmulateMobile)
		}
		c.b.run("viewport "+w.name, chromedp.EmulateViewport(w.width, w.height, opts...))
		c.b.wait("the layout at "+w.name, fmt.Sprintf(`window.innerWidth === %d`, w.width), 5*time.Second)
		found := c.b.axe(c.source)
		where := fmt.Sprintf("%-22s %-2s %-7s", name, lang, w.name)
		c.lines = append(c.lines, where+"  "+found.counts())
		if found.passed == 0 {
			c.severe = append(c.severe, where+"  axe-core passed no rule: the page was not checked")
		}
		for _, impact := range axeImpacts[:2] {
			for _, v := range found.byImpact[impact] {
				c.severe = append(c.severe, where+"  "+v.String())
			}
		}
	}
	if lang == "en" { // the colours are the same in either language, at either width
		c.checkFocusRings(name)
	}
}

// focusRingJS tells, for the element the keyboard has focused, where it is in the page (a
// path of child positions), what it is, and the contrast of its focus ring with what is
// drawn just outside the ring's inner edge there (0 when it has no ring). null when the
// focus is on no element.
const focusRingJS = `(() => {
	const e = document.activeElement;
	if (!e || e === document.body || e === document.documentElement) return null;
	const rgba = s => { const m = s.match(/[\d.]+/g).map(Number); return [m[0], m[1], m[2], m.length > 3 ? m[3] : 1]; };
	const lum = c => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
		return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
	let path = "";
	for (let n = e; n.parentElement; n = n.parentElement) path = Array.prototype.indexOf.call(n.parentElement.children, n) + "/" + path;
	const cs = getComputedStyle(e), what = e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + " " +
		(e.innerText || e.value || e.getAttribute("aria-label") || e.name || "").trim().split("\n")[0].slice(0, 30);
	if (cs.outlineStyle === "none" || parseFloat(cs.outlineWidth) === 0) return [path, what, 0];
	// What the ring is drawn over: the top-most painted element just outside the element
	// (the page's background when nothing is).
	const r = e.getBoundingClientRect(), out = Math.max(parseFloat(cs.outlineOffset), 0) + parseFloat(cs.outlineWidth) / 2;
	const x = r.left - out >= 0 ? r.left - out : r.right + out, y = r.top + r.height / 2;
	let bg = rgba(getComputedStyle(document.documentElement).backgroundColor);
	for (const under of document.elementsFromPoint(x, y)) {
		if (under === e || e.contains(under)) continue;
		const c = rgba(getComputedStyle(under).backgroundColor);
		if (c[3] > 0) { bg = c; break; }
	}
	const a = lum(rgba(cs.outlineColor)), b = lum(bg);
	return [path, what, (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)];
})()`

// checkFocusRings tabs through the page as a keyboard user does and checks that each stop
// shows a focus ring with a contrast of at least 3:1 (WCAG 1.4.11) with what is around it.
func (c *a11yChecker) checkFocusRings(name string) {
	b := c.b
	b.t.Helper()
	b.run("viewport desktop", chromedp.EmulateViewport(a11yWidths[0].width, a11yWidths[0].height))
	eval[bool](b, `document.activeElement && document.activeElement.blur(), window.scrollTo(0, 0), true`)
	seen := map[string]bool{}
	first, misses := "", 0
	for range 200 {
		b.run("Tab", chromedp.KeyEvent(kb.Tab))
		stop := eval[[]any](b, `(`+focusRingJS+`) || []`)
		if len(stop) != 3 { // the focus left the page
			if misses++; len(seen) > 0 || misses > 2 {
				break // past the last stop (or, from where the focus was, past it twice)
			}
			continue
		}
		path, _ := stop[0].(string)
		what, _ := stop[1].(string)
		ratio, _ := stop[2].(float64)
		if path == first {
			break // round again
		}
		if seen[path] {
			continue // the parts of one control (a date's day, month and year)
		}
		if first == "" {
			first = path
		}
		seen[path] = true
		if ratio < 3 {
			c.severe = append(c.severe, fmt.Sprintf("%-22s en desktop  focus ring of %q: contrast %.2f:1 with what is around it, want at least 3:1", name, what, ratio))
		}
	}
	stops := len(seen)
	if stops == 0 {
		c.severe = append(c.severe, fmt.Sprintf("%-22s en desktop  no element took the keyboard's focus", name))
	}
	c.lines = append(c.lines, fmt.Sprintf("%-22s en desktop  %d tab stops, each focus ring checked for a 3:1 contrast", name, stops))
}

// visit opens each page in lang and checks it.
func (c *a11yChecker) visit(base, lang string, pages ...a11yPage) {
	c.b.t.Helper()
	htmlLang := map[string]string{"en": "en", "zh": "zh-CN"}[lang]
	for _, p := range pages {
		sep := "?"
		if strings.Contains(p.path, "?") {
			sep = "&"
		}
		c.b.run("open "+p.name+" ("+lang+")", chromedp.Navigate(base+p.path+sep+"lang="+lang))
		c.b.wait(p.name+" ("+lang+") rendered", `document.readyState === "complete" && document.documentElement.lang === "`+htmlLang+`" && (`+p.ready+`)`, 20*time.Second)
		c.check(p.name, lang)
	}
}

// Every page — the task list with tasks, empty and an admin's, a task running, succeeded,
// partially succeeded and failed, the import and export forms (and the import's refusal of a
// file), the sign-in page, the hop after the provider's sign-in, and the console's sign-in
// and sign-out pages — in English and Chinese,
// at desktop width and at 390 px, has no serious or critical accessibility violation by
// axe-core's rules (contrast, names, labels, landmarks, language). Counts by impact are
// printed per page, language and width.
func TestEveryPageIsAccessible(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("browser test")
	}
	source := axeSource(t)
	b := newBrowser(t)
	idp := companyIdP{testenv.NewIdPAt(t, "127.0.0.2")}
	vars := idp.vars()
	maps.Copy(vars, map[string]string{"TASKCENTER_WORKER_POLL_INTERVAL": "100ms"})
	e := newEnv(t, vars)
	e.seedCustomers(20)
	api := e.start("api")
	base := api.base

	// One task in each state a page shows differently: three run by a worker, one held
	// RUNNING half-way (the worker stopped, its row set as a running worker leaves it).
	worker := e.start("worker")
	messy, err := os.ReadFile("../../testdata/imports/messy-openpyxl.xlsx")
	if err != nil {
		t.Fatal(err)
	}
	partial := api.submitImport(aliceToken, "messy.xlsx", messy, nil)
	failed := api.submitImport(aliceToken, "wrong-columns.csv", []byte("code,email\r\nC1,a@b.example\r\n"), nil)
	succeeded := api.submitExport(aliceToken, map[string]any{"type": "customers", "filter": map[string]any{"city": "上海"}})
	api.waitStatus(aliceToken, partial.ID, time.Minute, "PARTIAL_SUCCESS")
	api.waitStatus(aliceToken, failed.ID, time.Minute, "FAILED")
	api.waitStatus(aliceToken, succeeded.ID, time.Minute, "SUCCESS")
	if err := worker.stop(); err != nil {
		t.Fatalf("stop the worker: %v", err)
	}
	running := api.submitExport(aliceToken, map[string]any{"type": "customers"})
	waiting := api.submitExport(aliceToken, map[string]any{"type": "customers", "filter": map[string]any{"level": "gold"}})
	cancelled := api.submitExport(aliceToken, map[string]any{"type": "tasks", "filter": map[string]any{"status": []string{"FAILED"}}})
	if res := api.do("POST", "/api/v1/tasks/"+cancelled.ID+"/cancel", aliceToken, nil); res.status != 200 {
		t.Fatalf("cancel: %d %s", res.status, res.body)
	}
	e.exec(`UPDATE tasks SET status = 'RUNNING', attempt = 1, worker = 'worker-a11y', started_at = now() - interval '1 minute',
		heartbeat_at = now(), progress_current = 40, progress_total = 100 WHERE task_no = ?`, running.ID)

	c := &a11yChecker{b: b, source: source}
	// The checker sees what it is meant to: a page without a language, with an unnamed
	// button, an image without a text and faint text breaks those rules, serious and critical.
	b.run("a page that breaks the rules", chromedp.Navigate("about:blank"), chromedp.Evaluate[chromedp.Void](
		`document.documentElement.removeAttribute("lang");
		document.body.innerHTML = '<main><button></button><img src="data:,"><p style="color:#aaa">faint</p></main>'`))
	broken := b.axe(source)
	var brokenRules []string
	for _, impact := range axeImpacts[:2] {
		for _, v := range broken.byImpact[impact] {
			brokenRules = append(brokenRules, v.ID)
		}
	}
	for _, rule := range []string{"html-has-lang", "button-name", "image-alt", "color-contrast"} {
		if !slices.Contains(brokenRules, rule) {
			t.Fatalf("axe-core did not find %s on a page made to break it: %s", rule, broken.counts())
		}
	}
	signedOut := []a11yPage{
		{"sign-in", "/login", `!!document.querySelector("#token") && !!document.querySelector("#sso")`},
		{"console sign-in", "/monitor/", `!!document.querySelector("#token")`},
		{"console sign-out", "/monitor/logout", `!!document.querySelector("#console-signout-submit")`},
	}
	detail := func(name, id, status string) a11yPage {
		return a11yPage{name, "/tasks/" + id, `document.querySelector("#task-status").dataset.status === "` + status + `" && document.querySelector("#task-facts dd")`}
	}
	alices := []a11yPage{
		{"list", "/", `document.querySelectorAll("#tasks tbody tr").length === 6 && document.querySelector("#range").innerText !== ""`},
		detail("task waiting", waiting.ID, "PENDING"),
		detail("task running", running.ID, "RUNNING"),
		detail("task cancelled", cancelled.ID, "CANCELLED"),
		detail("task succeeded", succeeded.ID, "SUCCESS"),
		{"task partly succeeded", "/tasks/" + partial.ID, `document.querySelector("#task-status").dataset.status === "PARTIAL_SUCCESS" &&
			document.querySelectorAll("#rejected-rows li").length > 0 && document.querySelectorAll("#timeline li").length > 0 && document.querySelectorAll("#log-groups li").length > 0`},
		detail("task failed", failed.ID, "FAILED"),
		{"task not found", "/tasks/tsk_NOSUCHTASK", `document.querySelector("#detail-msg").dataset.state === "not-found"`},
		{"import form", "/new/import", `!!document.querySelector("#file")`},
		{"export form", "/new/export", `!!document.querySelector("#export-form")`},
	}
	bobs := []a11yPage{{"list, empty", "/", `!!document.querySelector("#list-msg #empty-import")`}}

	for _, lang := range []string{"en", "zh"} {
		c.visit(base, lang, signedOut...)
	}
	b.signIn(base, aliceToken)
	for _, lang := range []string{"en", "zh"} {
		c.visit(base, lang, alices...)
	}
	// The import form's answer to a file that is not a spreadsheet: the problem, in red.
	notSheet := filepath.Join(t.TempDir(), "notes.xlsx")
	if err := os.WriteFile(notSheet, []byte("these are notes, not a spreadsheet\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, lang := range []string{"en", "zh"} {
		b.run("the import form ("+lang+")", chromedp.Navigate(base+"/new/import?lang="+lang), chromedp.WaitVisible(chromedp.CSS("#file")))
		b.run("pick a file that is no spreadsheet", chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{notSheet}))
		b.click("upload it", "#import-submit")
		b.wait("the refusal", `(document.querySelector("#answer")||{}).dataset.status === "415"`, 10*time.Second)
		c.check("import form, refused", lang)
	}
	b.click("sign out", "#signout")
	b.wait("the sign-in page", `location.pathname === "/login"`, 10*time.Second)
	// An admin's list: everyone's tasks, the owner column and filter, the console links.
	b.signIn(base, adminToken)
	for _, lang := range []string{"en", "zh"} {
		c.visit(base, lang, a11yPage{"list, admin", "/", `document.querySelectorAll("#tasks tbody tr").length === 6 && !!document.querySelector("#console-link")`})
	}
	b.click("sign out", "#signout")
	b.wait("the sign-in page", `location.pathname === "/login"`, 10*time.Second)
	b.signIn(base, bobToken)
	for _, lang := range []string{"en", "zh"} {
		c.visit(base, lang, bobs...)
	}
	b.click("sign out", "#signout")
	b.wait("the sign-in page", `location.pathname === "/login"`, 10*time.Second)

	// The hop after the provider's sign-in moves on at once (a meta refresh): the request it
	// moves on with is held, so the hop stays on screen while it is checked.
	for _, lang := range []string{"en", "zh"} {
		b.run("the sign-in page", chromedp.Navigate(base+"/login?next=/new/import&lang="+lang), chromedp.WaitVisible(chromedp.CSS("#sso")))
		c.checkContinue(base, lang)
		b.click("sign out", "#signout")
		b.wait("the sign-in page", `location.origin === "`+base+`" && location.pathname === "/login"`, 10*time.Second)
	}

	testReport(t, "accessibility", fmt.Sprintf("axe-core violations by impact, per page, language and width (and the focus rings checked):\n  %s\n", strings.Join(c.lines, "\n  ")))
	if len(c.severe) > 0 {
		t.Errorf("serious or critical accessibility violations:\n  %s", strings.Join(c.severe, "\n  "))
	}
	unexpected := b.errorsBut(func(p string) bool {
		// Expected: the refusal of the file that is no spreadsheet, and the task that is not
		// there, as they should be.
		return strings.Contains(p, "415") && strings.HasSuffix(p, "/api/v1/imports") ||
			strings.Contains(p, "404") && strings.HasSuffix(p, "/api/v1/tasks/tsk_NOSUCHTASK")
	})
	if len(unexpected) > 0 {
		t.Errorf("the browser reported errors:\n%s", strings.Join(unexpected, "\n"))
	}
}

// checkContinue signs in with the provider and checks the page that hands the browser on
// (a meta refresh, at once): the browser's request for the next page is answered 204 No
// Content, which leaves the hop on screen, and the next page is then opened by hand.
func (c *a11yChecker) checkContinue(base, lang string) {
	b := c.b
	b.t.Helper()
	next := base + "/new/import"
	ctx, stop := context.WithCancel(b.ctx)
	defer stop()
	held := make(chan error, 1)
	events := chromedp.Events(ctx, fetch.RequestPaused)
	go func() {
		for ev, err := range events {
			if err == nil {
				_, err = chromedp.Call(ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{RequestID: ev.RequestID, ResponseCode: 204})
			}
			held <- err
			return
		}
	}()
	if _, err := chromedp.Call(b.ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: next, RequestStage: fetch.RequestStageRequest}}}); err != nil {
		b.t.Fatalf("hold the hop's request: %v", err)
	}
	defer chromedp.Call(b.ctx, fetch.Disable, cdp.Empty{}) //nolint:errcheck
	b.click("sign in with the provider", "#sso")
	select {
	case err := <-held:
		if err != nil {
			b.t.Fatalf("hold the hop's request: %v", err)
		}
	case <-time.After(20 * time.Second):
		b.t.Fatalf("the hop after the provider's sign-in did not move on to %s", next)
	}
	b.wait("the hop", `location.origin === "`+base+`" && !!document.querySelector("#continue")`, 10*time.Second)
	c.check("continue", lang)
	if _, err := chromedp.Call(b.ctx, fetch.Disable, cdp.Empty{}); err != nil {
		b.t.Fatalf("stop holding requests: %v", err)
	}
	b.run("where the hop leads", chromedp.Navigate(next))
	b.wait("the import page, signed in", `location.pathname === "/new/import" && !!document.querySelector("#signout")`, 10*time.Second)
}
