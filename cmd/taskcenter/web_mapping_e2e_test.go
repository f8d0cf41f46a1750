package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// A file whose headers the import does not know fails, and its page asks which column is
// which: the choice imports the stored file again (no upload) with the mapping. A dry run's
// page offers to run it for real, the same way.
func TestTheMappingFormImportsTheUploadedFileAgain(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	e := newEnv(t, nil)
	p := e.start("all")
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
