package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/taskcenter/taskcenter/client"
	"github.com/taskcenter/taskcenter/internal/textcheck"
)

// Exit codes.
const (
	exitSuccess = 0 // the task ended SUCCESS, or the command did what it was asked
	exitFailed  = 1 // the task ended FAILED, TIMEOUT or CANCELLED, or the request failed
	exitPartial = 2 // the task ended PARTIAL_SUCCESS
	exitUsage   = 3 // bad usage, or the token was refused
	// exitInterrupted: Ctrl-C (SIGINT) or SIGTERM stopped tc, as a shell reports a command
	// killed by SIGINT (128+2). A task being followed keeps running on the server.
	exitInterrupted = 130
)

const usage = `tc — the taskcenter command line

usage: tc [--url URL] [--token TOKEN] [--json] COMMAND [ARGS]

  import FILE [--mode upsert|insert|replace] [--sheet S] [--column H=FIELD ...] [--dry-run] [--wait]
                                                            import customers from .xlsx or .csv
  import --from ID [--column H=FIELD ...] [--mode M] [--sheet S] [--dry-run=false] [--wait]
                                                            import an earlier import's file again
  export customers|tasks [--filter k=v ...] [--wait]        export to .xlsx (-o to download when done)
  submit TYPE --params JSON [--wait]                        submit a task of another type
  ls [--search Q] [--status S,...] [--type T,...] [--sort K] [--limit N]
                                                            list your tasks, newest first
  show ID                                                   a task with its attempts and log
  watch ID                                                  follow a task to its end
  cancel ID... | retry ID...                                cancel, or run again as a new attempt
  undo ID [--wait]                                          undo a finished import (restore what it changed)
  download ID [-o FILE]                                     the result file (-o - for stdout)
  error-report ID [-o FILE]                                 an import's rejected rows as .xlsx

The server and token come from TASKCENTER_URL (default http://localhost:8080) and
TASKCENTER_TOKEN, or --url and --token. --json prints the task as JSON for scripts.
With a terminal, --wait and watch draw a progress bar with the server's rows/s and ETA (a
waiting task: its place in line and expected start); otherwise they print a line per change. ls --search finds tasks by the start of their id or part of their
title or file name; --sort is created (newest first), duration (longest first) or failed
(most rejected rows first), reversed with a leading - (-created: oldest first). cancel and
retry take several ids and say what happened to each (exit 1 unless every one was done).
import --dry-run checks everything and writes nothing; --mode replace also removes the
customers the file does not hold, only when every row was accepted. undo ID starts the undo
of an import (asked again, the same undo comes back).
Exit codes: 0 SUCCESS, 2 PARTIAL_SUCCESS, 1 FAILED, TIMEOUT or CANCELLED (or a failed
request), 3 usage or authentication error, 130 interrupted (Ctrl-C: the task keeps running;
tc watch ID follows it again).`

// env is what the command reads and writes, so tests can run it in-process.
type env struct {
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer
	tty    bool // stderr is a terminal: draw a progress bar
}

// cli is one invocation.
type cli struct {
	env
	c    *client.Client
	json bool
}

// usageError is a mistake in the command line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// helpRequested is -h or --help after a command: tc prints its usage and exits 0.
type helpRequested struct{}

func (helpRequested) Error() string { return "help requested" }

// interrupted is a wait that Ctrl-C stopped while the task goes on.
type interrupted struct{ id string }

func (e interrupted) Error() string { return "interrupted while following " + e.id }

// run executes one command line and returns the exit code.
func run(ctx context.Context, args []string, e env) int {
	t := &cli{env: e}
	code, err := t.dispatch(ctx, args)
	if errors.As(err, new(helpRequested)) {
		fmt.Fprintln(t.stdout, usage)
		return exitSuccess
	}
	if err != nil {
		return t.fail(err)
	}
	return code
}

