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
	"github.com/taskcenter/taskcenter/internal/msg"
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

// usage is tc's help in lang: each command's form, what it does, and notes.
func usage(lang msg.Lang) string {
	var b strings.Builder
	b.WriteString(say(lang, "tc.usage_title", "tc", "tc", "product", "taskcenter") + "\n\n")
	b.WriteString(say(lang, "tc.usage", "synopsis", "tc [--url URL] [--token TOKEN] [--json] COMMAND [ARGS]") + "\n\n")
	const column = 60 // where what a command does starts
	for _, c := range []struct{ form, code string }{
		{"import FILE [--mode upsert|insert|replace] [--sheet S] [--column H=FIELD ...] [--dry-run] [--wait]", "tc.help.import"},
		{"import --from ID [--column H=FIELD ...] [--mode M] [--sheet S] [--dry-run=false] [--wait]", "tc.help.import_from"},
		{"export customers|tasks [--filter k=v ...] [--wait]", "tc.help.export"},
		{"submit TYPE --params JSON [--wait]", "tc.help.submit"},
		{"ls [--search Q] [--status S,...] [--type T,...] [--sort K] [--limit N]", "tc.help.ls"},
		{"show ID", "tc.help.show"},
		{"watch ID", "tc.help.watch"},
		{"cancel ID... | retry ID...", "tc.help.act"},
		{"undo ID [--wait]", "tc.help.undo"},
		{"download ID [-o FILE]", "tc.help.download"},
		{"error-report ID [-o FILE]", "tc.help.error_report"},
	} {
		line := "  " + c.form
		if len(line) >= column {
			b.WriteString(line + "\n")
			line = ""
		}
		b.WriteString(pad(line, column) + say(lang, c.code, "o", "-o", "stdout", "-o -") + "\n")
	}
	b.WriteString("\n" + msg.Render(lang, "tc.help.notes", msg.Params{
		"url_env": "TASKCENTER_URL", "default_url": "http://localhost:8080", "token_env": "TASKCENTER_TOKEN",
		"url_flag": "--url", "token_flag": "--token", "json_flag": "--json", "json": "JSON", "wait_flag": "--wait",
		"watch": "watch", "ls_search": "ls --search", "sort_flag": "--sort", "created": "created", "duration": "duration",
		"failed": "failed", "minus": "-", "minus_created": "-created", "cancel": "cancel", "retry": "retry",
		"dry_run": "import --dry-run", "replace": "--mode replace", "undo": "undo ID",
		"success": string(client.StatusSuccess), "partial": string(client.StatusPartialSuccess),
		"failed_s": string(client.StatusFailed), "timeout": string(client.StatusTimeout), "cancelled": string(client.StatusCancelled),
		"ctrl_c": "Ctrl-C", "watch_cmd": "tc watch ID", "lang_flag": "--lang en|zh", "tc": "tc", "tc_lang": "TC_LANG",
		"lc_all": "LC_ALL", "lc_messages": "LC_MESSAGES", "lang_env": "LANG", "zh_cn": "zh_CN.UTF-8"}))
	return b.String()
}

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
	lang msg.Lang // the language tc speaks to a person (langOf)
}

// usageError is a mistake in the command line, said in tc's language when it is printed.
type usageError struct{ m msg.Message }

func (e usageError) Error() string { return e.m.English() }

// usagef is a usageError saying the catalogue's code with params as name, value pairs.
func usagef(code string, nameValues ...string) error {
	return usageError{msg.New(code, nameValues...)}
}

// langFlag is --lang: it sets the language tc speaks, before or after the command.
type langFlag struct{ lang *msg.Lang }

func (f langFlag) String() string {
	if f.lang == nil {
		return ""
	}
	return string(*f.lang)
}

func (f langFlag) Set(v string) error { *f.lang = msg.ParseLang(v); return nil }

// helpRequested is -h or --help after a command: tc prints its usage and exits 0.
type helpRequested struct{}

func (helpRequested) Error() string { return "help requested" }

// interrupted is a wait that Ctrl-C stopped while the task goes on.
type interrupted struct{ id string }

