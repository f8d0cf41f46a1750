package importer

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/sheet"
	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/internal/xlsxsafe/xlsxtest"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/storetest"
)

// The template declares the range of its header and example row, so a reader that trusts
// the dimension (openpyxl read-only) sees both rows and every column.
func TestTemplateDeclaresItsRange(t *testing.T) {
	t.Parallel()
	for _, lang := range []Lang{LangEN, LangZH} {
		b, _, err := Template(lang, sheet.XLSX)
		if err != nil {
			t.Fatal(err)
		}
		if got := xlsxtest.SheetRangesOf(t, b); !slices.Equal(got, []string{"A1:F2=A1:F2"}) {
			t.Errorf("%s template: declared=used %q, want A1:F2", lang, got)
		}
	}
}

// The error report declares the range of what it holds: the header and one row per rejected
// row, as wide as the widest of the header and the rejected rows' original cells. So does a
// report written again in another language.
func TestErrorReportDeclaresItsRange(t *testing.T) {
	t.Parallel()
	pg := storetest.NewPostgres(t)
	st := store.New(pg.DB)
	fs, root := testenv.NewFiles(t, storage.Config{})
	header := []string{"code", "name", "phone"}
	task, _, err := st.Create(context.Background(), store.NewTask{TaskNo: "tsk_" + rand.Text(), Type: Type, Owner: "alice",
		Queue: "imports", MaxRetry: 3, TimeoutSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	var items []store.Item
	for i, cells := range [][]string{{"C1", "n"}, {"C2", "n", "1", "extra", "more"}, {"C3"}} {
		raw, _ := json.Marshal(cells)
		items = append(items, store.Item{TaskID: task.ID, Row: i + 2, Field: "phone", Message: "phone: required", Raw: raw})
	}
	err = pg.DB.RunInTx(context.Background(), nil, func(ctx context.Context, tx bun.Tx) error {
		return store.InsertItems(ctx, tx, items)
	})
	if err != nil {
		t.Fatal(err)
	}
	// The summary sheet: its header and the one field at fault (rows stored without their
	// messages: no reason). Then the rows sheet: row number, fields and reason, then the
	// widest row's five original cells; three rows under the header.
	want := []string{"A1:C2=A1:C2", "A1:H4=A1:H4"}

	l := store.Lease{TaskID: task.ID, TaskNo: task.TaskNo, Attempt: 1}
	rel, _, err := writeErrorReport(context.Background(), st, fs, l, storage.AttemptPrefix(l.TaskNo, l.Attempt), header, LangEN)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	if got := xlsxtest.SheetRangesOf(t, b); !slices.Equal(got, want) {
		t.Errorf("stored report: declared=used %q, want %q", got, want)
	}

	task.Checkpoint, _ = json.Marshal(checkpoint{Header: header}) // as the import leaves it
	p, done, err := ErrorReportIn(context.Background(), st, fs, task, LangZH)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if b, err = os.ReadFile(p); err != nil {
		t.Fatal(err)
	}
	if got := xlsxtest.SheetRangesOf(t, b); !slices.Equal(got, want) {
		t.Errorf("report in zh: declared=used %q, want %q", got, want)
	}
}