func (t *cli) dispatch(ctx context.Context, args []string) (int, error) {
	global := flag.NewFlagSet("tc", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	base := global.String("url", cmp.Or(t.getenv("TASKCENTER_URL"), "http://localhost:8080"), "server URL")
	token := global.String("token", t.getenv("TASKCENTER_TOKEN"), "bearer token")
	global.BoolVar(&t.json, "json", false, "print JSON")
	if err := global.Parse(args); errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(t.stdout, usage)
		return exitSuccess, nil
	} else if err != nil {
		return 0, usagef("%v", err)
	}
	args = global.Args()
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(t.stdout, usage)
		if len(args) == 0 {
			return exitUsage, nil
		}
		return exitSuccess, nil
	}
	if slices.ContainsFunc(args[1:], func(a string) bool { return a == "-h" || a == "--help" || a == "-help" }) {
		return 0, helpRequested{}
	}
	if *token == "" {
		return 0, usagef("no token: set TASKCENTER_TOKEN or pass --token")
	}
	c, err := client.New(*base, *token, client.WithUserAgent("tc/1"))
	if err != nil {
		return 0, usagef("%v", err)
	}
	t.c = c
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "import":
		return t.importCmd(ctx, rest)
	case "export":
		return t.exportCmd(ctx, rest)
	case "submit":
		return t.submitCmd(ctx, rest)
	case "ls", "list":
		return t.lsCmd(ctx, rest)
	case "show":
		return t.showCmd(ctx, rest)
	case "watch":
		return t.watchCmd(ctx, rest)
	case "cancel", "retry":
		return t.actCmd(ctx, cmd, rest)
	case "undo":
		return t.undoCmd(ctx, rest)
	case "download", "error-report":
		return t.downloadCmd(ctx, cmd, rest)
	}
	return 0, usagef("unknown command %q; run tc help", cmd)
}

// flags is a subcommand's flag set, with --json accepted after the command too.
func (t *cli) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&t.json, "json", t.json, "print JSON")
	return fs
}

// oneOrMore, as parse's count of positional arguments, takes any number but none.
const oneOrMore = -1

// parse parses flags wherever they stand among the positional arguments and checks their
// count (or that there is one at least: oneOrMore).
func parse(fs *flag.FlagSet, args []string, positional int, what string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
			return nil, helpRequested{}
		} else if err != nil {
			return nil, usagef("%s: %v", fs.Name(), err)
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if (positional == oneOrMore && len(pos) == 0) || (positional != oneOrMore && len(pos) != positional) {
		return nil, usagef("usage: tc %s %s", fs.Name(), what)
	}
	return pos, nil
}

// multiFlag collects a repeated flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func (t *cli) importCmd(ctx context.Context, args []string) (int, error) {
	fs := t.flags("import")
	mode := fs.String("mode", "", "upsert (default), insert or replace")
	sheet := fs.String("sheet", "", "sheet to import")
	wait := fs.Bool("wait", false, "follow the task to its end")
	notify := fs.String("notify-url", "", "webhook told when the task ends")
	from := fs.String("from", "", "re-submit the file of this earlier import task (no upload)")
	var columns multiFlag
	fs.Var(&columns, "column", "HEADER=FIELD (repeatable): the file's header HEADER holds FIELD (code, name, phone, email, city, level)")
	var dryRun optionalBool
	fs.Var(&dryRun, "dry-run", "check the file without writing customers")
	positional := 1
	if slices.ContainsFunc(args, func(a string) bool {
		return a == "--from" || a == "-from" || strings.HasPrefix(a, "--from=") || strings.HasPrefix(a, "-from=")
	}) {
		positional = 0
	}
	pos, err := parse(fs, args, positional, "FILE [--mode upsert|insert|replace] [--sheet S] [--column H=FIELD ...] [--dry-run] [--wait], or --from ID [--column H=FIELD ...]")
	if err != nil {
		return 0, err
	}
	if *mode != "" && *mode != "upsert" && *mode != "insert" && *mode != "replace" {
		return 0, usagef("--mode must be upsert, insert or replace")
	}
	mapping, err := columnMapping(columns)
	if err != nil {
		return 0, err
	}
	opts := client.SubmitOptions{NotifyURL: *notify}
	if *from != "" {
		sub, err := t.c.ResubmitImport(ctx, client.ImportResubmit{FromTask: *from, Columns: mapping, Mode: *mode, Sheet: *sheet, DryRun: dryRun.value}, opts)
		if err != nil {
			return 0, err
		}
		return t.submitted(ctx, sub, *wait)
	}
	if _, err := os.Stat(pos[0]); err != nil {
		return 0, usagef("cannot read %s: %v", pos[0], errors.Unwrap(err))
	}
	imp := client.Import{Mode: *mode, Sheet: *sheet, Columns: mapping, DryRun: dryRun.value != nil && *dryRun.value}
	sub, err := t.c.SubmitImportFile(ctx, pos[0], imp, opts)
	if err != nil {
		return 0, err
	}
	return t.submitted(ctx, sub, *wait)
}

