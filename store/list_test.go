package store_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/store"
)

// listed creates a PENDING task with the given owner, title and params, and returns it.
func (f *fixture) listed(owner, title, params string) *store.Task {
	f.T.Helper()
	return f.Create(store.NewTask{Type: "import:customers", Owner: owner, Queue: "imports", Title: title,
		Params: json.RawMessage(params), MaxRetry: 3, TimeoutSeconds: 60})
}

// numbers are the task numbers of tasks, in order.
func numbers(tasks []store.Task) []string {
	out := make([]string, len(tasks))
	for i, t := range tasks {
		out[i] = t.TaskNo
	}
	return out
}

// listAll pages through a listing limit tasks at a time and returns every task number in
// the order the pages gave them.
func listAll(t *testing.T, s *store.Store, f store.ListFilter, scope store.Scope, limit int) []string {
	t.Helper()
	var out []string
	f.Limit = limit
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatal("the listing does not end")
		}
		tasks, next, err := s.List(context.Background(), f, scope)
		if err != nil {
			t.Fatalf("sort %q, %d a page, page %d: %v", f.Sort, limit, pages+1, err)
		}
		out = append(out, numbers(tasks)...)
		if next == nil {
			return out
		}
		if next.Sort != cmp.Or(f.Sort, store.SortNewest) {
			t.Fatalf("a %q listing gave a cursor of %q", f.Sort, next.Sort)
		}
		f.After = next
	}
}

