package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/xuri/excelize/v2"
)

// The web page in a real browser: headless Chromium (Debian's chromium package, which
// `make test` installs through scripts/services.sh tools) driven by chromedp, against the
// real binary's run() with an api process and a worker process.

// chromium returns the browser to drive, installing it the way `make test` does when it is
// missing; the test is skipped only when it cannot be installed.
func chromium(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	out, err := exec.Command("../../scripts/services.sh", "tools").CombinedOutput()
	if p, lerr := exec.LookPath("chromium"); lerr == nil {
		return p
	}
	t.Skipf("the browser tests need Debian's chromium package, which could not be installed here "+
		"(scripts/services.sh tools: %v):\n%s", err, out)
	return ""
}

// browserSession is one Chromium tab with everything it reported.
type browserSession struct {
	t        *testing.T
	ctx      context.Context
	dir      string // screenshots and downloads
	mu       sync.Mutex
	problems []string // console errors, exceptions, failed loads
}

// oneBrowser lets one Chromium run at a time: the browser tests run beside the other tests
// (t.Parallel) without two browsers contending for the machine.
var oneBrowser = make(chan struct{}, 1)

// errorsBut returns what the browser reported (console errors, exceptions, failed loads) but
// for the errors the test meant to cause, which expected accepts (nil: it meant none).
func (b *browserSession) errorsBut(expected func(problem string) bool) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var unexpected []string
	for _, p := range b.problems {
		if expected == nil || !expected(p) {
			unexpected = append(unexpected, p)
		}
	}
	return unexpected
}

// checkNoErrorsBut fails the test if the browser reported an error that expected does not
// accept (nil: any error fails it).
func (b *browserSession) checkNoErrorsBut(expected func(problem string) bool) {
	b.t.Helper()
	if unexpected := b.errorsBut(expected); len(unexpected) > 0 {
		b.t.Fatalf("the browser reported errors:\n%s", strings.Join(unexpected, "\n"))
	}
}

// newBrowser opens this test's Chromium tab, one browser at a time. A -short run skips the test
// here: browser tests are the slow ones.
func newBrowser(t *testing.T) *browserSession {
	t.Helper()
	if testing.Short() {
		t.Skip("browser test")
	}
	oneBrowser <- struct{}{}
	t.Cleanup(func() { <-oneBrowser }) // registered first, so it runs after the browser has closed
	exe := chromium(t)
	// The screenshots stay after the test so the printed ones can be looked at: under
	// TASKCENTER_TEST_REPORTS when it is set (`make test` empties it before each run),
	// otherwise in the temp dir when the test failed. The browser profile and downloads go.
	reports := os.Getenv("TASKCENTER_TEST_REPORTS")
	if reports != "" {
		reports = filepath.Join(reports, "browser")
		os.MkdirAll(reports, 0o755) //nolint:errcheck // MkdirTemp says what is wrong
	}
	dir, err := os.MkdirTemp(reports, "taskcenter-web-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if reports == "" && !t.Failed() {
			os.RemoveAll(dir) //nolint:errcheck
			return
		}
		os.RemoveAll(filepath.Join(dir, "profile"))   //nolint:errcheck
		os.RemoveAll(filepath.Join(dir, "downloads")) //nolint:errcheck
	})
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox, // as root Chromium refuses to start without it
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("lang", "en-US"),
		chromedp.UserDataDir(filepath.Join(dir, "profile")),
		chromedp.WindowSize(1920, 1080),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	b := &browserSession{t: t, ctx: ctx, dir: dir}
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	b.watchConsole(ctx, "")
	downloads := filepath.Join(dir, "downloads")
	os.MkdirAll(downloads, 0o755) //nolint:errcheck
	if _, err := chromedp.CallBrowser(ctx, browser.SetDownloadBehavior,
		browser.SetDownloadBehaviorParams{Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: downloads}); err != nil {
		t.Fatalf("set the download dir: %v", err)
	}
	return b
}