// undoCmd starts the undo of a finished import (or answers the one started before).
func (t *cli) undoCmd(ctx context.Context, args []string) (int, error) {
	fs := t.flags("undo")
	wait := fs.Bool("wait", false, "follow the undo to its end")
	pos, err := parse(fs, args, 1, "ID [--wait]")
	if err != nil {
		return 0, err
	}
	sub, err := t.c.Undo(ctx, pos[0])
	if err != nil {
		return 0, err
	}
	return t.submitted(ctx, sub, *wait)
}

// columnMapping reads --column HEADER=FIELD flags into a columns mapping; nil for none.
func columnMapping(flags []string) (map[string]string, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(flags))
	for _, f := range flags {
		header, field, ok := strings.Cut(f, "=")
		if !ok || strings.TrimSpace(header) == "" || strings.TrimSpace(field) == "" {
			return nil, usagef("--column %q: write HEADER=FIELD, e.g. --column 联系电话=phone", f)
		}
		if _, dup := out[header]; dup {
			return nil, usagef("--column names the header %q twice", header)
		}
		out[header] = strings.TrimSpace(field)
	}
	return out, nil
}

// optionalBool is a boolean flag that knows whether it was given.
type optionalBool struct{ value *bool }

func (o *optionalBool) String() string {
	if o == nil || o.value == nil {
		return ""
	}
	return strconv.FormatBool(*o.value)
}

func (o *optionalBool) Set(v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return err
	}
	o.value = &b
	return nil
}

// IsBoolFlag lets --dry-run stand alone.
func (o *optionalBool) IsBoolFlag() bool { return true }

func (t *cli) exportCmd(ctx context.Context, args []string) (int, error) {
	fs := t.flags("export")
	var filters multiFlag
	fs.Var(&filters, "filter", "k=v (repeatable): city, level, code_prefix; status, type (comma-separated), owner, created_from, created_to")
	wait := fs.Bool("wait", false, "follow the task to its end")
	out := fs.String("o", "", "with --wait, download the result to this file")
	key := fs.String("idempotency-key", "", "repeat-safe submit key")
	notify := fs.String("notify-url", "", "webhook told when the task ends")
	pos, err := parse(fs, args, 1, "customers|tasks [--filter k=v ...] [--wait] [-o FILE]")
	if err != nil {
		return 0, err
	}
	if pos[0] != "customers" && pos[0] != "tasks" {
		return 0, usagef("export customers or export tasks, not %q", pos[0])
	}
	filter := map[string]any{}
	for _, f := range filters {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return 0, usagef("--filter takes key=value, not %q", f)
		}
		if k == "status" || k == "type" {
			filter[k] = strings.Split(v, ",")
		} else {
			filter[k] = v
		}
	}
	sub, err := t.c.SubmitExport(ctx, client.Export{Type: pos[0], Filter: filter}, client.SubmitOptions{IdempotencyKey: *key, NotifyURL: *notify})
	if err != nil {
		return 0, err
	}
	code, err := t.submitted(ctx, sub, *wait || *out != "")
	if err == nil && *out != "" && (code == exitSuccess || code == exitPartial) {
		if _, err := t.download(ctx, "download", sub.Task.ID, *out); err != nil {
			return 0, err
		}
	}
	return code, err
}

func (t *cli) submitCmd(ctx context.Context, args []string) (int, error) {
	fs := t.flags("submit")
	params := fs.String("params", "{}", "the task's parameters as JSON")
	wait := fs.Bool("wait", false, "follow the task to its end")
	key := fs.String("idempotency-key", "", "repeat-safe submit key")
	notify := fs.String("notify-url", "", "webhook told when the task ends")
	pos, err := parse(fs, args, 1, "TYPE --params JSON [--wait]")
	if err != nil {
		return 0, err
	}
	if !json.Valid([]byte(*params)) {
		return 0, usagef("--params is not valid JSON: %s", *params)
	}
	sub, err := t.c.Submit(ctx, pos[0], json.RawMessage(*params), client.SubmitOptions{IdempotencyKey: *key, NotifyURL: *notify})
	if err != nil {
		return 0, err
	}
	return t.submitted(ctx, sub, *wait)
}

