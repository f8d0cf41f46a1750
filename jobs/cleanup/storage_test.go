package cleanup_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/store"
)

// Every file step of the round works on an S3 bucket as on the data dir: expired results go
// (rows kept), old uploads no task needs go, uploads abandoned under incoming/ go, results
// no row records go, and so does the multipart upload of a worker killed while it committed a
// result (aborted); what a waiting task, a row or a running attempt needs stays. Scratch is
// this node's: a dead attempt's partial file goes, the running attempt's stays. S3 cannot
// backdate an object, so the TTLs are a second and the test waits past them.
func TestRoundCleansAnS3Bucket(t *testing.T) {
	t.Parallel()
	sc, core := s3Bucket(t, "cleanup")
	f := newFixtureOn(t, 100, sc, time.Second)
	ctx := context.Background()
	put := func(key string) {
		t.Helper()
		if _, err := f.files.Put(ctx, key, strings.NewReader("x"), 1, ""); err != nil {
			t.Fatal(err)
		}
	}
	stored := func(key string) bool {
		t.Helper()
		_, err := f.files.Stat(ctx, key)
		if err != nil && !errors.Is(err, storage.ErrNotExist) {
			t.Fatal(err)
		}
		return err == nil
	}

	// An export whose result has expired.
	expired, lease := f.running("w")
	expiredKey := storage.ResultKey(expired.TaskNo, 1, "", ".xlsx")
	put(expiredKey)
	past := time.Now().Add(-time.Minute)
	if _, err := f.S.EndFinished(ctx, lease, store.Outcome{Status: store.StatusSuccess, ResultExpiresAt: &past,
		Result: json.RawMessage(`{"file":"` + expiredKey + `"}`)}); err != nil {
		t.Fatal(err)
	}
	// Uploads: one no task needs, one a waiting import needs, one abandoned mid-upload.
	put(storage.Uploads + "/orphan.xlsx")
	put(storage.Uploads + "/needed.xlsx")
	f.task(`{"upload":"uploads/needed.xlsx"}`)
	put(storage.Incoming + "/abandoned.xlsx")
	// Results: a dead attempt's (the task moved on), a running attempt's, a foreign object.
	moved := f.takenOver()
	deadKey := storage.ResultKey(moved.TaskNo, 1, "", ".xlsx")
	put(deadKey)
	liveKey := storage.ResultKey(moved.TaskNo, 2, "-errors", ".xlsx")
	put(liveKey)
	put(storage.Results + "/README.txt")
	// A worker killed while it committed a large result: a multipart upload never completed.
	killedKey := storage.ResultKey(moved.TaskNo, 1, "-errors", ".xlsx")
	leaveIncompleteUpload(t, core, sc.Bucket, killedKey)
	// Scratch on this node: attempt 1 of the moved task is dead, attempt 2 runs.
	var scratch []string
	for _, attempt := range []int{1, 2} {
		tmp, err := f.files.CreateTemp(storage.AttemptPrefix(moved.TaskNo, attempt), ".xlsx")
		if err != nil {
			t.Fatal(err)
		}
		tmp.Close()
		scratch = append(scratch, filepath.Dir(tmp.Name()))
		old := time.Now().Add(-time.Hour)
		os.Chtimes(filepath.Dir(tmp.Name()), old, old) //nolint:errcheck
	}

	time.Sleep(2100 * time.Millisecond) // past the TTLs, at S3's one-second grain
	rep := f.cleaner.Round(ctx)
	if rep.Errors != 0 || rep.ResultsExpired != 1 || rep.UploadsDeleted != 1 || rep.TempDeleted != 2 || rep.ResultsOrphaned != 1 || rep.UploadsAborted != 1 {
		t.Fatalf("report = %+v, want 1 expired, 1 upload, 2 temp (scratch and incoming), 1 orphan result, 1 upload aborted", rep)
	}
	if res, err := core.ListMultipartUploads(ctx, sc.Bucket, "", "", "", "", 1000); err != nil || len(res.Uploads) != 0 {
		t.Errorf("incomplete uploads after the round: %+v, %v; want none", res.Uploads, err)
	}
	for key, want := range map[string]bool{expiredKey: false, "uploads/orphan.xlsx": false, "uploads/needed.xlsx": true,
		"incoming/abandoned.xlsx": false, deadKey: false, liveKey: true, "results/README.txt": true, killedKey: false} {
		if got := stored(key); got != want {
			t.Errorf("%s stored = %v after the round, want %v", key, got, want)
		}
	}
	if got := f.Get(expired.ID); got.Status != store.StatusSuccess || !strings.Contains(string(got.Result), `"expired"`) {
		t.Errorf("the expired task's row: %s %s", got.Status, got.Result)
	}
	if _, err := os.Stat(scratch[0]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead attempt's scratch entry survived")
	}
	if _, err := os.Stat(scratch[1]); err != nil {
		t.Errorf("the running attempt's scratch entry was deleted: %v", err)
	}
}

// s3Bucket starts a private S3 gateway for the test. It returns a store config for bucket on
// it, and a client of the gateway's own for what the store does not expose: multipart uploads.
func s3Bucket(t *testing.T, bucket string) (storage.Config, *minio.Core) {
	t.Helper()
	gw := testenv.NewS3(t)
	core, err := minio.NewCore(gw.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(gw.AccessKey, gw.SecretKey, ""),
		Region: gw.Region, BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	return storage.Config{Backend: storage.BackendS3, Endpoint: gw.Endpoint, Bucket: bucket, Region: gw.Region,
		AccessKey: gw.AccessKey, SecretKey: gw.SecretKey, PathStyle: true, CreateBucket: true}, core
}

// leaveIncompleteUpload starts a multipart upload of key and sends its first part, as a
// worker killed while it committed a large file leaves it.
func leaveIncompleteUpload(t *testing.T, core *minio.Core, bucket, key string) {
	t.Helper()
	ctx := context.Background()
	id, err := core.NewMultipartUpload(ctx, bucket, key, minio.PutObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	part := strings.Repeat("x", storage.MinPartSize)
	if _, err := core.PutObjectPart(ctx, bucket, key, id, 1, strings.NewReader(part), int64(len(part)), minio.PutObjectPartOptions{}); err != nil {
		t.Fatal(err)
	}
}
