package storage_test

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/taskcenter/taskcenter/internal/storage"
)

// health records what the s3 backend reports of its requests.
type health struct {
	mu        sync.Mutex
	fails, ok int
}

func (h *health) Fail(error) { h.mu.Lock(); h.fails++; h.mu.Unlock() }
func (h *health) OK()        { h.mu.Lock(); h.ok++; h.mu.Unlock() }
func (h *health) counts() (fails, ok int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fails, h.ok
}

// A store that cannot be reached is told apart from one that answers no, by the error's
// identity: a missing object is ErrNotExist and no outage; with the S3 service gone, every
// operation (a stat, a read of an open object, the readiness ping) is ErrUnavailable, and
// the health hears of each request that failed.
func TestAnUnreachableObjectStoreIsErrUnavailable(t *testing.T) {
	t.Parallel()
	h := &health{}
	e := newEnv(t, storage.BackendS3, func(c *storage.Config) { c.Health = h })
	ctx := t.Context()
	data := randomBytes(7, 64<<10)
	put(t, e, "results/tsk_U-a1.xlsx", data, int64(len(data)))
	_, err := e.store.Stat(ctx, "results/missing.xlsx")
	if !errors.Is(err, storage.ErrNotExist) || errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("a missing object: %v", err)
	}
	if fails, ok := h.counts(); fails != 0 || ok == 0 {
		t.Fatalf("while the service answers: %d failures and %d answers reported", fails, ok)
	}
	obj, err := e.store.Open(ctx, "results/tsk_U-a1.xlsx")
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()

	e.gw.Stop()
	if _, err := e.store.Stat(ctx, "results/tsk_U-a1.xlsx"); !errors.Is(err, storage.ErrUnavailable) || errors.Is(err, storage.ErrNotExist) {
		t.Fatalf("stat with the service gone: %v", err)
	}
	if _, err := obj.ReadAt(make([]byte, 1024), 0); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("a read with the service gone: %v", err)
	}
	if err := e.store.Ping(ctx); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("ping with the service gone: %v", err)
	}
	if _, err := e.store.Put(ctx, "uploads/x.xlsx", bytes.NewReader(data), int64(len(data)), ""); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("put with the service gone: %v", err)
	}
	if fails, _ := h.counts(); fails < 4 {
		t.Fatalf("%d failed requests reported for four operations", fails)
	}
}
