package store_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"testing"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/store"
)

// A title the product made is kept as its message beside the English, and stays with the task
// when it is archived; a submitter's own title has no message.
func TestTaskKeepsItsTitleMessage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	said := msg.New("title.import", "filename", "a.xlsx", "mode", "", "dry_run", "dry_run")
	res, err := f.S.CreateMany(ctx, []store.NewTask{
		{TaskNo: "tsk_" + rand.Text(), Type: "import:customers", Owner: "alice", Queue: "imports", Params: json.RawMessage(`{}`),
			MaxRetry: 3, TimeoutSeconds: 60, Title: said.English(), TitleMessage: &said},
		{TaskNo: "tsk_" + rand.Text(), Type: "import:customers", Owner: "alice", Queue: "imports", Params: json.RawMessage(`{}`),
			MaxRetry: 3, TimeoutSeconds: 60, Title: "my own words"},
	})
	if err != nil {
		t.Fatal(err)
	}
	product, own := res[0].Task, res[1].Task
	got, err := f.S.Get(ctx, product.TaskNo, store.Scope{Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if m := got.TitleMessage(); m == nil || got.Title != "Import a.xlsx (dry run)" || m.In(msg.ZH) != "导入 a.xlsx（试运行）" {
		t.Fatalf("the product's title: %q, message %+v", got.Title, m)
	}
	if m := own.TitleMessage(); m != nil || own.Title != "my own words" {
		t.Fatalf("the submitter's title: %q, message %+v", own.Title, m)
	}
	f.Exec("UPDATE tasks SET status = 'SUCCESS', finished_at = now() WHERE id = ?", product.ID)
	if n, err := f.S.ArchiveTasks(ctx, []int64{product.ID}); err != nil || n != 1 {
		t.Fatalf("archived %d: %v", n, err)
	}
	archived, err := f.S.GetArchived(ctx, product.TaskNo, store.Scope{Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if m := archived.TitleMessage(); m == nil || m.In(msg.ZH) != "导入 a.xlsx（试运行）" {
		t.Fatalf("the archived title message: %+v", m)
	}
}
