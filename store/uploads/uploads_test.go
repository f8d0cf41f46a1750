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
