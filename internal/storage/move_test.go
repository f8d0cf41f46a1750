package storage_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/storage"
)

func TestMove(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		data := randomBytes(21, 3<<20+7)
		put(t, e, "incoming/up-1.xlsx", data, -1)
		if err := e.store.Move(ctx, "incoming/up-1.xlsx", "uploads/abc.xlsx"); err != nil {
			t.Fatalf("move: %v", err)
		}
		if got := readAll(t, e, "uploads/abc.xlsx"); !bytes.Equal(got, data) {
			t.Fatal("the moved object differs")
		}
		if _, err := e.store.Stat(ctx, "incoming/up-1.xlsx"); !errors.Is(err, storage.ErrNotExist) {
			t.Errorf("the source is still there after the move: %v", err)
		}
		if st, err := e.store.Stat(ctx, "uploads/abc.xlsx"); err != nil || st.ContentType == "" {
			t.Errorf("stat after move: %+v, %v", st, err)
		}
		// Moving onto an existing key replaces it (the same content uploaded again).
		put(t, e, "incoming/up-2.xlsx", []byte("second"), 6)
		if err := e.store.Move(ctx, "incoming/up-2.xlsx", "uploads/abc.xlsx"); err != nil {
			t.Fatalf("move onto an existing key: %v", err)
		}
		if got := readAll(t, e, "uploads/abc.xlsx"); string(got) != "second" {
			t.Errorf("after the second move the object reads %q", got)
		}
		if err := e.store.Move(ctx, "incoming/none.xlsx", "uploads/x.xlsx"); !errors.Is(err, storage.ErrNotExist) {
			t.Errorf("move of a missing object: %v, want ErrNotExist", err)
		}
		if err := e.store.Move(ctx, "uploads/abc.xlsx", "../x"); !errors.Is(err, storage.ErrInvalidKey) {
			t.Errorf("move to ../x: %v, want ErrInvalidKey", err)
		}
	})
}

func TestScratchEntries(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		dir := e.store.TempDir()
		if dir != filepath.Join(e.root, "tmp") {
			t.Fatalf("TempDir %s, want %s", dir, filepath.Join(e.root, "tmp"))
		}
		var names []string
		for _, prefix := range []string{"tsk_A-a1", "tsk_A-a2", "tsk_A-a3", "tsk_AB-a1", "upload"} {
			f, err := e.store.CreateTemp(prefix, ".xlsx")
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			names = append(names, filepath.Base(filepath.Dir(f.Name())))
		}
		if err := os.WriteFile(filepath.Join(dir, "sst-1"), []byte("spill"), 0o600); err != nil {
			t.Fatal(err)
		}
		past := time.Now().Add(-time.Hour)
		if err := os.Chtimes(filepath.Join(dir, names[0]), past, past); err != nil {
			t.Fatal(err)
		}
		list := func(olderThan time.Time) []string {
			t.Helper()
			var got []string
			if err := e.store.ListTemp(olderThan, func(name string, _ time.Time) error { got = append(got, name); return nil }); err != nil {
				t.Fatal(err)
			}
			return got
		}
		if got := list(time.Time{}); len(got) != 6 || !slices.IsSorted(got) {
			t.Errorf("ListTemp = %q, want the 6 entries by name", got)
		}
		if got := list(time.Now().Add(-time.Minute)); !slices.Equal(got, names[:1]) {
			t.Errorf("ListTemp older than a minute = %q, want %q", got, names[:1])
		}
		// Every attempt of tsk_A but the second; tsk_AB is another task.
		if n, err := e.store.RemoveAttemptTemp("tsk_A", 2); n != 2 || err != nil {
			t.Errorf("RemoveAttemptTemp(tsk_A, keep 2) = %d, %v; want 2", n, err)
		}
		want := []string{names[1], names[3], "sst-1", names[4]}
		slices.Sort(want)
		if got := list(time.Time{}); !slices.Equal(got, want) {
			t.Errorf("after RemoveAttemptTemp: %q", got)
		}
		for _, n := range []string{names[1], "sst-1", "missing"} {
			if err := e.store.RemoveTemp(n); err != nil {
				t.Errorf("RemoveTemp(%s): %v", n, err)
			}
		}
		for _, bad := range []string{"", "..", "../x", "a/b"} {
			if err := e.store.RemoveTemp(bad); err == nil {
				t.Errorf("RemoveTemp(%q) succeeded", bad)
			}
		}
		if got := list(time.Time{}); len(got) != 2 {
			t.Errorf("left in scratch: %q, want tsk_AB's and the upload's", got)
		}
	})
}

func TestNames(t *testing.T) {
	if got := storage.ResultKey("tsk_X", 3, "-errors", ".xlsx"); got != "results/tsk_X-a3-errors.xlsx" {
		t.Errorf("ResultKey = %s", got)
	}
	for _, c := range []struct {
		name    string
		taskNo  string
		attempt int
	}{{"tsk_X-a3-123456", "tsk_X", 3}, {"upload-99", "upload", 0}, {"tsk_X-zh-1", "tsk_X", 0}, {"sst-1", "sst", 0}} {
		if n, a := storage.TempOwner(c.name); n != c.taskNo || a != c.attempt {
			t.Errorf("TempOwner(%s) = %s, %d; want %s, %d", c.name, n, a, c.taskNo, c.attempt)
		}
	}
	for _, c := range []struct {
		name    string
		taskNo  string
		attempt int
		ok      bool
	}{{"tsk_X-a3.xlsx", "tsk_X", 3, true}, {"results/tsk_X-a2-errors.xlsx", "tsk_X", 2, true}, {"x.xlsx", "", 0, false},
		{"tsk_X-a0.xlsx", "", 0, false}, {"tsk_X-b1.xlsx", "", 0, false}} {
		if n, a, ok := storage.ResultOwner(c.name); n != c.taskNo || a != c.attempt || ok != c.ok {
			t.Errorf("ResultOwner(%s) = %s, %d, %v", c.name, n, a, ok)
		}
	}
}