func (e interrupted) Error() string { return "interrupted while following " + e.id }

// run executes one command line and returns the exit code.
func run(ctx context.Context, args []string, e env) int {
	t := &cli{env: e, lang: langOf(e.getenv)}
	code, err := t.dispatch(ctx, args)
	if errors.As(err, new(helpRequested)) {
		fmt.Fprintln(t.stdout, usage(t.lang))
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
	global.Var(langFlag{&t.lang}, "lang", "the language tc speaks: en or zh")
	if err := global.Parse(args); errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(t.stdout, usage(t.lang))
		return exitSuccess, nil
	} else if err != nil {
		return 0, usagef("tc.flag_error", "error", err.Error())
	}
	args = global.Args()
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(t.stdout, usage(t.lang))
		if len(args) == 0 {
			return exitUsage, nil
		}
		return exitSuccess, nil
	}
	if slices.ContainsFunc(args[1:], func(a string) bool { return a == "-h" || a == "--help" || a == "-help" }) {
		// The command's flags are not parsed, but its --lang still says the help's language.
		for i, a := range args[1:] {
			if v, ok := strings.CutPrefix(a, "--lang="); ok {
				t.lang = msg.ParseLang(v)
			} else if a == "--lang" && i+2 < len(args) {
				t.lang = msg.ParseLang(args[i+2])
			}
		}
		return 0, helpRequested{}
	}
	if *token == "" {
		return 0, usagef("tc.no_token", "env", "TASKCENTER_TOKEN", "flag", "--token")
	}
	c, err := client.New(*base, *token, client.WithUserAgent("tc/1"))
	if err != nil {
		return 0, usagef("tc.flag_error", "error", err.Error())
	}
	t.c = c
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "cancel", "retry":
		return t.actCmd(ctx, cmd, rest)
	case "download", "error-report":
		return t.downloadCmd(ctx, cmd, rest)
	}
	subcommands := map[string]func(context.Context, []string) (int, error){
		"import": t.importCmd, "export": t.exportCmd, "submit": t.submitCmd, "ls": t.lsCmd, "list": t.lsCmd,
		"show": t.showCmd, "watch": t.watchCmd, "undo": t.undoCmd,
	}
	if sub, ok := subcommands[cmd]; ok {
		return sub(ctx, rest)
	}
	return 0, usagef("tc.unknown_command", "cmd", strconv.Quote(cmd), "help", "tc help")
}