// Search finds a task by the start of its id, by part of its title or of its file's name,
// or by the id of one of its jobs in the ops console, whatever the case; % and _ in the term
// are themselves, never wildcards; a user's search covers only their own tasks.
func TestSearchFindsByIDTitleAndFileName(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	budget := f.listed("alice", "Import Budget 2026.xlsx", `{"filename":"Budget 2026.xlsx"}`)
	percent := f.listed("alice", "Import 100%_done.csv", `{"filename":"100%_done.csv"}`)
	lookalike := f.listed("alice", "Import 100ab done.csv", `{"filename":"100ab done.csv"}`)
	slash := f.listed("alice", `Import back\slash.csv`, `{"filename":"back\\slash.csv"}`)
	// The file name is searched even when the title does not carry it.
	renamed := f.listed("alice", "Monthly customers", `{"filename":"客户名单-三月.xlsx"}`)
	bobs := f.listed("bob", "Import Budget 2026.xlsx", `{"filename":"Budget 2026.xlsx"}`)
	export := f.listed("alice", "Customers in 上海", `{"filter":{"city":"上海"}}`)

	alice := store.Scope{Owner: "alice"}
	for _, c := range []struct {
		term  string
		scope store.Scope
		want  []*store.Task
	}{
		{"budget", alice, []*store.Task{budget}},
		{"  BUDGET 2026  ", alice, []*store.Task{budget}},
		{"budget", store.Scope{Admin: true}, []*store.Task{bobs, budget}},
		{budget.TaskNo, alice, []*store.Task{budget}},
		{strings.ToLower(budget.TaskNo[:12]), alice, []*store.Task{budget}},
		{budget.TaskNo[5:15], alice, nil}, // the middle of an id is not its start
		// A job id as the ops console shows it (<task id>-a<attempt>) finds its task, at
		// any attempt, pasted with the spaces a copy brings; only within the caller's scope.
		{task.JobID(budget.TaskNo, 1), alice, []*store.Task{budget}},
		{" " + task.JobID(budget.TaskNo, 7) + "\n", alice, []*store.Task{budget}},
		{task.JobID(budget.TaskNo, 1), store.Scope{Owner: "bob"}, nil},
		{task.JobID(budget.TaskNo[:12], 1), alice, nil}, // a job id names a whole task id
		{"100%", alice, []*store.Task{percent}},
		{"100%_", alice, []*store.Task{percent}},
		{"%", alice, []*store.Task{percent}},
		{"_", alice, []*store.Task{percent}},
		{"100__", alice, nil}, // two literal underscores: nothing has them
		{`\`, alice, []*store.Task{slash}},
		{`back\s`, alice, []*store.Task{slash}},
		{"三月", alice, []*store.Task{renamed}},
		{"上海", alice, []*store.Task{export}},
		{"done.csv", alice, []*store.Task{lookalike, percent}},
		{"no such thing", alice, nil},
	} {
		tasks, _, err := f.S.List(ctx, store.ListFilter{Search: c.term}, c.scope)
		if err != nil {
			t.Fatalf("search %q: %v", c.term, err)
		}
		var want []string
		for _, w := range c.want {
			want = append(want, w.TaskNo)
		}
		if got := numbers(tasks); !slices.Equal(got, want) {
			t.Errorf("search %q (admin %v): %v, want %v", c.term, c.scope.Admin, got, want)
		}
	}
	// The export of tasks counts what the listing shows: the same conditions.
	tx, err := f.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck
	if n, err := store.CountTasks(ctx, tx, store.ListFilter{Search: "100%"}, alice); err != nil || n != 1 {
		t.Fatalf("the export counts %d tasks for 100%% (%v), want 1", n, err)
	}
	page, err := store.TaskPage(ctx, tx, f.DB, store.ListFilter{Search: "done.csv"}, alice, 0, 10)
	if err != nil || len(page) != 2 {
		t.Fatalf("the export's page for done.csv: %d tasks (%v), want 2", len(page), err)
	}
}

// The counts are per status over every filter but the status, within the caller's scope.
func TestStatusCountsIgnoreOnlyTheStatusFilter(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for i := range 5 {
		task := f.listed("alice", fmt.Sprintf("Import report-%d.xlsx", i), `{"filename":"report.xlsx"}`)
		if i < 2 {
			if _, err := f.S.Cancel(ctx, task.TaskNo, store.Scope{Owner: "alice"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.listed("alice", "Import other.xlsx", `{"filename":"other.xlsx"}`)
	f.listed("bob", "Import report-9.xlsx", `{"filename":"report.xlsx"}`)

	counts, err := f.S.StatusCounts(ctx, store.ListFilter{Search: "report", Statuses: []store.Status{store.StatusCancelled}}, store.Scope{Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[store.Status]int64{store.StatusPending: 3, store.StatusCancelled: 2}; !mapsEqual(counts, want) {
		t.Fatalf("alice's counts for report: %v, want %v", counts, want)
	}
	counts, err = f.S.StatusCounts(ctx, store.ListFilter{}, store.Scope{Admin: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[store.Status]int64{store.StatusPending: 5, store.StatusCancelled: 2}; !mapsEqual(counts, want) {
		t.Fatalf("every task's counts: %v, want %v", counts, want)
	}
	counts, err = f.S.StatusCounts(ctx, store.ListFilter{Types: []string{"export:customers"}}, store.Scope{Admin: true})
	if err != nil || len(counts) != 0 {
		t.Fatalf("counts of a type without tasks: %v %v", counts, err)
	}
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Every sort pages through the whole listing exactly once, in its order, whatever the page
// size, with ties on the sort key (same created_at, same failed rows, same run time, no run
// time) broken by id; a cursor only continues the sort it was made for.
func TestEverySortPagesThroughTiesExactlyOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	base := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	type row struct {
		task     *store.Task
		created  time.Time
		run      time.Duration // -1: no run time
		finished bool
		failed   int64
	}
	var rows []row
	for i := range 13 {
		r := row{task: f.listed("alice", fmt.Sprintf("Import t%d.xlsx", i), `{}`)}
		r.created = base.Add(time.Duration(i/3) * time.Minute) // three tasks per minute: ties
		r.failed = int64(i % 3)                                // 0, 1, 2: ties
		r.run = []time.Duration{-1, 1500 * time.Microsecond, time.Second, time.Second}[i%4]
		if i == 12 {
			r.run = 0 // finished in the same microsecond it started
		}
		started, finished := any(nil), any(nil)
		if r.run >= 0 {
			started, finished = r.created.Add(time.Second), r.created.Add(time.Second+r.run)
		} else if i%8 == 4 {
			finished = r.created.Add(time.Second) // cancelled while it waited: finished, never started
		}
		f.Exec(`UPDATE tasks SET created_at = ?, started_at = ?, finished_at = ?, failed_count = ? WHERE id = ?`,
			r.created, started, finished, r.failed, r.task.ID)
		rows = append(rows, r)
	}
	f.listed("bob", "Import t0.xlsx", `{}`) // not alice's: never listed
	byID := func(a, b row, desc bool) int {
		if desc {
			return cmp.Compare(b.task.ID, a.task.ID)
		}
		return cmp.Compare(a.task.ID, b.task.ID)
	}
	runKey := func(r row, none time.Duration) time.Duration {
		if r.run < 0 {
			return none
		}
		return r.run
	}
	want := map[store.Sort]func(a, b row) int{
		store.SortNewest: func(a, b row) int { return cmp.Or(b.created.Compare(a.created), byID(a, b, true)) },
		store.SortOldest: func(a, b row) int { return cmp.Or(a.created.Compare(b.created), byID(a, b, false)) },
		store.SortLongest: func(a, b row) int {
			return cmp.Or(cmp.Compare(runKey(b, -1), runKey(a, -1)), byID(a, b, true))
		},
		store.SortShortest: func(a, b row) int {
			return cmp.Or(cmp.Compare(runKey(a, time.Duration(1<<62)), runKey(b, time.Duration(1<<62))), byID(a, b, false))
		},
		store.SortMostFailed:   func(a, b row) int { return cmp.Or(cmp.Compare(b.failed, a.failed), byID(a, b, true)) },
		store.SortFewestFailed: func(a, b row) int { return cmp.Or(cmp.Compare(a.failed, b.failed), byID(a, b, false)) },
	}
	if len(want) != len(store.Sorts()) {
		t.Fatalf("the test covers %d sorts of %d", len(want), len(store.Sorts()))
	}
	alice := store.Scope{Owner: "alice"}
	for _, sort := range store.Sorts() {
		sorted := slices.Clone(rows)
		slices.SortFunc(sorted, want[sort])
		var expect []string
		for _, r := range sorted {
			expect = append(expect, r.task.TaskNo)
		}
		for _, limit := range []int{1, 2, 3, 5, 13, 50} {
			if got := listAll(t, f.S, store.ListFilter{Sort: sort}, alice, limit); !slices.Equal(got, expect) {
				t.Errorf("sort %q, %d a page:\n got %v\nwant %v", sort, limit, got, expect)
			}
		}
		// Unfinished runs are last both ways.
		if sort == store.SortLongest || sort == store.SortShortest {
			last := sorted[len(sorted)-1]
			if last.run >= 0 {
				t.Errorf("sort %q ends with a task that ran %s", sort, last.run)
			}
		}
	}
	if got := listAll(t, f.S, store.ListFilter{}, alice, 4); !slices.Equal(got, listAll(t, f.S, store.ListFilter{Sort: store.SortNewest}, alice, 4)) {
		t.Error("the default sort is not newest first")
	}
	// A filter narrows every sort alike: the statuses and the search keep applying past
	// the first page.
	if got := listAll(t, f.S, store.ListFilter{Sort: store.SortMostFailed, Search: "t1"}, alice, 1); len(got) != 4 { // t1, t10, t11, t12
		t.Errorf("a search sorted by failed rows lists %v", got)
	}
	_, next, err := f.S.List(ctx, store.ListFilter{Sort: store.SortLongest, Limit: 2}, alice)
	if err != nil || next == nil {
		t.Fatalf("first page: %v %v", next, err)
	}
	if _, _, err := f.S.List(ctx, store.ListFilter{Sort: store.SortMostFailed, After: next}, alice); !errors.Is(err, store.ErrCursorSort) {
		t.Fatalf("a duration cursor continuing the failed-rows sort: %v", err)
	}
	if _, _, err := f.S.List(ctx, store.ListFilter{Sort: "size"}, alice); err == nil {
		t.Fatal("an unknown sort was accepted")
	}
}

// A user's listing, its counts and a status tab are served by indexes, on a table large
// enough that Postgres would rather scan it otherwise. A tab of a rare status reads only that
// status's tasks, through the owner-and-status index; the counts read that index alone once
// vacuum has marked the table's pages all-visible, which a test cannot count on while other
// tests hold snapshots, so only the absence of a scan of the table is asserted for them.
func TestListingAndCountsUseIndexes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.Exec(`INSERT INTO tasks (task_no, type, owner, queue, status, params, max_retry, timeout_seconds, title, created_at)
		SELECT 'tsk_' || g, 'import:customers', 'user' || (g % 40), 'imports',
		       CASE WHEN g % 400 = 7 THEN 'TIMEOUT'
		            ELSE (ARRAY['PENDING','RUNNING','SUCCESS','FAILED','CANCELLED','SUCCESS','SUCCESS','PARTIAL_SUCCESS'])[g % 8 + 1] END,
		       jsonb_build_object('filename', 'file-' || g || '.xlsx'), 3, 60, 'Import file-' || g || '.xlsx', now() - g * interval '1 second'
		FROM generate_series(1, 40000) g`)
	f.Exec(`VACUUM ANALYZE tasks`)
	user := store.Scope{Owner: "user7"}
	for _, c := range []struct {
		name   string
		filter store.ListFilter
		page   string // what the page's plan must use
	}{
		{"everything", store.ListFilter{Limit: 20}, "Index Scan"},
		{"a rare status's tab", store.ListFilter{Limit: 20, Statuses: []store.Status{store.StatusTimeout}}, "tasks_owner_status"},
		{"a day", store.ListFilter{Limit: 20, CreatedFrom: ptr(time.Now().Add(-24 * time.Hour))}, "Index Scan"},
		{"a search", store.ListFilter{Limit: 20, Search: "file-12"}, "Index Scan"},
		{"most rejected rows first", store.ListFilter{Limit: 20, Sort: store.SortMostFailed}, "Index"},
	} {
		page, counts, err := f.S.ListPlans(ctx, c.filter, user)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(page, "Seq Scan") || !strings.Contains(page, c.page) {
			t.Errorf("%s: the page's plan does not use %q:\n%s", c.name, c.page, page)
		}
		if strings.Contains(counts, "Seq Scan") {
			t.Errorf("%s: the counts scan the table:\n%s", c.name, counts)
		}
	}
}

func ptr[T any](v T) *T { return &v }
