package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/minio/minio-go/v7"
)

// Read-ahead of ReadAt: archive/zip reads a member through small (4 KiB) ReadAt calls, one
// ranged GET each without it. A short ReadAt fetches a whole block instead and keeps the
// last few, so reading an .xlsx costs about one GET per MiB and at most
// readAheadBlocks×readAheadSize of memory per open object.
const (
	readAheadSize   = 1 << 20
	readAheadBlocks = 4
)

// s3Object reads one version of an object (the ETag Open saw) with ranged GETs: Read
// streams from the current offset, ReadAt fetches ranges through a small block cache.
type s3Object struct {
	ctx  context.Context
	s    *S3
	key  string
	etag string
	size int64

	mu      sync.Mutex // guards the fields below; network reads happen under it
	closed  bool
	pos     int64         // Read/Seek offset
	body    io.ReadCloser // open GET stream, positioned at bodyPos
	bodyPos int64
	blocks  []*block // most recently used first
}

type block struct {
	off  int64
	data []byte
}

var _ Object = (*s3Object)(nil)

func (o *s3Object) Size() int64 { return o.size }

// get opens a GET of [start, end) (end < 0: to the end), pinned to the ETag.
func (o *s3Object) get(start, end int64) (io.ReadCloser, error) {
	opts := minio.GetObjectOptions{}
	if o.etag != "" {
		if err := opts.SetMatchETag(o.etag); err != nil {
			return nil, err
		}
	}
	switch {
	case end >= 0:
		if err := opts.SetRange(start, end-1); err != nil {
			return nil, err
		}
	case start > 0:
		if err := opts.SetRange(start, 0); err != nil {
			return nil, err
		}
	}
	body, oi, h, err := o.s.core.GetObject(o.ctx, o.s.bucket, o.key, opts)
	if err != nil {
		return nil, o.s.s3Err("read", o.key, err)
	}
	if total := servedSize(oi, h); total >= 0 && total != o.size {
		// The ETag matched, yet the object served is another size: the server checked the
		// precondition and opened the object apart (Versity's posix backend does), and an
		// overwrite came between. It is another version, whatever its ETag said.
		body.Close()
		return nil, fmt.Errorf("storage: read %s: %w (%d bytes now, %d when opened)", o.key, ErrChanged, total, o.size)
	}
	return body, nil
}

// servedSize is the size of the whole object a GET answered from: the total of its
// Content-Range, or its length when it served the whole object; -1 when it does not say.
func servedSize(oi minio.ObjectInfo, h http.Header) int64 {
	cr := h.Get("Content-Range")
	if cr == "" {
		return oi.Size
	}
	_, total, ok := strings.Cut(cr, "/")
	if !ok {
		return -1
	}
	n, err := strconv.ParseInt(total, 10, 64)
	if err != nil {
		return -1 // "*": unknown
	}
	return n
}

func (o *s3Object) Read(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return 0, os.ErrClosed
	}
	if o.pos >= o.size {
		o.dropBody()
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	if o.body == nil || o.bodyPos != o.pos {
		o.dropBody()
		body, err := o.get(o.pos, -1)
		if err != nil {
			return 0, err
		}
		o.body, o.bodyPos = body, o.pos
	}
	if rest := o.size - o.pos; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := o.body.Read(p)
	o.pos += int64(n)
	o.bodyPos += int64(n)
	switch {
	case errors.Is(err, io.EOF):
		o.dropBody()
		if o.pos < o.size {
			return n, fmt.Errorf("storage: read %s: %w at %d of %d bytes", o.key, io.ErrUnexpectedEOF, o.pos, o.size)
		}
		return n, nil // the next Read answers io.EOF
	case err != nil:
		o.dropBody() // the next Read reconnects at pos
		return n, o.s.s3Err("read", o.key, err)
	}
	return n, nil
}

func (o *s3Object) dropBody() {
	if o.body != nil {
		o.body.Close()
		o.body = nil
	}
}

func (o *s3Object) Seek(offset int64, whence int) (int64, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return 0, os.ErrClosed
	}
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += o.pos
	case io.SeekEnd:
		offset += o.size
	default:
		return 0, fmt.Errorf("storage: seek %s: invalid whence %d", o.key, whence)
	}
	if offset < 0 {
		return 0, fmt.Errorf("storage: seek %s: negative position %d", o.key, offset)
	}
	o.pos = offset // the stream is reopened lazily, by the next Read, if it moved
	return offset, nil
}

func (o *s3Object) ReadAt(p []byte, off int64) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return 0, os.ErrClosed
	}
	if off < 0 {
		return 0, fmt.Errorf("storage: read %s: negative offset %d", o.key, off)
	}
	if off >= o.size {
		return 0, io.EOF
	}
	want := min(int64(len(p)), o.size-off)
	n := int64(0)
	for n < want {
		cur := off + n
		if b := o.cached(cur); b != nil {
			n += int64(copy(p[n:want], b.data[cur-b.off:]))
			continue
		}
		if want-n >= readAheadSize {
			// A big read: straight into p, nothing to gain from caching it.
			if err := o.fetch(p[n:want], cur); err != nil {
				return int(n), err
			}
			n = want
			continue
		}
		b := o.newBlock(cur, min(readAheadSize, o.size-cur))
		if err := o.fetch(b.data, cur); err != nil {
			o.blocks = o.blocks[1:]
			return int(n), err
		}
	}
	if n < int64(len(p)) {
		return int(n), io.EOF
	}
	return int(n), nil
}

// cached returns the block holding offset, moving it to the front.
func (o *s3Object) cached(off int64) *block {
	for i, b := range o.blocks {
		if b.off <= off && off < b.off+int64(len(b.data)) {
			copy(o.blocks[1:i+1], o.blocks[:i])
			o.blocks[0] = b
			return b
		}
	}
	return nil
}

// newBlock puts an unfilled block at the front, reusing the least recently used one's
// memory when the cache is full.
func (o *s3Object) newBlock(off, size int64) *block {
	var b *block
	if len(o.blocks) == readAheadBlocks {
		b = o.blocks[len(o.blocks)-1]
		o.blocks = o.blocks[:len(o.blocks)-1]
		b.off, b.data = off, b.data[:size]
	} else {
		b = &block{off: off, data: make([]byte, size, readAheadSize)}
	}
	o.blocks = append([]*block{b}, o.blocks...)
	return b
}

// fetch fills p from the object at off with one ranged GET.
func (o *s3Object) fetch(p []byte, off int64) error {
	body, err := o.get(off, off+int64(len(p)))
	if err != nil {
		return err
	}
	defer body.Close()
	if _, err := io.ReadFull(body, p); err != nil {
		return o.s.s3Err(fmt.Sprintf("read at %d of", off), o.key, err)
	}
	return nil
}

func (o *s3Object) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return os.ErrClosed
	}
	o.closed = true
	o.dropBody()
	o.blocks = nil
	return nil
}