// flags is a subcommand's flag set, with --json accepted after the command too.
func (t *cli) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&t.json, "json", t.json, "print JSON")
	fs.Var(langFlag{&t.lang}, "lang", "the language tc speaks: en or zh")
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
			return nil, usagef("tc.flag_error_in", "cmd", fs.Name(), "error", err.Error())
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if (positional == oneOrMore && len(pos) == 0) || (positional != oneOrMore && len(pos) != positional) {
		return nil, usagef("tc.usage", "synopsis", "tc "+fs.Name()+" "+what)
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
		return 0, usagef("tc.bad_mode", "flag", "--mode", "upsert", "upsert", "insert", "insert", "replace", "replace")
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
		return 0, usagef("tc.cannot_read", "file", pos[0], "error", fmt.Sprint(errors.Unwrap(err)))
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
			return nil, usagef("tc.bad_column", "flag", "--column", "arg", strconv.Quote(f), "form", "HEADER=FIELD", "example", "--column 联系电话=phone")
		}
		if _, dup := out[header]; dup {
			return nil, usagef("tc.column_twice", "flag", "--column", "header", strconv.Quote(header))
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
		return 0, usagef("tc.bad_export", "customers", "customers", "tasks", "tasks", "what", strconv.Quote(pos[0]))
	}
	filter := map[string]any{}
	for _, f := range filters {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return 0, usagef("tc.bad_filter", "flag", "--filter", "form", "key=value", "arg", strconv.Quote(f))
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
		return 0, usagef("tc.bad_params", "flag", "--params", "json", "JSON", "params", *params)
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
		code := map[bool]string{true: "tc.already_submitted", false: "tc.submitted"}[sub.Duplicate]
		fmt.Fprintln(t.stdout, t.say(code, "id", sub.Task.ID, "type", sub.Task.Type, "status", string(sub.Task.Status)))
		if sub.Webhook != nil && sub.Webhook.Secret != "" {
			fmt.Fprintln(t.stdout, t.say("tc.webhook_secret", "id", sub.Webhook.ID, "secret", sub.Webhook.Secret))
		}
		return exitSuccess, nil
	}
	if !t.json {
		code := map[bool]string{true: "tc.already_submitted_wait", false: "tc.submitted_wait"}[sub.Duplicate]
		fmt.Fprintln(t.stderr, t.say(code, "id", sub.Task.ID, "type", sub.Task.Type))
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
		p = newBarProgress(t.stderr, t.lang)
	default:
		p = newLineProgress(t.stderr, t.lang)
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
		took = t.say("tc.took", "duration", span(t.lang, task.FinishedAt.Sub(*task.StartedAt).Round(100*time.Millisecond)))
	}
	counts := ""
	if c := task.Counts; c.Total > 0 || c.Success > 0 || c.Failed > 0 {
		counts = t.say("tc.summary_counts", "total", itoa(c.Total), "success", itoa(c.Success), "failed", itoa(c.Failed))
	} else if task.Result != nil && task.Result.Rows > 0 {
		counts = t.say("tc.summary_rows", "rows", itoa(task.Result.Rows))
	}
	fmt.Fprintln(t.stdout, t.say("tc.summary", "status", string(task.Status), "id", task.ID, "type", task.Type, "counts", counts, "took", took))
	if task.Error != nil && task.Error.Message != "" {
		fmt.Fprintf(t.stdout, "  %s\n", t.taskError(task.Error))
		if hint := mappingHint(task); hint != "" {
			fmt.Fprintf(t.stdout, "  %s\n", t.say("tc.map_hint", "command", hint))
		}
	}
	if task.Result != nil {
		if task.Type == "import:customers" {
			if s, ok := client.ImportSummaryOf(task); ok {
				fmt.Fprintf(t.stdout, "  %s\n", listOf(t.lang, t.say("import_split.inserted", "n", itoa(s.Inserted)),
					t.say("import_split.updated", "n", itoa(s.Updated)), t.say("import_split.unchanged", "n", itoa(s.Unchanged)),
					t.say("import_split.removed", "n", itoa(s.Removed))))
			}
		}
		if task.Result.DryRun {
			fmt.Fprintf(t.stdout, "  %s\n", t.say("tc.dry_run"))
		}
		if r := task.Result; r.NothingRemoved != "" {
			why := r.NothingRemoved
			if m := r.NothingRemovedMessage; m != nil {
				why = sayOr(t.lang, m.Code, m.Params, why)
			}
			fmt.Fprintf(t.stdout, "  %s\n", why)
		}
		for _, e := range t.firstErrors(task.Result) {
			fmt.Fprintf(t.stdout, "  %s\n", e)
		}
	}
	if task.Links.Undo != "" {
		fmt.Fprintf(t.stdout, "  %s\n", t.say("tc.hint_undo", "command", "tc undo "+task.ID))
	}
	if task.Links.Result != "" {
		fmt.Fprintf(t.stdout, "  %s\n", t.say("tc.hint_download", "command", "tc download "+task.ID))
	}
	if task.Links.ErrorReport != "" {
		fmt.Fprintf(t.stdout, "  %s\n", t.say("tc.hint_rejected", "command", "tc error-report "+task.ID))
	}
}

// say is the catalogue's message code in tc's language.
func (t *cli) say(code string, nameValues ...string) string { return say(t.lang, code, nameValues...) }

// firstErrors are an import's first rejected rows in tc's language: the server's English
// words, or in another language each row's message (the English where there is none).
func (t *cli) firstErrors(r *client.Result) []string {
	if t.lang == msg.EN {
		return r.FirstErrors
	}
	out := make([]string, len(r.FirstErrors))
	for i, e := range r.FirstErrors {
		out[i] = e
		if i < len(r.FirstErrorMessages) {
			out[i] = r.FirstErrorMessages[i].In(t.lang)
		}
	}
	return out
}

