package storage_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/taskcenter/taskcenter/internal/storage"
)

// A multipart upload its process never completed or aborted (killed mid-upload) is kept
// while it may still be in progress and aborted once it was initiated before the cutoff;
// only uploads under the prefix are touched, and no object ever appears. The local backend
// has none and checks the prefix as List does.
func TestAbortIncomplete(t *testing.T) {
	t.Parallel()
	t.Run(storage.BackendLocal, func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, storage.BackendLocal, nil)
		if n, err := e.store.AbortIncomplete(t.Context(), storage.Incoming+"/", time.Now(), 0); n != 0 || err != nil {
			t.Errorf("AbortIncomplete = %d, %v; want 0, nil", n, err)
		}
		if _, err := e.store.AbortIncomplete(t.Context(), "../x", time.Now(), 0); err == nil {
			t.Error("AbortIncomplete accepted the prefix ../x")
		}
	})
	t.Run(storage.BackendS3, func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, storage.BackendS3, nil)
		ctx := t.Context()
		core, err := minio.NewCore(e.gw.Endpoint, &minio.Options{
			Creds: credentials.NewStaticV4(e.cfg.AccessKey, e.cfg.SecretKey, ""), Region: e.cfg.Region,
			BucketLookup: minio.BucketLookupPath,
		})
		if err != nil {
			t.Fatal(err)
		}
		start := func(key string) string {
			t.Helper()
			id, err := core.NewMultipartUpload(ctx, e.cfg.Bucket, key, minio.PutObjectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			part := bytes.Repeat([]byte("x"), storage.MinPartSize)
			if _, err := core.PutObjectPart(ctx, e.cfg.Bucket, key, id, 1, bytes.NewReader(part), int64(len(part)), minio.PutObjectPartOptions{}); err != nil {
				t.Fatal(err)
			}
			return id
		}
		pending := func(prefix string) []minio.ObjectMultipartInfo {
			t.Helper()
			res, err := core.ListMultipartUploads(ctx, e.cfg.Bucket, prefix, "", "", "", 1000)
			if err != nil {
				t.Fatal(err)
			}
			return res.Uploads
		}
		before := time.Now().Add(-time.Second)
		start(storage.Incoming + "/killed")
		other := start(storage.Results + "/tsk_K-a1.xlsx")
		ups := pending("")
		if len(ups) != 2 {
			t.Fatalf("the gateway lists %d incomplete uploads, want 2: %+v", len(ups), ups)
		}
		for _, u := range ups {
			// Initiated is what tells an abandoned upload from one in progress.
			if u.Initiated.IsZero() || u.Initiated.Before(before.Add(-time.Minute)) || u.Initiated.After(time.Now().Add(time.Minute)) {
				t.Fatalf("upload %s: Initiated = %v, want about now", u.Key, u.Initiated)
			}
		}

		n, err := e.store.AbortIncomplete(ctx, storage.Incoming+"/", before, 0)
		if n != 0 || err != nil {
			t.Fatalf("cutoff before the upload: aborted %d, %v; want 0, nil", n, err)
		}
		if got := len(pending(storage.Incoming + "/")); got != 1 {
			t.Fatalf("cutoff before the upload: %d incomplete uploads left under incoming/, want 1", got)
		}
		time.Sleep(1100 * time.Millisecond) // S3's timestamps have a one-second grain
		n, err = e.store.AbortIncomplete(ctx, storage.Incoming+"/", time.Now(), 0)
		if n != 1 || err != nil {
			t.Fatalf("cutoff after the upload: aborted %d, %v; want 1, nil", n, err)
		}
		if ups := pending(storage.Incoming + "/"); len(ups) != 0 {
			t.Errorf("incomplete uploads left under incoming/: %+v", ups)
		}
		if ups := pending(storage.Results + "/"); len(ups) != 1 || ups[0].UploadID != other {
			t.Errorf("the upload under results/ (outside the prefix): %+v, want it kept", ups)
		}
		var listed []string
		if err := e.store.List(ctx, "", time.Time{}, func(i storage.Info) error { listed = append(listed, i.Key); return nil }); err != nil || len(listed) != 0 {
			t.Errorf("List after the aborts: %q, %v; want no object", listed, err)
		}
		// The limit bounds a round; the whole bucket is the empty prefix.
		start(storage.Results + "/tsk_K-a2.xlsx")
		time.Sleep(1100 * time.Millisecond)
		if n, err := e.store.AbortIncomplete(ctx, "", time.Now(), 1); n != 1 || err != nil {
			t.Fatalf("limit 1: aborted %d, %v; want 1, nil", n, err)
		}
		if n, err := e.store.AbortIncomplete(ctx, "", time.Now(), 0); n != 1 || err != nil {
			t.Fatalf("the rest: aborted %d, %v; want 1, nil", n, err)
		}
		if ups := pending(""); len(ups) != 0 {
			t.Errorf("incomplete uploads left: %+v", ups)
		}
	})
}
