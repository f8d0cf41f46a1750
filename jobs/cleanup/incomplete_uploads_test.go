package cleanup_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/storage"
)

// Multipart uploads a killed process left behind are aborted once initiated longer than
// TempTTL ago, in the areas the service writes (incoming/, then results/, then uploads/), at
// most a batch per round; an upload under any other prefix is not the service's and stays.
func TestRoundAbortsIncompleteUploadsInTheServiceAreasInBatches(t *testing.T) {
	t.Parallel()
	sc, core := s3Bucket(t, "aborts")
	const ttl = time.Second
	f := newFixtureOn(t, 2, sc, ttl)
	ctx := context.Background()
	// pending lists the incomplete uploads' keys, sorted, and when the latest was initiated.
	pending := func() ([]string, time.Time) {
		t.Helper()
		res, err := core.ListMultipartUploads(ctx, sc.Bucket, "", "", "", "", 1000)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		var latest time.Time
		for _, u := range res.Uploads {
			keys = append(keys, u.Key)
			if u.Initiated.After(latest) {
				latest = u.Initiated
			}
		}
		slices.Sort(keys)
		return keys, latest
	}
	keys := []string{storage.Incoming + "/killed.xlsx", storage.ResultKey("tsk_K", 1, "", ".xlsx"),
		storage.Uploads + "/killed.xlsx", "elsewhere/killed.xlsx"}
	for _, key := range keys {
		leaveIncompleteUpload(t, core, sc.Bucket, key)
	}
	started, latest := pending()
	if len(started) != len(keys) {
		t.Fatalf("the gateway lists %v, want %d incomplete uploads", started, len(keys))
	}
	// Wait until the latest upload, as the gateway dates it, is older than the TTL.
	time.Sleep(time.Until(latest.Add(ttl + 100*time.Millisecond)))

	var aborted []int
	for range 3 {
		rep := f.cleaner.Round(ctx)
		if rep.Errors != 0 {
			t.Fatalf("report = %+v", rep)
		}
		aborted = append(aborted, rep.UploadsAborted)
		if len(aborted) == 1 {
			if left, _ := pending(); len(left) != 2 || left[0] != "elsewhere/killed.xlsx" || left[1] != storage.Uploads+"/killed.xlsx" {
				t.Fatalf("after the first round %v are pending, want uploads/ (next batch) and elsewhere/ (not ours)", left)
			}
		}
	}
	if aborted[0] != 2 || aborted[1] != 1 || aborted[2] != 0 {
		t.Fatalf("uploads aborted per round = %v, want 2,1,0 (bounded by the batch size)", aborted)
	}
	if left, _ := pending(); len(left) != 1 || left[0] != "elsewhere/killed.xlsx" {
		t.Fatalf("pending after the rounds: %v, want only elsewhere/killed.xlsx", left)
	}
}
