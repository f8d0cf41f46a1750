package main

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// waitJS reads what a person sees of a task's wait: the line under its status on the list,
// and the "In line" fact on its page.
const waitJS = `(() => {
	window.__wait = id => { const s = document.querySelector('#tasks tr[data-id="' + id + '"] .wait'); return s && !s.hidden ? s.textContent : ""; };
	window.__fact = () => { const dt = Array.from(document.querySelectorAll("#task-facts dt")).find(d => d.textContent === "In line" || d.textContent === "排队");
		return dt ? dt.nextElementSibling.textContent : ""; };
	return true; })() && `

// With no worker running, a person sees where each waiting export stands in its queue; once
// the queue has finished work lately, the page also says when the task should start, on the
// list and on the task's page, in English and in Chinese.
func TestWebPageShowsAWaitingTasksPlaceInLine(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	e, api := startEnv(t, nil, "api") // no worker: every task waits
	base := api.base
	var ids []string
	for range 3 {
		ids = append(ids, api.submitExport(aliceToken, map[string]any{"type": "customers"}).ID)
	}

	b.signIn(base, aliceToken)
	b.wait("each export's place, no start known", waitJS+`__wait("`+ids[0]+`") === "1st in line · start unknown: nothing finished in this queue lately"
		&& __wait("`+ids[2]+`") === "3rd in line · start unknown: nothing finished in this queue lately"`, 15*time.Second)
	b.screenshot("wait-list-unknown")

	// The first export ends as if a worker had run it a minute ago: the queue has a pace now.
	e.exec(`UPDATE tasks SET status = 'SUCCESS', started_at = now() - interval '2 minutes', finished_at = now() - interval '1 minute' WHERE task_no = ?`, ids[0])
	b.run("reload", chromedp.Reload())
	b.wait("the third is second, with a start", waitJS+`__wait("`+ids[0]+`") === "" && /^2nd in line · starts in ~\d+ min$/.test(__wait("`+ids[2]+`"))`, 15*time.Second)
	b.screenshot("wait-list")

	b.run("open the third export", chromedp.Navigate(base+"/tasks/"+ids[2]))
	b.wait("its page says the same", waitJS+`/^2nd in line · starts in ~\d+ min$/.test(__fact())`, 15*time.Second)
	b.run("in Chinese", chromedp.Navigate(base+"/tasks/"+ids[2]+"?lang=zh"))
	b.wait("排第 2 位", waitJS+`/^排第 2 位 · 约 \d+ 分钟后开始$/.test(__fact())`, 15*time.Second)
	b.screenshot("wait-detail-zh")
}
