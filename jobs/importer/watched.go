package importer

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/taskcenter/taskcenter/internal/storage"
)

// watchedObject is a stored upload that remembers the first read error of the store itself.
// A parser reports a read that failed half-way as a damaged file; when the store failed
// (the network, an S3 gateway restarting), that is a transient fault to retry, not bad input.
type watchedObject struct {
	storage.Object
	mu  sync.Mutex
	err error
}

func (w *watchedObject) Read(p []byte) (int, error) {
	n, err := w.Object.Read(p)
	w.note(err)
	return n, err
}

func (w *watchedObject) ReadAt(p []byte, off int64) (int, error) {
	n, err := w.Object.ReadAt(p, off)
	w.note(err)
	return n, err
}

func (w *watchedObject) note(err error) {
	if err == nil || errors.Is(err, io.EOF) {
		return
	}
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
}

// badFile turns a file problem into bad input, unless reading the upload failed, which stays
// transient like anything else.
func (w *watchedObject) badFile(err error) error {
	w.mu.Lock()
	fault := w.err
	w.mu.Unlock()
	if fault != nil {
		return fmt.Errorf("read the upload: %w", fault)
	}
	return badFile(err)
}
