package testenv

import (
	"bytes"
	"sync"
)

// SyncBuffer collects output (a logger's, a child process's) safely while the test reads it.
type SyncBuffer struct {
	// Limit, when above 0, is how many bytes are kept: what comes after is dropped, so a
	// writer is never blocked and the buffer stays enough to explain a failure.
	Limit int

	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.Limit > 0 && b.buf.Len() > b.Limit {
		return len(p), nil
	}
	return b.buf.Write(p)
}

// String is what was written so far ("" for a nil buffer).
func (b *SyncBuffer) String() string {
	if b == nil {
		return ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