// submitted reports a submit and, with wait, follows the task.
func (t *cli) submitted(ctx context.Context, sub *client.Submitted, wait bool) (int, error) {
	if !wait {
		if t.json {
			return exitSuccess, t.printJSON(sub)
		}
		verb := "submitted"
		if sub.Duplicate {
			verb = "already submitted"
		}
		fmt.Fprintf(t.stdout, "%s %s (%s), %s\n", verb, sub.Task.ID, sub.Task.Type, sub.Task.Status)
		if sub.Webhook != nil && sub.Webhook.Secret != "" {
			fmt.Fprintf(t.stdout, "webhook %s secret %s (shown once)\n", sub.Webhook.ID, sub.Webhook.Secret)
		}
		return exitSuccess, nil
	}
	if !t.json {
		fmt.Fprintf(t.stderr, "%s %s (%s)\n", map[bool]string{true: "already submitted", false: "submitted"}[sub.Duplicate], sub.Task.ID, sub.Task.Type)
	}
	return t.follow(ctx, sub.Task.ID)
}

func (t *cli) watchCmd(ctx context.Context, args []string) (int, error) {
	pos, err := parse(t.flags("watch"), args, 1, "ID")
	if err != nil {
		return 0, err
	}
	return t.follow(ctx, pos[0])
}

// follow waits for the task with a progress display, prints the outcome and returns the exit
// code its status means.
func (t *cli) follow(ctx context.Context, id string) (int, error) {
	var p progress
	switch {
	case t.json:
		p = quietProgress{}
	case t.tty:
		p = newBarProgress(t.stderr)
	default:
		p = newLineProgress(t.stderr)
	}
	task, err := t.c.Wait(ctx, id, client.OnUpdate(p.update))
	p.done()
	if err != nil && ctx.Err() != nil {
		return 0, interrupted{id}
	}
	if err != nil {
		return 0, err
	}
	if t.json {
		if err := t.printJSON(task); err != nil {
			return 0, err
		}
	} else {
		t.summary(task)
	}
	return statusCode(task.Status), nil
}

func statusCode(status client.Status) int {
	switch status {
	case client.StatusSuccess:
		return exitSuccess
	case client.StatusPartialSuccess:
		return exitPartial
	}
	return exitFailed
}

// summary prints how a task ended, in one line, plus what to do next.
func (t *cli) summary(task *client.Task) {
	var took string
	if task.StartedAt != nil && task.FinishedAt != nil {
		took = " in " + task.FinishedAt.Sub(*task.StartedAt).Round(100*time.Millisecond).String()
	}
	counts := ""
	if c := task.Counts; c.Total > 0 || c.Success > 0 || c.Failed > 0 {
		counts = fmt.Sprintf(": %d rows, %d ok, %d rejected", c.Total, c.Success, c.Failed)
	} else if task.Result != nil && task.Result.Rows > 0 {
		counts = fmt.Sprintf(": %d rows", task.Result.Rows)
	}
	fmt.Fprintf(t.stdout, "%s %s %s%s%s\n", task.Status, task.ID, task.Type, counts, took)
	if task.Error != nil && task.Error.Message != "" {
		fmt.Fprintf(t.stdout, "  error %s: %s\n", task.Error.Code, task.Error.Message)
		if hint := mappingHint(task); hint != "" {
			fmt.Fprintf(t.stdout, "  map the columns: %s\n", hint)
		}
	}
	if task.Result != nil {
		if task.Type == "import:customers" {
			if s, ok := client.ImportSummaryOf(task); ok {
				fmt.Fprintf(t.stdout, "  %d inserted, %d updated, %d unchanged, %d removed\n", s.Inserted, s.Updated, s.Unchanged, s.Removed)
			}
		}
		if task.Result.DryRun {
			fmt.Fprintln(t.stdout, "  dry run: nothing was written")
		}
		if task.Result.NothingRemoved != "" {
			fmt.Fprintf(t.stdout, "  %s\n", task.Result.NothingRemoved)
		}
		for _, e := range task.Result.FirstErrors {
			fmt.Fprintf(t.stdout, "  %s\n", e)
		}
	}
	if task.Links.Undo != "" {
		fmt.Fprintf(t.stdout, "  undo: tc undo %s\n", task.ID)
	}
	if task.Links.Result != "" {
		fmt.Fprintf(t.stdout, "  download: tc download %s\n", task.ID)
	}
	if task.Links.ErrorReport != "" {
		fmt.Fprintf(t.stdout, "  rejected rows: tc error-report %s\n", task.ID)
	}
}

