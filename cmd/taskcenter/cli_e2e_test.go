package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/xuri/excelize/v2"
)

// The tc command line (cmd/tc) against a live server: built once, run as a real process the
// way a script would run it (no terminal: plain progress lines).

var (
	tcOnce sync.Once
	tcPath string
	tcErr  error
)

func tcBinary(t *testing.T) string {
	t.Helper()
	tcOnce.Do(func() {
		tcPath = filepath.Join(filepath.Dir(binary), "tc")
		out, err := exec.Command("go", "build", "-o", tcPath, "../tc").CombinedOutput()
		if err != nil {
			tcErr = err
			tcPath = string(out)
		}
	})
	if tcErr != nil {
		t.Fatalf("build tc: %v\n%s", tcErr, tcPath)
	}
	return tcPath
}

// tcRun is one run of the command line.
type tcRun struct {
	code   int
	stdout string
	stderr string
}

// tc runs the command line in dir against the process with token.
func (p *proc) tc(dir, token string, args ...string) tcRun {
	p.t.Helper()
	cmd := exec.Command(tcBinary(p.t), args...)
	cmd.Dir = dir
	// Through a validating gateway: the command line's client is held to the API's document.
	gateway, _ := validatingGateway(p.t, p.base)
	cmd.Env = []string{"TASKCENTER_URL=" + gateway, "TASKCENTER_TOKEN=" + token, "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := tcRun{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		p.t.Fatalf("run tc %v: %v", args, err)
	}
	p.t.Logf("$ tc %s\n%s%s(exit %d)", strings.Join(args, " "), r.stderr, r.stdout, r.code)
	return r
}

var taskNoPattern = regexp.MustCompile(`tsk_[A-Z0-9]+`)

func TestCLIImportWaitErrorReportAndDownload(t *testing.T) {
	t.Parallel()
	e, p := startEnv(t, nil, "all")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "customers.xlsx"), excelizeMessy(t), 0o644); err != nil {
		t.Fatal(err)
	}

	// An import with rejected rows: exit 2 and a summary line with the counts.
	r := p.tc(dir, aliceToken, "import", "customers.xlsx", "--mode", "upsert", "--wait")
	if r.code != 2 {
		t.Fatalf("import --wait: exit %d, want 2 (PARTIAL_SUCCESS)", r.code)
	}
	summary := regexp.MustCompile(`(?m)^PARTIAL_SUCCESS (tsk_[A-Z0-9]+) import:customers: \d+ rows, \d+ ok, (\d+) rejected in `).FindStringSubmatch(r.stdout)
	if summary == nil {
		t.Fatalf("no summary line in %q", r.stdout)
	}
	id, rejected := summary[1], summary[2]
	if rejected != "7" {
		t.Errorf("%s rows rejected, want the 7 bad rows of the file", rejected)
	}
	if !strings.Contains(r.stderr, id+" PENDING") && !strings.Contains(r.stderr, id+" RUNNING") && !strings.Contains(r.stderr, "submitted "+id) {
		t.Errorf("no progress lines on stderr: %q", r.stderr)
	}
	if !strings.Contains(r.stdout, "tc error-report "+id) {
		t.Errorf("the summary does not say how to get the rejected rows: %q", r.stdout)
	}

	// The error report downloads as a valid workbook listing the rejected rows.
	r = p.tc(dir, aliceToken, "error-report", id, "-o", "rejected.xlsx")
	if r.code != 0 {
		t.Fatalf("error-report: exit %d", r.code)
	}
	report, err := os.ReadFile(filepath.Join(dir, "rejected.xlsx"))
	if err != nil {
		t.Fatal(err)
	}
	if rows := readReport(t, report); len(rows) != 8 {
		t.Fatalf("error report has %d rows, want a header and 7", len(rows))
	}

	// An export, waited for, then downloaded: a valid .xlsx.
	e.seedCustomers(25)
	r = p.tc(dir, aliceToken, "export", "customers", "--filter", "code_prefix=C0000", "--wait")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "SUCCESS ") {
		t.Fatalf("export --wait: exit %d %q", r.code, r.stdout)
	}
	exportID := taskNoPattern.FindString(r.stdout)
	r = p.tc(dir, aliceToken, "download", exportID, "-o", "customers-out.xlsx")
	if r.code != 0 {
		t.Fatalf("download: exit %d", r.code)
	}
	if rows := xlsxRows(t, filepath.Join(dir, "customers-out.xlsx")); len(rows) < 10 {
		t.Fatalf("downloaded export has %d rows", len(rows))
	}

	// Scripts: --json, ls, show.
	if r = p.tc(dir, aliceToken, "--json", "show", id); r.code != 0 || !strings.Contains(r.stdout, `"status": "PARTIAL_SUCCESS"`) {
		t.Fatalf("show --json: %d %q", r.code, r.stdout)
	}
	// An import shows its error report, not an empty "result" line; an export its file.
	if r = p.tc(dir, aliceToken, "show", id); r.code != 0 || !strings.Contains(r.stdout, "error report (tc error-report "+id+")") ||
		strings.Contains(r.stdout, "result -") {
		t.Fatalf("show of an import: %d %q", r.code, r.stdout)
	}
	if r = p.tc(dir, aliceToken, "show", exportID); r.code != 0 || !strings.Contains(r.stdout, "result customers-") {
		t.Fatalf("show of an export: %d %q", r.code, r.stdout)
	}
	if r = p.tc(dir, aliceToken, "ls", "--status", "SUCCESS,PARTIAL_SUCCESS"); r.code != 0 || !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, exportID) {
		t.Fatalf("ls: %d %q", r.code, r.stdout)
	}
	// A finished task cannot be cancelled: a readable refusal and exit 1.
	if r = p.tc(dir, aliceToken, "cancel", exportID); r.code != 1 || !strings.Contains(r.stderr, "cannot cancel a task that is SUCCESS") {
		t.Fatalf("cancel a finished task: %d %q", r.code, r.stderr)
	}
	// Another user's task is not there for bob.
	if r = p.tc(dir, bobToken, "show", id); r.code != 1 || !strings.Contains(r.stderr, "no task with this id") {
		t.Fatalf("bob shows alice's task: %d %q", r.code, r.stderr)
	}
}

