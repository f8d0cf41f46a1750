package importer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/taskcenter/taskcenter/internal/sheet"
	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/store"
)

// countingStore counts the bytes read from the objects it opens.
type countingStore struct {
	storage.Store
	read *atomic.Int64
}

func (c countingStore) Open(ctx context.Context, key string) (storage.Object, error) {
	obj, err := c.Store.Open(ctx, key)
	if err != nil {
		return nil, err
	}
	return countingObject{obj, c.read}, nil
}

type countingObject struct {
	storage.Object
	read *atomic.Int64
}

func (o countingObject) Read(p []byte) (int, error) {
	n, err := o.Object.Read(p)
	o.read.Add(int64(n))
	return n, err
}

func (o countingObject) ReadAt(p []byte, off int64) (int, error) {
	n, err := o.Object.ReadAt(p, off)
	o.read.Add(int64(n))
	return n, err
}

// A file longer than submit reads to count rows is accepted after reading only that much,
// with its rows estimated; the worker counts every row before the first batch, so a file
// over the row limit still fails with nothing written, and one within it imports whole,
// its progress ending at the real count.
func TestSubmitCountsABoundedPrefix(t *testing.T) {
	t.Parallel()
	const countBytes = 4 << 10
	lim := sheet.Limits{MaxRows: 10_000}
	for _, c := range []struct {
		name      string
		rows      int
		status    store.Status
		customers int
		says      string
	}{
		{"over the row limit: fails in the worker before any batch", 15_000, store.StatusFailed, 0, "has 15,000 rows, over the limit of 10,000"},
		{"within the row limit: imports every row", 9_000, store.StatusSuccess, 9_000, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, Config{BatchSize: 1000, Limits: lim})
			content := customersCSV("P", c.rows)
			var read atomic.Int64
			up := NewUploads(UploadsDeps{Store: w.st, Files: countingStore{w.fs, &read}, Limits: lim})
			up.countBytes = countBytes
			r, err := up.receive(context.Background(), "many.csv", bytes.NewReader(content), 64<<20)
			if err != nil {
				t.Fatal(err)
			}
			sub, err := up.accept(context.Background(), r, "alice", Submit{Mode: ModeUpsert})
			if err != nil {
				t.Fatalf("submit refused a file whose part read is within the limit: %v", err)
			}
			var p Params
			if err := json.Unmarshal(sub.Params, &p); err != nil {
				t.Fatal(err)
			}
			// Reads go through a 64 KiB buffer, so a little past the bound is read; far from
			// the whole file.
			if n := read.Load(); n > countBytes+(128<<10) || n >= int64(len(content))/2 {
				t.Fatalf("submit read %d bytes of a %d-byte file to count its rows, bound %d", n, len(content), countBytes)
			}
			if p.Rows < c.rows/2 || p.Rows > 2*c.rows {
				t.Fatalf("submit estimated %d rows, the file has %d", p.Rows, c.rows)
			}
			got := w.deliver(w.create(t, sub))
			n := w.count("SELECT count(*) FROM customers")
			says := got.ErrorMessage + string(got.Result)
			if got.Status != c.status || n != c.customers || !strings.Contains(says, c.says) || got.RetryCount != 0 {
				t.Fatalf("%s, %d customers, retries %d, %q; want %s, %d customers, saying %q", got.Status, n, got.RetryCount, says, c.status, c.customers, c.says)
			}
			if c.status == store.StatusSuccess && (got.ProgressCurrent != int64(c.rows) || got.ProgressTotal != int64(c.rows)) {
				t.Fatalf("progress %d/%d, want %d/%d", got.ProgressCurrent, got.ProgressTotal, c.rows, c.rows)
			}
		})
	}
}

// A file whose counted part alone is over the row limit is still refused at submit.
func TestSubmitRefusesAPrefixOverTheRowLimit(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Config{})
	up := NewUploads(UploadsDeps{Store: w.st, Files: w.fs, Limits: sheet.Limits{MaxRows: 50}})
	up.countBytes = 4 << 10
	r, err := up.receive(context.Background(), "many.csv", bytes.NewReader(customersCSV("Q", 5000)), 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	_, err = up.accept(context.Background(), r, "alice", Submit{Mode: ModeUpsert})
	var fp *FileProblem
	if !errors.As(err, &fp) || fp.Code != "too_many_rows" || !strings.Contains(fp.Message, "over the limit of 50") {
		t.Fatalf("submit: %v, want too_many_rows", err)
	}
	if left := keys(t, w.fs, storage.Uploads); len(left) != 0 {
		t.Fatalf("a refused upload was kept: %q", left)
	}
}