// mappingHint is the command that re-submits an import which failed on headers it does not
// know, with a --column for each field missing (the unknown headers in their order, as a
// guess to edit); empty for any other task.
func mappingHint(task *client.Task) string {
	var d struct {
		UnknownHeaders []string `json:"unknown_headers"`
		MissingFields  []string `json:"missing_fields"`
	}
	if task.Error == nil || len(task.Error.Details) == 0 || json.Unmarshal(task.Error.Details, &d) != nil || len(d.MissingFields) == 0 {
		return ""
	}
	cmd := "tc import --from " + task.ID
	for i, f := range d.MissingFields {
		header := "HEADER"
		if i < len(d.UnknownHeaders) {
			header = d.UnknownHeaders[i]
		}
		cmd += " --column " + quoteArg(header+"="+f)
	}
	return cmd
}

// quoteArg quotes a shell argument when it needs it.
func quoteArg(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t'\"\\$`!*?[]{}()<>|&;#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func (t *cli) lsCmd(ctx context.Context, args []string) (int, error) {
	fs := t.flags("ls")
	var status, types multiFlag
	search := fs.String("search", "", "tasks whose id starts with it, or whose title or file name holds it")
	fs.Var(&status, "status", "statuses (comma-separated or repeated)")
	fs.Var(&types, "type", "task types (comma-separated or repeated)")
	sort := fs.String("sort", "", "created, duration or failed (largest first); -created, -duration or -failed (smallest first)")
	limit := fs.Int("limit", 20, "how many tasks to show (0: all)")
	owner := fs.String("owner", "", "another user's tasks (admin)")
	if _, err := parse(fs, args, 0, "[--search Q] [--status S,...] [--type T,...] [--sort K] [--limit N]"); err != nil {
		return 0, err
	}
	opts := client.ListOptions{Search: *search, Status: textcheck.SplitList(status), Type: textcheck.SplitList(types), Owner: *owner,
		Sort: client.Sort(*sort), PageSize: 100}
	if *limit > 0 && *limit < 100 {
		opts.PageSize = *limit
	}
	var (
		tasks  []*client.Task
		total  int64
		cursor string
	)
	for {
		page, err := t.c.ListPage(ctx, opts, cursor)
		if err != nil {
			return 0, err
		}
		if cursor == "" {
			total = page.Total
		}
		for i := range page.Items {
			if *limit > 0 && len(tasks) >= *limit {
				break
			}
			tasks = append(tasks, &page.Items[i])
		}
		cursor = page.NextCursor
		if cursor == "" || len(page.Items) == 0 || (*limit > 0 && len(tasks) >= *limit) {
			break
		}
	}
	if t.json {
		return exitSuccess, t.printJSON(tasks)
	}
	fmt.Fprintf(t.stdout, "%-30s  %-16s  %-15s  %8s  %s\n", "ID", "TYPE", "STATUS", "PROGRESS", "CREATED")
	for _, task := range tasks {
		fmt.Fprintf(t.stdout, "%-30s  %-16s  %-15s  %7d%%  %s\n", task.ID, task.Type, task.Status, task.Progress.Percent,
			task.CreatedAt.Local().Format("2006-01-02 15:04:05"))
	}
	if int64(len(tasks)) < total {
		fmt.Fprintf(t.stdout, "%d of %d tasks (--limit 0 for all)\n", len(tasks), total)
	}
	return exitSuccess, nil
}

