package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/taskcenter/taskcenter/internal/testenv"
)

// The ops console in Chromium, signed in through its own form: each of its pages renders
// with no console error, no request that fails, and no request that leaves this machine
// (asynqmon as built asks Google Fonts for two style sheets and the browser for a manifest).
func TestConsoleInChromiumStaysOnThisMachine(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	e, api := startEnv(t, map[string]string{"TASKCENTER_CONSOLE_READ_ONLY": "true"}, "api") // no worker yet: the export's job waits in its queue
	var sub struct{ Task taskJSON }
	api.do("POST", "/api/v1/exports", aliceToken, map[string]any{"type": "customers"}).json(t, &sub)

	net := b.watchNetwork()

	// The console's sign-in wears the page's look and speaks its languages.
	b.run("the console's sign-in", chromedp.Navigate(api.base+"/monitor/"), chromedp.WaitVisible(chromedp.CSS(`#token`)))
	b.wait("in the page's look", `document.querySelector("h1").innerText === "Console sign-in" && !!document.querySelector("header.top #lang-switch")`, 10*time.Second)
	b.click("中文", "#lang-switch")
	b.wait("in Chinese", `document.querySelector("h1").innerText === "控制台登录"`, 10*time.Second)
	b.run("a user's token", chromedp.SendKeys(chromedp.CSS(`#token`), aliceToken+"\r"))
	b.wait("refused, in Chinese", `document.querySelector("#login-error") && document.querySelector("#login-error").innerText === "这不是管理员令牌。"`, 10*time.Second)
	b.run("sign in", chromedp.SendKeys(chromedp.CSS(`#token`), adminToken+"\r"))
	pages := [][2]string{ // path, a word the page shows once rendered
		{"/monitor/", "Queues"},
		{"/monitor/queues/exports", "exports"},
		{"/monitor/servers", "Servers"},
		{"/monitor/schedulers", "Scheduler"},
		{"/monitor/redis", "Redis"},
		{"/monitor/tasks/not-a-job", ""},
	}
	lines := []string{fmt.Sprintf("  %-26s %14s %16s %12s", "page", "console errors", "requests leaving", "failed loads")}
	for i, pg := range pages {
		path, shows := pg[0], pg[1]
		requestsBefore, failedBefore := net.seen()
		problemsBefore := b.problemCount()
		if i > 0 { // as a person would: a fresh load of the address
			b.run("open "+path, chromedp.Evaluate[chromedp.Void](`location.assign("`+path+`")`))
		}
		b.wait(path+" rendered", `location.pathname === "`+path+`" && document.readyState === "complete" && document.querySelector("#root") &&
			document.querySelector("#root").innerText.includes("`+shows+`")`, 20*time.Second)
		requests, failed := net.seen()
		lines = append(lines, fmt.Sprintf("  %-26s %14d %16d %12d", path, b.problemCount()-problemsBefore,
			len(leaving(requests[len(requestsBefore):], api.base)), len(failed)-len(failedBefore)))
	}
	testReport(t, "console", "the console's pages (want 0 everywhere; each is also checked below):\n"+strings.Join(lines, "\n")+"\n")
	b.screenshot("console")

	// From the page's task to its job in the console, for an admin signed in on the page.
	b.signIn(api.base, adminToken)
	b.run("the task", chromedp.Navigate(api.base+"/tasks/"+sub.Task.ID), chromedp.WaitVisible(chromedp.CSS("#job-link")))
	b.click("its job in the console", "#job-link")
	job := sub.Task.ID + "-a0"
	b.wait("the job's page", `location.pathname === "/monitor/queues/exports/tasks/`+job+`" &&
		document.querySelector("#root").innerText.includes("`+job+`")`, 20*time.Second)
	// A link to a task that is not there says so in the visitor's language.
	b.run("a link to no task, in Chinese", chromedp.Navigate(api.base+"/monitor/jobs/tsk_NOSUCHTASK?lang=zh"))
	b.wait("said in Chinese", `document.body.innerText.trim() === "没有任务 tsk_NOSUCHTASK。"`, 10*time.Second)

	// A queue only a disabled type uses (bench, for bench:noop) is not served: no idle lanes
	// in the console once a worker lists its queues.
	e.start("worker")
	var queues []string
	testenv.Eventually(t, 20*time.Second, "the worker to list its lanes", func() bool {
		var err error
		queues, err = e.inspector().Queues()
		return err == nil && slices.Contains(queues, "exports.resume")
	})
	for _, q := range queues {
		if strings.HasPrefix(q, "bench") {
			t.Errorf("the console lists %s, a queue no enabled type uses (queues: %v)", q, queues)
		}
	}

	requests, failed := net.seen()
	if len(requests) < len(pages) {
		t.Fatalf("saw %d requests: the network was not watched", len(requests))
	}
	for _, r := range leaving(requests, api.base) {
		t.Errorf("a request left the machine: %s", r)
	}
	for _, f := range failed {
		t.Errorf("a request failed: %s", f)
	}
	unexpected := b.errorsBut(func(p string) bool {
		// Expected: the user's token, refused as it should be, and the link to no task (a
		// plain-text answer names no icon, so the browser also asks for /favicon.ico).
		return strings.Contains(p, "401") && strings.HasSuffix(p, "/monitor/login") ||
			strings.Contains(p, "404") && (strings.Contains(p, "/monitor/jobs/tsk_NOSUCHTASK") || strings.HasSuffix(p, "/favicon.ico"))
	})
	if len(unexpected) > 0 {
		t.Errorf("the console reported:\n%s", strings.Join(unexpected, "\n"))
	}
}