// run runs actions, failing the test (with a screenshot) when they fail.
func (b *browserSession) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		shot := b.screenshot("failure")
		text, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 2000) : ""`))
		b.t.Fatalf("%s: %v\nscreenshot: %s\npage text:\n%s", what, err, shot, text)
	}
}

// wait polls a JavaScript condition until it holds. Errors (a navigation in between, a
// page not there yet) count as "not yet".
func (b *browserSession) wait(what, cond string, within time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+cond+")"))
		cancel()
		if err == nil && ok {
			return
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	b.run("wait for "+what, chromedp.Func(func(context.Context, *chromedp.Target) error {
		return fmt.Errorf("still false after %s (last error %v): %s", within, last, cond)
	}))
}

// clickPointJS is where a person would click the element sel, once it is there to be
// clicked: shown, enabled, in the window (it is scrolled there), standing still (its box
// the same as at the previous look) and not covered (the element at its middle is it or
// inside it). Until then it is null.
func clickPointJS(sel string) string {
	q, _ := json.Marshal(sel)
	return `(() => { const sel = ` + string(q) + `, e = document.querySelector(sel);
		if (!e || e.disabled || !e.checkVisibility({visibilityProperty: true})) return null;
		const r = e.getBoundingClientRect();
		if (r.width === 0 || r.height === 0) return null;
		if (r.top < 0 || r.left < 0 || r.bottom > innerHeight || r.right > innerWidth) { e.scrollIntoView({block: "center", inline: "center"}); return null; }
		const seen = (window.__clickBox ||= {}), box = [r.left, r.top, r.width, r.height].join(" ");
		if (seen[sel] !== box) { seen[sel] = box; return null; }
		const x = r.left + r.width / 2, y = r.top + r.height / 2, hit = document.elementFromPoint(x, y);
		if (!hit || !e.contains(hit)) return null;
		delete seen[sel];
		return [x, y]; })()`
}

// clickPoint waits until the element sel can be clicked and returns where (see clickPointJS).
// The element is looked up by its selector at each look, so a live update that changes the
// page in between is no matter; the wait starts again when the page it watched is left for
// another (a navigation still under way).
func clickPoint(ctx context.Context, t *chromedp.Target, sel string) (x, y float64, err error) {
	for {
		pt, err := chromedp.Poll[[]float64](clickPointJS(sel), chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(0))(ctx, t)
		if browserSays(err, "Execution context was destroyed.", "Cannot find context with specified id") {
			continue
		}
		if err != nil {
			return 0, 0, fmt.Errorf("wait for %s to be there to click: %w", sel, err)
		}
		if len(pt) != 2 {
			return 0, 0, fmt.Errorf("the click point of %s is %v", sel, pt)
		}
		return pt[0], pt[1], nil
	}
}

// clickShown clicks the element sel the way a person does: once it is there to be clicked
// (see clickPointJS), with the browser's mouse at its middle. It holds no node of the page
// between the look and the click, so an element replaced by a live update cannot make it
// fail; it clicks the element the selector finds at the moment of the click.
func clickShown(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		x, y, err := clickPoint(ctx, t, sel)
		if err != nil {
			return err
		}
		_, err = chromedp.MouseClickXY(x, y)(ctx, t)
		return err
	})
}

// browserSays tells whether err is the browser answering one of messages.
func browserSays(err error, messages ...string) bool {
	var e *cdproto.Error
	return errors.As(err, &e) && slices.Contains(messages, e.Message)
}

// click clicks what a person would, failing the test when it cannot be clicked.
func (b *browserSession) click(what, sel string) {
	b.t.Helper()
	b.run(what, clickShown(sel))
}

// eval evaluates js and returns its value.
func eval[T any](b *browserSession, js string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](js))
	if err != nil {
		b.run("evaluate "+js, chromedp.Func(func(context.Context, *chromedp.Target) error { return err }))
	}
	return v
}

func (b *browserSession) screenshot(name string) string {
	// The picture once the page has stopped moving (the progress bar's width is a
	// transition); a page that keeps moving is taken as it is after a few seconds.
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	chromedp.Run(ctx, chromedp.Poll[bool](`document.getAnimations().every(a => a.playState !== "running")`, //nolint:errcheck
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(4*time.Second)))
	cancel()
	buf, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		return "(no screenshot: " + err.Error() + ")"
	}
	p := filepath.Join(b.dir, name+".png")
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		return "(no screenshot: " + err.Error() + ")"
	}
	return p
}

// signIn opens the page and signs in with token, by keyboard.
func (b *browserSession) signIn(base, token string) {
	b.t.Helper()
	b.run("open the sign-in page", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	b.run("sign in", chromedp.SendKeys(chromedp.CSS("#token"), token+"\r"))
	b.wait("the task list", `location.pathname === "/" && !!document.querySelector("#tasks")`, 10*time.Second)
}

// download waits for a finished file in the download dir named like suffix and returns it.
func (b *browserSession) download(suffix string, seen map[string]bool) string {
	b.t.Helper()
	dir := filepath.Join(b.dir, "downloads")
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			n := e.Name()
			if !seen[n] && strings.HasSuffix(n, suffix) {
				seen[n] = true
				return filepath.Join(dir, n)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.t.Fatalf("no %s download arrived in %s", suffix, dir)
	return ""
}

func isXLSX(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 100 || string(b[:2]) != "PK" {
		t.Fatalf("%s is not an .xlsx (%d bytes, %v)", path, len(b), err)
	}
}

func TestWebPageInChromium(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	e := newEnv(t, map[string]string{
		"TASKCENTER_IMPORT_BATCH_SIZE":    "2",   // the messy file's 15 rows in 8 batches: the bar moves
		"TASKCENTER_EXPORT_PAGE_SIZE":     "100", // a long export stays RUNNING long enough to cancel
		"TASKCENTER_CLEANUP_SPEC":         "@every 1h",
		"TASKCENTER_WORKER_POLL_INTERVAL": "100ms",
	})
	e.seedCustomers(100_000)
	api := e.start("api")
	base := api.base
	seen := map[string]bool{}

	// --- sign in (keyboard only), import the messy file, watch it finish live -------------
	b.signIn(base, aliceToken)
	b.run("open the import page", chromedp.Navigate(base+"/new/import"), chromedp.WaitVisible(chromedp.CSS("#file")))
	messy, _ := filepath.Abs("../../testdata/imports/messy-openpyxl.xlsx")
	b.run("pick the file", chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{messy}))
	b.click("upload it", "#import-submit")
	b.wait("the answer in place", `(document.querySelector("#answer")||{}).dataset.status === "202"`, 15*time.Second)
	var answer string
	answer = evalInto(b, `document.querySelector("#answer").innerText`, answer)
	if !strings.Contains(answer, "Accepted") {
		t.Fatalf("import answer %q", answer)
	}
	b.wait("the new task to open", `location.pathname.startsWith("/tasks/") && document.querySelector("#task-status").dataset.status === "PENDING"`, 15*time.Second)
	var importID string
	importID = evalInto(b, `location.pathname.slice("/tasks/".length)`, importID)
	// Record every value the bar shows from now on, and mark the page: a reload would lose both.
	eval[bool](b, `window.__bar = [document.querySelector("#task-progress").getAttribute("aria-valuenow")]; window.__same = true;
		new MutationObserver(() => { const v = document.querySelector("#task-progress").getAttribute("aria-valuenow");
			if (window.__bar[window.__bar.length-1] !== v) window.__bar.push(v); })
		.observe(document.querySelector("#task-progress"), {attributes: true}); true`)
	e.start("worker")
	b.wait("PARTIAL_SUCCESS at 100% without a reload", `window.__same === true && document.querySelector("#task-status").dataset.status === "PARTIAL_SUCCESS"
		&& document.querySelector("#task-progress").getAttribute("aria-valuenow") === "100"`, 60*time.Second)
	var bar []string
	bar = evalInto(b, `window.__bar`, bar)
	t.Logf("the progress bar showed %v", bar)
	if len(bar) < 2 || bar[0] != "0" || bar[len(bar)-1] != "100" {
		t.Fatalf("the bar did not move from 0 to 100 by itself: %v", bar)
	}
	b.wait("the rejected rows and the attempt", `document.querySelectorAll("#rejected-rows li").length > 0 && document.querySelectorAll("#timeline li").length > 0`, 10*time.Second)
	var rejected string
	rejected = evalInto(b, `document.querySelector("#rejected-rows").innerText`, rejected)
	if !strings.Contains(rejected, "phone: must be 11 digits starting with 1") {
		t.Fatalf("rejected rows:\n%s", rejected)
	}
	b.wait("the attempt in the timeline", `!!document.querySelector("#timeline li .chip")`, 10*time.Second)
	detailShot := b.screenshot("detail-1080p")

	// The error report link downloads the report.
	b.click("open the error report", "#error-report")
	isXLSX(t, b.download(".xlsx", seen))

	// --- export and download ---------------------------------------------------------------
	b.run("open the export page", chromedp.Navigate(base+"/new/export"), chromedp.WaitVisible(chromedp.CSS("#export-form")))
	b.run("type 上海", chromedp.SendKeys(chromedp.CSS(`input[name="city"]`), "上海"))
	b.click("export the customers of 上海", "#export-submit")
	b.wait("the export to finish", `location.pathname.startsWith("/tasks/") && document.querySelector("#task-status").dataset.status === "SUCCESS"
		&& !!document.querySelector("#download")`, 60*time.Second)
	// The result says its size, its rows and until when it may be downloaded.
	b.wait("the result's facts", `(() => { const r = document.querySelector('#task-facts dd[data-fact="result"]');
		return !!r && /\d+(\.\d)? (B|KB|MB)/.test(r.innerText) && /[\d,]+ rows/.test(r.innerText) && r.innerText.includes("download until") && /Z$/.test(r.title); })()`, 10*time.Second)
	b.click("download the result", "#download")
	isXLSX(t, b.download(".xlsx", seen))

	// Once the result has expired the page offers to export again (the download answers 410).
	exportID := evalInto(b, `location.pathname.slice("/tasks/".length)`, "")
	e.exec(`UPDATE tasks SET result_expires_at = now() - interval '1 minute' WHERE task_no = ?`, exportID)
	b.run("reload the expired export", chromedp.Reload())
	b.wait("expired — export again", `!!document.querySelector("#export-again") && !document.querySelector("#download")`, 10*time.Second)
	b.click("export again", "#export-again")
	b.wait("the new export to finish", `location.pathname !== "/tasks/`+exportID+`" && location.pathname.startsWith("/tasks/")
		&& document.querySelector("#task-status").dataset.status === "SUCCESS" && !!document.querySelector("#download")`, 60*time.Second)

	// --- cancel a running export, then retry it ------------------------------------------
	b.run("open the export page", chromedp.Navigate(base+"/new/export"), chromedp.WaitVisible(chromedp.CSS("#export-form")))
	b.click("export every customer", "#export-submit")
	b.wait("the long export to run", `location.pathname.startsWith("/tasks/") && document.querySelector("#task-status").dataset.status === "RUNNING" && !!document.querySelector("#cancel")`, 60*time.Second)
	// While it runs the page says its rate and when it should be done (the API's figures).
	b.wait("its rate and ETA", `(() => { const s = document.querySelector('#task-facts dd[data-fact="speed"]');
		return !!s && /[\d,]+ rows\/s/.test(s.innerText) && s.innerText.includes("done in"); })()`, 30*time.Second)
	b.click("cancel it", "#cancel")
	b.wait("the cancel acknowledged", `document.querySelector("#action-msg").innerText.startsWith("Cancel requested") || document.querySelector("#task-status").dataset.status === "CANCELLED"`, 30*time.Second)
	// After the cancelled event the page reads the task again and says who cancelled it,
	// above the buttons; a person clicks Retry once the page shows that.
	// The "cancel requested" message belongs to the RUNNING status it was said in: gone once
	// the task is CANCELLED.
	b.wait("CANCELLED, live, and by whom", `document.querySelector("#task-status").innerText === "Cancelled" && !!document.querySelector("#retry")
		&& document.querySelector("#task-cancelled-by").innerText.startsWith("Cancelled by alice") && document.querySelector("#action-msg").innerText === ""`, 60*time.Second)
	b.click("retry it", "#retry")
	b.wait("the retry to run and finish", `document.querySelector("#task-status").dataset.status === "SUCCESS"`, 120*time.Second)
	var attempts int
	attempts = evalInto(b, `document.querySelectorAll("#timeline li").length`, attempts)
	if attempts < 2 {
		t.Fatalf("the timeline shows %d attempts after a cancel and a retry", attempts)
	}

	// --- the list, at 1080p and at phone width --------------------------------------------
	b.run("open the list", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#tasks tbody tr")))
	var rows int
	rows = evalInto(b, `document.querySelectorAll("#tasks tbody tr").length`, rows)
	if rows != 4 {
		t.Fatalf("alice's list has %d rows, want 4", rows)
	}
	listShot := b.screenshot("list-1080p")
	b.run("phone width", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	b.wait("the list to fit a phone", `document.documentElement.scrollWidth <= window.innerWidth + 1`, 5*time.Second)
	phoneShot := b.screenshot("list-phone")
	b.run("back to 1080p", chromedp.EmulateViewport(1920, 1080))

	// --- 中文 ------------------------------------------------------------------------------
	b.click("switch to Chinese", "#lang-switch")
	b.wait("the Chinese list", `document.documentElement.lang === "zh-CN" && document.querySelectorAll("#tasks tbody tr").length === 4`, 10*time.Second)
	var chips string
	chips = evalInto(b, `Array.from(document.querySelectorAll("#tasks .chip")).map(c => c.innerText).join(",")`, chips)
	if !strings.Contains(chips, "部分成功") {
		t.Fatalf("Chinese status chips: %s", chips)
	}
	b.run("open the import in Chinese", chromedp.Navigate(base+"/tasks/"+importID))
	b.wait("the Chinese detail", `document.querySelector("#task-status").innerText === "部分成功" && document.querySelectorAll("#rejected-rows li").length > 0`, 10*time.Second)
	rejected = evalInto(b, `document.querySelector("#rejected-rows").innerText`, rejected)
	if !strings.Contains(rejected, "手机号：必须是以 1 开头的 11 位数字") || !strings.Contains(rejected, "第 ") {
		t.Fatalf("Chinese rejected rows:\n%s", rejected)
	}
	zhShot := b.screenshot("detail-zh")
	// An export from the Chinese page comes in Chinese: its sheet, its headers, its levels.
	b.run("the Chinese export form", chromedp.Navigate(base+"/new/export"), chromedp.WaitVisible(chromedp.CSS("#export-form")))
	b.run("type 上海", chromedp.SendKeys(chromedp.CSS(`input[name="city"]`), "上海"))
	b.click("export them", "#export-submit")
	b.wait("the Chinese export to finish", `location.pathname.startsWith("/tasks/") && document.querySelector("#task-status").dataset.status === "SUCCESS"
		&& !!document.querySelector("#download")`, 60*time.Second)
	b.click("download it", "#download")
	zhFile := b.download(".xlsx", seen)
	isXLSX(t, zhFile)
	book, err := excelize.OpenFile(zhFile)
	if err != nil {
		t.Fatal(err)
	}
	defer book.Close()
	sheets := book.GetSheetList()
	header, err := book.GetRows(sheets[0])
	if err != nil || len(header) < 2 || sheets[0] != "数据" || !slices.Equal(header[0][:3], []string{"客户编号", "客户名称", "手机号"}) {
		t.Fatalf("the export from the Chinese page: sheets %q, first rows %q (%v)", sheets, header[:min(2, len(header))], err)
	}
	b.click("back to English", "#lang-switch")
	b.wait("English", `document.documentElement.lang === "en"`, 10*time.Second)

	// --- another user's task is "not found" ---------------------------------------------
	b.click("sign out", "#signout")
	b.wait("the sign-in page", `location.pathname === "/login" && !!document.querySelector("#token")`, 10*time.Second)
	b.signIn(base, bobToken)
	b.run("open alice's task as bob", chromedp.Navigate(base+"/tasks/"+importID))
	b.wait("not found", `(document.querySelector("#detail-msg")||{}).dataset && document.querySelector("#detail-msg").dataset.state === "not-found"`, 10*time.Second)
	var msg string
	msg = evalInto(b, `document.querySelector("#detail-msg").innerText + "|" + document.querySelector("#detail").hidden`, msg)
	if !strings.HasPrefix(msg, "Not found") || !strings.HasSuffix(msg, "|true") {
		t.Fatalf("bob on alice's task: %q", msg)
	}
	b.run("bob's list", chromedp.Navigate(base+"/"), chromedp.WaitReady(chromedp.CSS("#tasks")))
	b.wait("bob's empty list", `document.querySelector("#list-msg").innerText !== "" && document.querySelectorAll("#tasks tbody tr").length === 0`, 10*time.Second)

	// --- an admin sees everyone's, with an owner column and the console link --------------
	b.click("sign out", "#signout")
	b.wait("the sign-in page", `location.pathname === "/login" && !!document.querySelector("#token")`, 10*time.Second)
	b.signIn(base, adminToken)
	b.wait("every task, with owners", `document.querySelectorAll("#tasks tbody tr").length === 5 && !!document.querySelector("#console-link")
		&& document.querySelector("#tasks thead").innerText.includes("Owner")`, 10*time.Second)

	// --- no console errors, beyond the 404 bob was meant to get ---------------------------
	b.checkNoErrorsBut(func(p string) bool {
		return strings.Contains(p, "/api/v1/tasks/"+importID) && strings.Contains(p, "404")
	})
	testReport(t, "screenshots", fmt.Sprintf("web page screenshots:\n  list (1080p):  %s\n  list (phone):  %s\n  detail:        %s\n  detail (中文): %s\n", listShot, phoneShot, detailShot, zhShot))
}

// evalInto is eval with the type of an existing variable.
func evalInto[T any](b *browserSession, js string, _ T) T {
	b.t.Helper()
	return eval[T](b, js)
}

// watchConsole records every console error and uncaught exception of the tab behind ctx as a
// problem of b, each prefixed with prefix (the tab's name, or nothing for the first tab).
func (b *browserSession) watchConsole(ctx context.Context, prefix string) {
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.mu.Lock()
				b.problems = append(b.problems, prefix+m.String()+" "+m.URL)
				b.mu.Unlock()
			}
		}
	}()
}

// problemCount is how many problems the browser has reported so far.
func (b *browserSession) problemCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.problems)
}

// problemsSince are the problems reported after the first n.
func (b *browserSession) problemsSince(n int) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.problems[n:])
}

// netWatch holds what the tab requested and what failed to load, since watchNetwork.
type netWatch struct {
	mu               sync.Mutex
	requests, failed []string
}

// watchNetwork records every URL the tab requests and every load that fails (a poll cut
// short by the next navigation is not a failure).
func (b *browserSession) watchNetwork() *netWatch {
	b.t.Helper()
	if _, err := chromedp.Call(b.ctx, network.Enable, network.EnableParams{}); err != nil {
		b.t.Fatalf("watch the network: %v", err)
	}
	n := &netWatch{}
	sent := chromedp.Events(b.ctx, network.RequestWillBeSent)
	failures := chromedp.Events(b.ctx, network.LoadingFailed)
	go func() {
		for ev, err := range sent {
			if err != nil {
				return
			}
			n.mu.Lock()
			n.requests = append(n.requests, ev.Request.URL)
			n.mu.Unlock()
		}
	}()
	go func() {
		for ev, err := range failures {
			if err != nil {
				return
			}
			if ev.Canceled {
				continue
			}
			n.mu.Lock()
			n.failed = append(n.failed, ev.ErrorText+" "+string(ev.Type))
			n.mu.Unlock()
		}
	}()
	return n
}

// seen returns copies of the requests and failed loads recorded so far.
func (n *netWatch) seen() (requests, failed []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.requests), slices.Clone(n.failed)
}

// leaving are the requests of urls that go to another host than base's (data: URLs stay).
func leaving(urls []string, base string) []string {
	b, _ := url.Parse(base)
	var out []string
	for _, r := range urls {
		u, err := url.Parse(r)
		if err != nil || (u.Scheme != "data" && u.Scheme != "blob" && u.Host != b.Host) {
			out = append(out, r)
		}
	}
	return out
}

// testReport prints what a browser test measured (its figures per page, its screenshots) and,
// when TASKCENTER_TEST_REPORTS names a directory, also writes it there as name.txt:
// `make test` prints those files after the suite, since go test shows a passing package's
// output only with -v.
func testReport(t *testing.T, name, text string) {
	t.Helper()
	fmt.Print(text)
	if dir := os.Getenv("TASKCENTER_TEST_REPORTS"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Errorf("test report %s: %v", name, err)
			return
		}
		if err := os.WriteFile(filepath.Join(dir, name+".txt"), []byte(text), 0o644); err != nil { //nolint:gosec // a report for people
			t.Errorf("test report %s: %v", name, err)
		}
	}
}