func (t *cli) showCmd(ctx context.Context, args []string) (int, error) {
	pos, err := parse(t.flags("show"), args, 1, "ID")
	if err != nil {
		return 0, err
	}
	task, err := t.c.Get(ctx, pos[0])
	if err != nil {
		return 0, err
	}
	if t.json {
		return exitSuccess, t.printJSON(task)
	}
	w := t.stdout
	fmt.Fprintf(w, "%s  %s  %s\n", task.ID, task.Type, task.Status)
	fmt.Fprintf(w, "owner %s, queue %s, attempt %d (retries %d of %d)\n", task.Owner, task.Queue, task.Attempt, task.RetryCount, task.MaxRetry)
	fmt.Fprintf(w, "progress %d/%d (%d%%), rows %d ok %d rejected %d\n", task.Progress.Current, task.Progress.Total, task.Progress.Percent,
		task.Counts.Total, task.Counts.Success, task.Counts.Failed)
	if s := speed(task, time.Now()); s != "" && task.Status == client.StatusRunning {
		fmt.Fprintf(w, "speed %s\n", s)
	}
	if l := inLine(task, time.Now()); l != "" {
		fmt.Fprintf(w, "queue %s\n", l)
	}
	fmt.Fprintf(w, "created %s", task.CreatedAt.Local().Format(time.DateTime))
	if task.FinishedAt != nil {
		fmt.Fprintf(w, ", finished %s", task.FinishedAt.Local().Format(time.DateTime))
	}
	fmt.Fprintln(w)
	if task.Error != nil {
		fmt.Fprintf(w, "error %s: %s\n", task.Error.Code, task.Error.Message)
		if hint := mappingHint(task); hint != "" {
			fmt.Fprintf(w, "map the columns: %s\n", hint)
		}
	}
	if r := task.Result; r != nil {
		// The file a result names, or an import's error report; an import that rejected
		// nothing has neither (its rows are on the line above).
		file := ""
		switch {
		case r.Name != "":
			file = fmt.Sprintf("result %s (%d rows, %d bytes)", r.Name, r.Rows, r.Size)
		case task.Links.ErrorReport != "" || (r.Expired && len(r.FirstErrors) > 0):
			file = fmt.Sprintf("error report (tc error-report %s)", task.ID)
		}
		if file != "" {
			fmt.Fprint(w, file)
			if r.Expired {
				fmt.Fprint(w, ", expired")
			} else if r.ExpiresAt != nil {
				fmt.Fprintf(w, ", until %s", r.ExpiresAt.Local().Format(time.DateTime))
			}
			fmt.Fprintln(w)
		}
		for _, e := range r.FirstErrors {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	for _, a := range task.Attempts {
		fmt.Fprintf(w, "attempt %d (%s) on %s: %s %s\n", a.Attempt, a.Trigger, a.Worker, a.Status, a.Error)
	}
	for _, l := range task.Logs {
		fmt.Fprintf(w, "  %s %-5s %s\n", l.At.Local().Format("15:04:05.000"), l.Level, l.Message)
	}
	return exitSuccess, nil
}

func (t *cli) actCmd(ctx context.Context, cmd string, args []string) (int, error) {
	ids, err := parse(t.flags(cmd), args, oneOrMore, "ID...")
	if err != nil {
		return 0, err
	}
	if len(ids) > 1 {
		return t.actMany(ctx, cmd, ids)
	}
	act := t.c.Cancel
	if cmd == "retry" {
		act = t.c.Retry
	}
	task, err := act(ctx, ids[0])
	if err != nil {
		return 0, err
	}
	if t.json {
		return exitSuccess, t.printJSON(task)
	}
	fmt.Fprintf(t.stdout, "%s %s\n", task.ID, taskState(task))
	return exitSuccess, nil
}

// taskState is a task's status in words, saying when a running task was asked to stop.
func taskState(task *client.Task) string {
	if task.CancelRequested && task.Status == client.StatusRunning {
		return "RUNNING, cancel requested: it stops at its next batch"
	}
	return string(task.Status)
}

// actMany cancels or retries several tasks, client.MaxBulk to a request, and says what
// happened to each: exit 0 when every one was done, 1 otherwise.
func (t *cli) actMany(ctx context.Context, cmd string, ids []string) (int, error) {
	act := t.c.CancelMany
	if cmd == "retry" {
		act = t.c.RetryMany
	}
	var results []client.BulkResult
	for chunk := range slices.Chunk(ids, client.MaxBulk) {
		res, err := act(ctx, chunk...)
		if err != nil {
			t.printResults(cmd, results) // what was done before the request that failed
			return 0, err
		}
		results = append(results, res...)
	}
	code := exitSuccess
	for _, r := range results {
		if r.Outcome != client.BulkDone {
			code = exitFailed
		}
	}
	if t.json {
		return code, t.printJSON(results)
	}
	t.printResults(cmd, results)
	return code, nil
}

func (t *cli) printResults(cmd string, results []client.BulkResult) {
	if t.json {
		return
	}
	for _, r := range results {
		switch {
		case r.Outcome == client.BulkDone && r.Task != nil:
			fmt.Fprintf(t.stdout, "%s %s\n", r.ID, taskState(r.Task))
		case r.Outcome == client.BulkNotFound:
			fmt.Fprintf(t.stdout, "%s not found\n", r.ID)
		default:
			fmt.Fprintf(t.stdout, "%s not %s: %s\n", r.ID, map[string]string{"cancel": "cancelled", "retry": "retried"}[cmd], r.Message)
		}
	}
}

func (t *cli) downloadCmd(ctx context.Context, cmd string, args []string) (int, error) {
	fs := t.flags(cmd)
	out := fs.String("o", "", "file to write (default: the server's file name; - for stdout)")
	pos, err := parse(fs, args, 1, "ID [-o FILE]")
	if err != nil {
		return 0, err
	}
	d, err := t.download(ctx, cmd, pos[0], *out)
	if err != nil {
		return 0, err
	}
	if t.json {
		return exitSuccess, t.printJSON(d)
	}
	return exitSuccess, nil
}

// downloadResult is what a download wrote, for --json.
type downloadResult struct {
	File    string `json:"file"`
	Size    int64  `json:"size"`
	Resumed int    `json:"resumed"`
}

// download writes a task's result or error report to out ("" : the suggested name in the
// current directory, "-": stdout). It writes to a temporary file and renames it at the end,
// so a failed download leaves no partial file under the final name.
func (t *cli) download(ctx context.Context, cmd, id, out string) (*downloadResult, error) {
	get := t.c.DownloadResult
	if cmd == "error-report" {
		get = t.c.DownloadErrorReport
	}
	if out == "-" {
		d, err := get(ctx, id, t.stdout)
		if err != nil {
			return nil, err
		}
		return &downloadResult{File: "-", Size: d.Size, Resumed: d.Resumed}, nil
	}
	dir := "."
	if out != "" {
		dir = filepath.Dir(out)
	}
	tmp, err := os.CreateTemp(dir, ".tc-download-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	d, err := get(ctx, id, tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if out == "" {
		out = filepath.Base(cmp.Or(d.Name, id+".xlsx"))
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return nil, err
	}
	if !t.json {
		fmt.Fprintf(t.stdout, "wrote %s (%d bytes)\n", out, d.Size)
	}
	return &downloadResult{File: out, Size: d.Size, Resumed: d.Resumed}, nil
}

func (t *cli) printJSON(v any) error {
	enc := json.NewEncoder(t.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// fail prints an error in words and returns its exit code.
func (t *cli) fail(err error) int {
	var ue usageError
	var p *client.Problem
	switch {
	case errors.As(err, &ue):
		fmt.Fprintln(t.stderr, "tc:", ue.msg)
		return exitUsage
	case errors.As(err, &p):
		if p.Status == http.StatusUnauthorized {
			fmt.Fprintln(t.stderr, "tc: the server refused the token: check TASKCENTER_TOKEN (or --token)")
			return exitUsage
		}
		fmt.Fprintf(t.stderr, "tc: %s\n", p.Detail)
		for _, f := range p.Errors {
			fmt.Fprintf(t.stderr, "  %s: %s\n", f.Field, f.Message)
		}
		if p.RetryAfter > 0 {
			fmt.Fprintf(t.stderr, "  try again in %s\n", p.RetryAfter)
		}
		fmt.Fprintf(t.stderr, "  (%d %s, request %s)\n", p.Status, p.Code, p.RequestID)
		if p.Status == http.StatusForbidden {
			return exitUsage
		}
		return exitFailed
	case errors.As(err, new(interrupted)):
		id := err.(interrupted).id
		fmt.Fprintf(t.stderr, "tc: stopped following %s; the task keeps running on the server.\n", id)
		fmt.Fprintf(t.stderr, "  tc watch %s    follow it again\n  tc cancel %s   stop it\n", id, id)
		return exitInterrupted
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(t.stderr, "tc: interrupted")
		return exitInterrupted
	default:
		fmt.Fprintln(t.stderr, "tc:", err)
		return exitFailed
	}
}