func TestCLIUsageAndAuthErrorsExitThree(t *testing.T) {
	t.Parallel()
	_, p := startEnv(t, nil, "api")
	dir := t.TempDir()
	r := p.tc(dir, "not-a-valid-token-at-all", "ls")
	if r.code != 3 || !strings.Contains(r.stderr, "refused the token") {
		t.Fatalf("bad token: exit %d %q", r.code, r.stderr)
	}
	if r = p.tc(dir, aliceToken, "export", "planets"); r.code != 3 || !strings.Contains(r.stderr, "export customers or export tasks") {
		t.Fatalf("bad export type: exit %d %q", r.code, r.stderr)
	}
	if r = p.tc(dir, aliceToken, "frobnicate"); r.code != 3 {
		t.Fatalf("unknown command: exit %d", r.code)
	}
	if r = p.tc(dir, aliceToken, "import", "missing.xlsx"); r.code != 3 || !strings.Contains(r.stderr, "cannot read missing.xlsx") {
		t.Fatalf("missing file: exit %d %q", r.code, r.stderr)
	}
}

func xlsxRows(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := excelize.OpenFile(path)
	if err != nil {
		t.Fatalf("%s is not a valid .xlsx: %v", path, err)
	}
	defer f.Close()
	rows, err := f.GetRows(f.GetSheetName(0))
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// tc finds and acts on several tasks against a live server, every exchange held to the API's
// document: ls searches and sorts, cancel and retry take several ids and say what happened
// to each.
func TestCLIFindsAndActsOnSeveralTasks(t *testing.T) {
	t.Parallel()
	_, p := startEnv(t, nil, "api") // no worker: the tasks wait until tc acts on them
	dir := t.TempDir()
	csv := func(i int) []byte { return fmt.Appendf(nil, "code,name,phone\nG%03d,name,13900139%03d\n", i, i) }
	march := p.submitImport(aliceToken, "march-customers.csv", csv(1), nil).ID
	april := p.submitImport(aliceToken, "april-customers.csv", csv(2), nil).ID
	other := p.submitExport(aliceToken, map[string]any{"type": "customers"}).ID

	r := p.tc(dir, aliceToken, "ls", "--search", "CUSTOMERS.CSV", "--sort", "-created", "--limit", "1")
	if r.code != 0 || !strings.Contains(r.stdout, march) || strings.Contains(r.stdout, april) || !strings.Contains(r.stdout, "1 of 2 tasks") {
		t.Fatalf("ls --search --sort: exit %d\n%s", r.code, r.stdout)
	}
	r = p.tc(dir, aliceToken, "cancel", march, april, "tsk_NOSUCHTASK")
	if r.code != 1 || !strings.Contains(r.stdout, march+" CANCELLED\n"+april+" CANCELLED\ntsk_NOSUCHTASK not found\n") {
		t.Fatalf("cancel several: exit %d\n%s", r.code, r.stdout)
	}
	r = p.tc(dir, aliceToken, "retry", march, other)
	if r.code != 1 || !strings.Contains(r.stdout, march+" PENDING\n"+other+" not retried: cannot retry a task that is PENDING\n") {
		t.Fatalf("retry several: exit %d\n%s", r.code, r.stdout)
	}
	if got := p.task(aliceToken, april).Status; got != "CANCELLED" {
		t.Fatalf("april's import is %s", got)
	}
}

// Through the real process and tc: a dry run of a replace says what it would do and writes
// nothing, the replace does it, the undo puts every customer back, and an undo of the undo is
// refused with a message saying what to do instead.
func TestCLIDryRunReplaceAndUndo(t *testing.T) {
	t.Parallel()
	e, p := startEnv(t, nil, "all")
	e.seedCustomers(5)
	dir := t.TempDir()
	file := "code,name,phone,email,city,level\n" +
		"C000001,Renamed,13800000001,c1@example.com,Shanghai,gold\n" + // updated
		"C000002,Customer 2,13800000002,c2@example.com,Shanghai,gold\n" + // unchanged
		"N000001,New,13900000001,,Hangzhou,silver\n" // inserted; C000003..5 are not in the file
	if err := os.WriteFile(filepath.Join(dir, "list.csv"), []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	const split = "1 inserted, 1 updated, 1 unchanged, 3 removed"

	r := p.tc(dir, aliceToken, "import", "list.csv", "--mode", "replace", "--dry-run", "--wait")
	if r.code != 0 || !strings.Contains(r.stdout, split) || !strings.Contains(r.stdout, "dry run: nothing was written") ||
		e.count("SELECT count(*) FROM customers") != 5 || e.count("SELECT count(*) FROM customers WHERE name = 'Renamed'") != 0 {
		t.Fatalf("dry run: exit %d %q; %d customers", r.code, r.stdout, e.count("SELECT count(*) FROM customers"))
	}

	r = p.tc(dir, aliceToken, "import", "list.csv", "--mode", "replace", "--wait")
	id := taskNoPattern.FindString(r.stdout)
	if r.code != 0 || !strings.Contains(r.stdout, split) || !strings.Contains(r.stdout, "tc undo "+id) || e.count("SELECT count(*) FROM customers") != 3 {
		t.Fatalf("replace: exit %d %q; %d customers", r.code, r.stdout, e.count("SELECT count(*) FROM customers"))
	}

	r = p.tc(dir, aliceToken, "undo", id, "--wait")
	undo := taskNoPattern.FindString(r.stdout)
	if r.code != 0 || !strings.Contains(r.stdout, "import:customers-undo") || e.count("SELECT count(*) FROM customers") != 5 ||
		e.count("SELECT count(*) FROM customers WHERE name LIKE 'Customer %'") != 5 {
		t.Fatalf("undo: exit %d %q; customers %d", r.code, r.stdout, e.count("SELECT count(*) FROM customers"))
	}

	r = p.tc(dir, aliceToken, "undo", undo)
	if r.code == 0 || !strings.Contains(r.stderr, "an undo cannot be undone; import the file again") {
		t.Fatalf("undo of the undo: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
}
