package uploads_test

import (
	"context"
	"testing"

	"github.com/taskcenter/taskcenter/store/storetest"
	"github.com/taskcenter/taskcenter/store/uploads"
)

func TestTouchUploadSaysWhetherTheUploadIsKept(t *testing.T) {
	t.Parallel()
	u := uploads.New(storetest.NewPostgres(t).DB)
	ctx := context.Background()
	if err := u.RecordUpload(ctx, "uploads/a.csv", "a", 1); err != nil {
		t.Fatal(err)
	}
	if kept, err := u.TouchUpload(ctx, "uploads/a.csv"); err != nil || !kept {
		t.Fatalf("a recorded upload: %v %v", kept, err)
	}
	if kept, err := u.TouchUpload(ctx, "uploads/swept.csv"); err != nil || kept {
		t.Fatalf("an upload without a record: %v %v", kept, err)
	}
}

func TestASavedMappingIsTheOwnersForItsHeaderSet(t *testing.T) {
	t.Parallel()
	ms := uploads.New(storetest.NewPostgres(t).DB)
	ctx := context.Background()
	if err := ms.SaveMapping(ctx, "alice", "k1", map[string]string{"联系电话": "phone"}); err != nil {
		t.Fatal(err)
	}
	got, err := ms.FindMapping(ctx, "alice", "k1")
	if err != nil || got == nil || got.Columns["联系电话"] != "phone" || got.SavedAt.IsZero() {
		t.Fatalf("alice's mapping: %+v, %v", got, err)
	}
	for _, c := range []struct{ owner, key string }{{"bob", "k1"}, {"alice", "k2"}} {
		if m, err := ms.FindMapping(ctx, c.owner, c.key); err != nil || m != nil {
			t.Errorf("%s/%s: %+v, %v, want none", c.owner, c.key, m, err)
		}
	}
	if err := ms.SaveMapping(ctx, "alice", "k1", map[string]string{"电话": "phone"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := ms.FindMapping(ctx, "alice", "k1"); got == nil || got.Columns["电话"] != "phone" || len(got.Columns) != 1 {
		t.Fatalf("the mapping saved again: %+v, want it replaced", got)
	}
}
