package importer

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/sheet/sheettest"
	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/store"
)

// s3Config starts a private S3 gateway for the test and returns a store config for it.
func s3Config(t *testing.T) storage.Config {
	t.Helper()
	gw := testenv.NewS3(t)
	return storage.Config{Backend: storage.BackendS3, Endpoint: gw.Endpoint, Bucket: "imports", Region: gw.Region,
		AccessKey: gw.AccessKey, SecretKey: gw.SecretKey, PathStyle: true, Presign: true, CreateBucket: true, PartSize: storage.MinPartSize}
}

// keys lists the stored keys under prefix.
func keys(t *testing.T, fs storage.Store, prefix string) []string {
	t.Helper()
	var out []string
	if err := fs.List(context.Background(), prefix, time.Time{}, func(i storage.Info) error { out = append(out, i.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// Uploads go through the real submit side into the store and the worker reads them where they
// are stored, on both backends: a workbook through ranged reads, a GBK CSV and an .xls
// sequentially. The outcome is the same everywhere, nothing is left under incoming/, and the
// error report is an object of the store.
func TestImportsReadTheStoredUpload(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{storage.BackendLocal, storage.BackendS3} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			sc := storage.Config{}
			if backend == storage.BackendS3 {
				sc = s3Config(t)
			}
			w := newWorldOn(t, Config{BatchSize: 4}, sc)
			for _, name := range []string{"messy-libreoffice.xlsx", "messy-gbk.csv", "messy-libreoffice.xls"} {
				w.pg.DB.ExecContext(context.Background(), "DELETE FROM customers") //nolint:errcheck
				task, _, err := w.submitAs(name, sheettest.Fixture(t, name), Submit{})
				if err != nil {
					t.Fatalf("%s: submit: %v", name, err)
				}
				var p Params
				if err := json.Unmarshal(task.Params, &p); err != nil || !strings.HasPrefix(p.Upload, storage.Uploads+"/"+p.SHA256+".") {
					t.Fatalf("%s: upload stored at %q (%v), want uploads/<sha256>.<format>", name, p.Upload, err)
				}
				if _, err := w.fs.Stat(context.Background(), p.Upload); err != nil {
					t.Fatalf("%s: the upload is not in the store: %v", name, err)
				}
				got := w.outcome(w.deliver(task))
				if got.status != store.StatusPartialSuccess || got.total != 15 || got.success != 8 || got.failed != 7 {
					t.Fatalf("%s on %s: %+v, want PARTIAL_SUCCESS 15/8/7", name, backend, got)
				}
				done, _ := w.st.GetByID(context.Background(), task.ID)
				var res ResultData
				if err := json.Unmarshal(done.Result, &res); err != nil || res.ErrorReport == "" {
					t.Fatalf("%s: result %s", name, done.Result)
				}
				if info, err := w.fs.Stat(context.Background(), res.ErrorReport); err != nil || info.Size == 0 {
					t.Fatalf("%s: the error report %s is not in the store: %v", name, res.ErrorReport, err)
				}
			}
			if left := keys(t, w.fs, storage.Incoming+"/"); len(left) != 0 {
				t.Fatalf("left under incoming/: %q", left)
			}
			if got := keys(t, w.fs, storage.Uploads+"/"); len(got) != 3 {
				t.Fatalf("uploads: %q, want the three files", got)
			}
		})
	}
}

// An upload over the limit is refused while it streams, and nothing of it stays stored.
func TestOversizedUploadLeavesNothing(t *testing.T) {
	t.Parallel()
	w := newWorldOn(t, Config{}, s3Config(t))
	up := NewUploads(UploadsDeps{Store: w.st, Files: w.fs})
	big := strings.Repeat("code,name,phone\n", 1<<17) // 2 MiB: past the 1 MiB read-ahead of an unsized put
	_, err := up.receive(context.Background(), "big.csv", strings.NewReader(big), 1<<20)
	var fp *FileProblem
	if !errors.As(err, &fp) || fp.Kind != TooLarge {
		t.Fatalf("receive of 2 MiB with a 1 MiB limit: %v, want TooLarge", err)
	}
	if left := keys(t, w.fs, ""); len(left) != 0 {
		t.Fatalf("stored after a refused upload: %q", left)
	}
	// A refused upload that arrived whole is deleted by Discard.
	r, err := up.receive(context.Background(), "x.csv", strings.NewReader("not,a\x00,csv"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := up.accept(context.Background(), r, "alice", Submit{Mode: ModeUpsert}); !errors.As(err, &fp) {
		t.Fatalf("accept of a binary CSV: %v, want a file problem", err)
	}
	if left := keys(t, w.fs, ""); len(left) != 0 {
		t.Fatalf("stored after a refused upload: %q", left)
	}
}

// flakyStore's objects fail every read past the first few KiB, as a connection to the store
// that breaks mid-import would.
type flakyStore struct{ storage.Store }

func (f flakyStore) Open(ctx context.Context, key string) (storage.Object, error) {
	obj, err := f.Store.Open(ctx, key)
	if err != nil {
		return nil, err
	}
	return flakyObject{obj}, nil
}

type flakyObject struct{ storage.Object }

var errStoreDown = errors.New("connection reset by the store")

func (o flakyObject) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > 4<<10 {
		return 0, errStoreDown
	}
	return o.Object.ReadAt(p, off)
}

func (o flakyObject) Read([]byte) (int, error) { return 0, errStoreDown }

// A read that fails in the store is a transient fault to retry, never a damaged file: the
// parsers would call it one.
func TestStoreFailureMidReadIsRetried(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Config{BatchSize: 4})
	task, _, err := w.submitAs("messy-libreoffice.xlsx", sheettest.Fixture(t, "messy-libreoffice.xlsx"), Submit{})
	if err != nil {
		t.Fatal(err)
	}
	w.im.files = flakyStore{w.fs}
	got := w.deliver(task)
	if got.Status != store.StatusRetryWait || got.ErrorCode == "damaged_file" {
		t.Fatalf("task = %s %s %q, want RETRY_WAIT (a transient fault)", got.Status, got.ErrorCode, got.ErrorMessage)
	}
	w.im.files = w.fs
	w.pg.DB.ExecContext(context.Background(), "UPDATE tasks SET next_retry_at = now() WHERE id = ?", task.ID) //nolint:errcheck
	if after := w.outcome(w.deliver(got)); after.status != store.StatusPartialSuccess || after.success != 8 {
		t.Fatalf("the retry: %+v", after)
	}
}