// taskError is why a task failed, in tc's language: its code's message with the params the
// server sent, or the server's English.
func (t *cli) taskError(e *client.TaskError) string {
	params := msg.Params{"code": e.Code, "message": e.Message}
	for k, v := range e.Params {
		if _, taken := params[k]; !taken {
			params[k] = v
		}
	}
	return msg.Render(t.lang, "tc.error", params)
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
	fmt.Fprintln(t.stdout, pad(t.say("tc.col.id"), 30)+"  "+pad(t.say("tc.col.type"), 16)+"  "+pad(t.say("tc.col.status"), 15)+"  "+
		pad(t.say("tc.col.progress"), -8)+"  "+t.say("tc.col.created"))
	for _, task := range tasks {
		fmt.Fprintln(t.stdout, pad(task.ID, 30)+"  "+pad(t.say("tc.type", "type", task.Type), 16)+"  "+
			pad(t.say("tc.status", "status", string(task.Status)), 15)+"  "+pad(itoa(task.Progress.Percent), -7)+"%  "+
			task.CreatedAt.Local().Format("2006-01-02 15:04:05"))
	}
	if int64(len(tasks)) < total {
		fmt.Fprintln(t.stdout, t.say("tc.ls_more", "shown", itoa(len(tasks)), "total", itoa(total), "all", "--limit 0"))
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
	fmt.Fprintf(w, "%s  %s  %s\n", task.ID, t.say("tc.type", "type", task.Type), t.say("tc.status", "status", string(task.Status)))
	fmt.Fprintln(w, t.say("tc.show_owner", "owner", task.Owner, "queue", task.Queue, "attempt", itoa(task.Attempt),
		"retries", itoa(task.RetryCount), "max", itoa(task.MaxRetry)))
	fmt.Fprintln(w, t.say("tc.show_progress", "current", itoa(task.Progress.Current), "total", itoa(task.Progress.Total),
		"percent", itoa(task.Progress.Percent), "rows", itoa(task.Counts.Total), "success", itoa(task.Counts.Success), "failed", itoa(task.Counts.Failed)))
	if s := speed(t.lang, task, time.Now()); s != "" && task.Status == client.StatusRunning {
		fmt.Fprintln(w, t.say("tc.show_speed", "speed", s))
	}
	if l := inLine(t.lang, task, time.Now()); l != "" {
		fmt.Fprintln(w, t.say("tc.show_queue", "where", l))
	}
	fmt.Fprint(w, t.say("tc.show_created", "at", task.CreatedAt.Local().Format(time.DateTime)))
	if task.FinishedAt != nil {
		fmt.Fprint(w, t.say("tc.show_finished", "at", task.FinishedAt.Local().Format(time.DateTime)))
	}
	fmt.Fprintln(w)
	if task.Error != nil {
		fmt.Fprintln(w, t.taskError(task.Error))
		if hint := mappingHint(task); hint != "" {
			fmt.Fprintln(w, t.say("tc.map_hint", "command", hint))
		}
	}
	if r := task.Result; r != nil {
		// The file a result names, or an import's error report; an import that rejected
		// nothing has neither (its rows are on the line above).
		file := ""
		switch {
		case r.Name != "":
			file = t.say("tc.show_result", "name", r.Name, "rows", itoa(r.Rows), "size", itoa(r.Size))
		case task.Links.ErrorReport != "" || (r.Expired && len(r.FirstErrors) > 0):
			file = t.say("tc.show_report", "command", "tc error-report "+task.ID)
		}
		if file != "" {
			fmt.Fprint(w, file)
			if r.Expired {
				fmt.Fprint(w, t.say("tc.show_expired"))
			} else if r.ExpiresAt != nil {
				fmt.Fprint(w, t.say("tc.show_until", "at", r.ExpiresAt.Local().Format(time.DateTime)))
			}
			fmt.Fprintln(w)
		}
		for _, e := range t.firstErrors(r) {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	for _, a := range task.Attempts {
		params := msg.Params{"attempt": itoa(a.Attempt), "trigger": a.Trigger, "worker": a.Worker, "status": a.Status,
			"error": a.Error, "code": a.ErrorCode}
		for k, v := range a.ErrorParams {
			if _, taken := params[k]; !taken {
				params[k] = v
			}
		}
		fmt.Fprintln(w, msg.Render(t.lang, "tc.show_attempt", params))
	}
	for _, l := range task.Logs {
		level := l.Level
		if msg.Known("tc.log_level." + level) {
			level = t.say("tc.log_level." + level)
		}
		fmt.Fprintf(w, "  %s %s %s\n", l.At.Local().Format("15:04:05.000"), pad(level, 5), sayOr(t.lang, l.Code, l.Params, l.Message))
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
	fmt.Fprintf(t.stdout, "%s %s\n", task.ID, t.taskState(task))
	return exitSuccess, nil
}

// taskState is a task's status in words, saying when a running task was asked to stop.
func (t *cli) taskState(task *client.Task) string {
	if task.CancelRequested && task.Status == client.StatusRunning {
		return t.say("tc.cancel_running", "status", string(task.Status))
	}
	return t.say("tc.status", "status", string(task.Status))
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
			fmt.Fprintf(t.stdout, "%s %s\n", r.ID, t.taskState(r.Task))
		case r.Outcome == client.BulkNotFound:
			fmt.Fprintln(t.stdout, t.say("tc.not_found", "id", r.ID))
		default:
			// A bulk refusal comes with its code and English words only: the catalogue's
			// message when it names no param, else the server's words.
			why := sayOr(t.lang, "problem."+r.Code, msg.Params{"op": cmd}, r.Message)
			fmt.Fprintln(t.stdout, t.say(map[string]string{"cancel": "tc.not_cancelled", "retry": "tc.not_retried"}[cmd], "id", r.ID, "reason", why))
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
		fmt.Fprintln(t.stdout, t.say("tc.wrote", "file", out, "size", itoa(d.Size)))
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
		fmt.Fprintln(t.stderr, "tc:", ue.m.In(t.lang))
		return exitUsage
	case errors.As(err, &p):
		if p.Status == http.StatusUnauthorized {
			fmt.Fprintln(t.stderr, "tc:", t.say("tc.token_refused", "env", "TASKCENTER_TOKEN", "flag", "--token"))
			return exitUsage
		}
		fmt.Fprintf(t.stderr, "tc: %s\n", sayOr(t.lang, "problem."+p.Code, p.Params, p.Detail))
		for _, f := range p.Errors {
			fmt.Fprintf(t.stderr, "  %s\n", t.say("field_error.at", "field", f.Field, "what", sayOr(t.lang, f.Code, f.Params, f.Message)))
		}
		if p.RetryAfter > 0 {
			fmt.Fprintf(t.stderr, "  %s\n", t.say("tc.try_again_in", "duration", span(t.lang, p.RetryAfter)))
		}
		fmt.Fprintf(t.stderr, "  %s\n", t.say("tc.problem_ref", "status", itoa(p.Status), "code", p.Code, "request", p.RequestID))
		if p.Status == http.StatusForbidden {
			return exitUsage
		}
		return exitFailed
	case errors.As(err, new(interrupted)):
		id := err.(interrupted).id
		fmt.Fprintln(t.stderr, "tc:", t.say("tc.stopped_following", "id", id))
		fmt.Fprintf(t.stderr, "  %s\n  %s\n", t.say("tc.follow_again", "command", "tc watch "+id), t.say("tc.stop_it", "command", "tc cancel "+id))
		return exitInterrupted
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(t.stderr, "tc:", t.say("tc.interrupted"))
		return exitInterrupted
	default:
		fmt.Fprintln(t.stderr, "tc:", t.say("tc.request_failed", "error", err.Error()))
		return exitFailed
	}
}
