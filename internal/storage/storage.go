package storage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"
)

// Store keeps the service's files under slash-separated keys ("uploads/<sha256>.xlsx",
// "results/tsk_X-a1.xlsx", "tmp/…"). Both backends are safe for concurrent use.
type Store interface {
	// Put stores r under key. size is the exact length, or -1 when unknown (the s3 backend
	// then uploads in parts of Config.PartSize, so memory stays flat). The object appears
	// whole or not at all: a failed or cancelled Put leaves no object and no partial file,
	// and readers of an object being overwritten see the old one or the new one.
	Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) (Info, error)
	// Open opens an object for reading: sequential reads, seeks and random access. Reads
	// use ctx, so it must outlive the Object. Missing objects answer ErrNotExist.
	Open(ctx context.Context, key string) (Object, error)
	// Stat describes an object; missing objects answer ErrNotExist.
	Stat(ctx context.Context, key string) (Info, error)
	// Delete removes an object; deleting a missing object is not an error.
	Delete(ctx context.Context, key string) error
	// List calls fn for every object whose key starts with prefix (a plain string prefix,
	// as in S3: "results/tsk_X" matches "results/tsk_X-a1.xlsx") and, unless olderThan is
	// zero, whose ModTime is before olderThan. The order is unspecified. An error from fn
	// stops the listing and is returned as it is, so a sweep can stop early with a sentinel
	// of its own. fn may delete the object it is given.
	List(ctx context.Context, prefix string, olderThan time.Time, fn func(Info) error) error
	// AbortIncomplete aborts the incomplete multipart uploads whose key starts with prefix
	// (as in List) and that were initiated before olderThan (zero: all), at most limit of
	// them (0: no limit), and returns how many it aborted. A process killed mid-upload
	// cannot abort its own, and their parts take space until someone does. The local
	// backend has no multipart uploads: it validates the prefix and answers 0.
	AbortIncomplete(ctx context.Context, prefix string, olderThan time.Time, limit int) (int, error)
	// Presign returns a URL that downloads key without credentials for ttl (0: the
	// configured PresignTTL), offered to the browser as an attachment called filename.
	// ok is false when the backend cannot (local) or is configured not to (Presign off):
	// the caller then streams the object itself with Open and ContentDisposition. Presign
	// does not check that the object exists.
	Presign(ctx context.Context, key, filename string, ttl time.Duration) (url string, ok bool, err error)

	// CreateTemp opens a new local scratch file for a writer that needs a real file
	// (excelize), named prefix-<random>/part<ext> in a directory of its own under the
	// scratch dir, so whatever the writer spills beside it goes when the directory goes.
	// Finish it with Commit, or drop it with Discard.
	CreateTemp(prefix, ext string) (*os.File, error)
	// Commit makes a finished CreateTemp file the object key, atomically, and removes the
	// temp file and its directory: the local backend syncs and renames it, the s3 backend
	// uploads it (in parallel parts read with ReadAt) and deletes it. On error the temp file
	// is left for the caller to Discard or Commit again.
	Commit(ctx context.Context, tmp *os.File, key, contentType string) (Info, error)
	// SpoolLocal copies an object into a new file in dir (the scratch dir when empty),
	// through a fixed buffer, and returns it positioned at the start: the alternative to
	// Open's ranged reads for a reader that wants a local file. The caller closes and
	// removes it (Discard does both).
	SpoolLocal(ctx context.Context, key, dir string) (*os.File, error)
	// Move renames the object src to dst (replacing dst), for an upload that is stored
	// before its final name (its content hash) is known: the local backend renames the file,
	// the s3 backend copies it on the server (objects up to 5 GiB) and deletes src. dst
	// appears whole or not at all; when the delete of src fails after the copy, src is left
	// for the sweep of its area. A missing src answers ErrNotExist.
	Move(ctx context.Context, src, dst string) error

	// TempDir is this node's local scratch directory (<data dir>/tmp) on both backends:
	// CreateTemp files, spills of readers (shared strings) and SpoolLocal copies live there.
	// It is never shared between nodes: each node sweeps its own.
	TempDir() string
	// ListTemp calls fn for every entry of the scratch directory (a CreateTemp directory or a
	// file) last modified before olderThan (zero: all), by name.
	ListTemp(olderThan time.Time, fn func(name string, modTime time.Time) error) error
	// RemoveTemp deletes the scratch entry called name (as ListTemp gives it), with whatever
	// is in it. A missing entry is not an error.
	RemoveTemp(name string) error
	// RemoveAttemptTemp deletes this node's scratch entries of every attempt of a task except
	// attempt keep (0: all of them), by their AttemptPrefix names, and returns how many.
	RemoveAttemptTemp(taskNo string, keep int) (int, error)

	// Ping checks that the store is usable (the data dir exists, the bucket answers), for
	// readiness probes.
	Ping(ctx context.Context) error
	// Backend names the backend: "local" or "s3".
	Backend() string
}

// Object is an open object: sequential reads and seeks, and random access through ReadAt
// (archive/zip.NewReader(obj, obj.Size()) works on both backends). An Object is not safe
// for concurrent Read/Seek; concurrent ReadAt calls are.
type Object interface {
	io.ReadSeekCloser
	io.ReaderAt
	// Size is the object's length in bytes.
	Size() int64
}

// Info describes a stored object.
type Info struct {
	Key         string
	Size        int64
	ModTime     time.Time
	ContentType string // as stored (s3) or by extension (local)
}

// Errors callers tell apart with errors.Is.
var (
	// ErrNotExist is returned for a key with no object. errors.Is(err, fs.ErrNotExist) holds
	// too, so code written against os keeps working.
	ErrNotExist = fmt.Errorf("object does not exist: %w", fs.ErrNotExist)
	// ErrInvalidKey is returned for a key that is empty, absolute, or would escape the store.
	ErrInvalidKey = errors.New("invalid storage key")
	// ErrChanged is returned by reads of an Object whose key was overwritten after it was
	// opened (s3: the ETag no longer matches). The reader must open it again; it never sees
	// a mix of the old and the new object.
	ErrChanged = errors.New("object changed while it was being read")
	// ErrUnavailable is returned (wrapping the cause) when the object store could not be
	// reached or failed to answer (s3: a network error, a timeout, a 5xx answer): the
	// operation may succeed once the store is back. A refusal (no such key, access denied)
	// is not one.
	ErrUnavailable = errors.New("the object store cannot be reached")
)

// Health follows the object store's availability (internal/outage's Tracker).
type Health interface {
	// Fail records a request the store did not answer, or answered with a server error.
	Fail(err error)
	// OK records a request the store answered.
	OK()
}

// Backends.
const (
	BackendLocal = "local"
	BackendS3    = "s3"
)

// Limits of the s3 backend, and where scratch files go.
const (
	// MinPartSize is the smallest part S3 accepts.
	MinPartSize = 5 << 20
	// maxPresignTTL is the longest S3 signs for.
	maxPresignTTL = 7 * 24 * time.Hour
	// ScratchDir is the scratch area under the local root: the data dir's temp area as it
	// has always been, so an existing data dir keeps working.
	ScratchDir = "tmp"
)

// Config selects and configures a backend. Environment variable names in error messages
// (TASKCENTER_STORAGE_*) are those the service's config reads.
type Config struct {
	// Backend is "local" (default: files under the data dir) or "s3".
	Backend string
	// Endpoint is the S3 service's host:port (default 127.0.0.1:7070, the gateway
	// scripts/services.sh starts). An http:// or https:// prefix sets TLS.
	Endpoint string
	// Bucket holds every object (default "taskcenter").
	Bucket string
	// Region signs requests (default "us-east-1"); set it, or minio-go asks the server.
	Region string
	// AccessKey and SecretKey are the credentials; they come from the environment
	// (TASKCENTER_STORAGE_ACCESS_KEY, TASKCENTER_STORAGE_SECRET_KEY), never from a file in
	// the repository. Required for s3.
	AccessKey string
	SecretKey string
	// PathStyle forces path-style requests (http://host/bucket/key), which most
	// self-hosted S3 services need. Default false: minio-go decides (virtual-host style for
	// AWS, Google and Aliyun endpoints, path style elsewhere).
	PathStyle bool
	// TLS speaks HTTPS to Endpoint. Default false.
	TLS bool
	// Presign hands out presigned URLs for downloads; when false the API streams objects
	// itself. Only meaningful for s3 (the service's config defaults it to true).
	Presign bool
	// PresignTTL is how long a presigned URL works (default the configuration's, 5m; at most 7
	// days).
	PresignTTL time.Duration
	// PresignEndpoint is the host:port presigned URLs name, when browsers reach the S3
	// service at another address than the service does (default: Endpoint). The URL's
	// signature covers the host, so it cannot be rewritten afterwards.
	PresignEndpoint string
	// CreateBucket creates Bucket at start-up when it is missing. Default false: a missing
	// bucket is an error that says how to create it.
	CreateBucket bool
	// PartSize is the multipart part size in bytes, at least MinPartSize: the memory one Put
	// of unknown size holds, and with 10,000 parts the ceiling of one object (default the
	// configuration's, 16 MiB: 160 GiB).
	PartSize int64
	// Health is told how each request to the S3 service went (s3 only). Nil: nobody.
	Health Health
}

// New opens the configured backend. localRoot is this node's data dir: the local backend
// keeps its objects there (keys are paths relative to it, the layout the data dir has always had),
// and both backends keep scratch files under localRoot/tmp. For s3, New checks that the
// endpoint answers, that the credentials are accepted and that the bucket exists (creating
// it when allowed), and says what to do when one of them fails.
func New(ctx context.Context, cfg Config, localRoot string) (Store, error) {
	switch cmp.Or(cfg.Backend, BackendLocal) {
	case BackendLocal:
		return newLocal(localRoot)
	case BackendS3:
		return newS3(ctx, cfg, localRoot)
	default:
		return nil, fmt.Errorf("storage: unknown backend %q: set TASKCENTER_STORAGE_BACKEND to %q or %q", cfg.Backend, BackendLocal, BackendS3)
	}
}

// maxKeyLen is S3's limit on a key, in bytes.
const maxKeyLen = 1024

// ValidKey checks that key is a clean relative slash path: not empty, not absolute, no
// "." or ".." or empty segments, no backslashes, NUL or other control characters, valid
// UTF-8, at most 1024 bytes. Such a key means the same object on every backend and can
// never leave the local root.
func ValidKey(key string) error {
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", ErrInvalidKey, key, why) }
	switch {
	case key == "":
		return bad("empty")
	case len(key) > maxKeyLen:
		return bad("longer than 1024 bytes")
	case !utf8.ValidString(key):
		return bad("not valid UTF-8")
	case strings.HasPrefix(key, "/"):
		return bad("absolute")
	case strings.ContainsRune(key, '\\'):
		return bad("contains a backslash")
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f {
			return bad("contains a control character")
		}
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return bad("empty path segment")
		case ".", "..":
			return bad("relative path segment")
		}
	}
	return nil
}

// validPrefix checks a List prefix: empty (everything), or a key, or a key followed by "/".
func validPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if err := ValidKey(strings.TrimSuffix(prefix, "/")); err != nil {
		return fmt.Errorf("list prefix: %w", err)
	}
	return nil
}

// ContentDisposition is the Content-Disposition of a download called filename: an
// attachment with an ASCII fallback name for old clients and the exact name in RFC 5987
// filename* form, so 客户导出.xlsx reaches the user as 客户导出.xlsx. The API uses it when it
// streams an object; presigned URLs ask S3 to send the same header.
func ContentDisposition(filename string) string {
	filename = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '/' || r == '\\' {
			return '_'
		}
		return r
	}, filename)
	if filename == "" {
		return "attachment"
	}
	fallback := strings.Map(func(r rune) rune {
		if r > 0x7e || r == '"' || r == '%' {
			return '_'
		}
		return r
	}, filename)
	var b strings.Builder
	b.WriteString(`attachment; filename="`)
	b.WriteString(fallback)
	b.WriteString(`"`)
	if fallback != filename {
		b.WriteString("; filename*=UTF-8''")
		b.WriteString(rfc5987Escape(filename))
	}
	return b.String()
}

// rfc5987Escape percent-encodes everything but RFC 5987's attr-char.
func rfc5987Escape(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$&+-.^_`|~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xf])
	}
	return b.String()
}

// contentTypeOf guesses a type from a key's extension, for the local backend (which keeps
// no metadata) and for uploads given none.
func contentTypeOf(key string) string {
	switch ext := strings.ToLower(path.Ext(key)); ext {
	case ".xlsx":
		return "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
	case ".xls":
		return "application/vnd.ms-excel"
	case ".csv":
		return "text/csv; charset=utf-8"
	case ".json":
		return "application/json"
	default:
		if t := mime.TypeByExtension(ext); t != "" {
			return t
		}
		return "application/octet-stream"
	}
}

// scratch is the local temp area both backends use for CreateTemp and SpoolLocal.
type scratch struct {
	dir string // absolute <root>/tmp
}

func newScratch(root string) (scratch, error) {
	if root == "" {
		return scratch{}, errors.New("storage: no local data dir given (TASKCENTER_DATA_DIR)")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return scratch{}, fmt.Errorf("storage: data dir %q: %w", root, err)
	}
	dir := filepath.Join(abs, ScratchDir)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return scratch{}, fmt.Errorf("storage: create scratch dir: %w (check that TASKCENTER_DATA_DIR is writable)", err)
	}
	return scratch{dir: dir}, nil
}

func (s scratch) CreateTemp(prefix, ext string) (*os.File, error) {
	if strings.ContainsAny(prefix+ext, `/\`) {
		return nil, fmt.Errorf("storage: temp prefix %q or extension %q contains a path separator", prefix, ext)
	}
	dir, err := os.MkdirTemp(s.dir, cmp.Or(prefix, "tmp")+"-*")
	if err != nil {
		return nil, fmt.Errorf("storage: create temp dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "part"+ext), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		os.Remove(dir)
		return nil, fmt.Errorf("storage: create temp file: %w", err)
	}
	return f, nil
}

// TempDir implements Store.
func (s scratch) TempDir() string { return s.dir }

// ListTemp implements Store.
func (s scratch) ListTemp(olderThan time.Time, fn func(name string, modTime time.Time) error) error {
	entries, err := os.ReadDir(s.dir) // sorted by name
	if err != nil {
		return fmt.Errorf("storage: list scratch dir: %w", err)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		if !olderThan.IsZero() && !info.ModTime().Before(olderThan) {
			continue
		}
		if err := fn(e.Name(), info.ModTime()); err != nil {
			return err
		}
	}
	return nil
}

// RemoveTemp implements Store.
func (s scratch) RemoveTemp(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
		return fmt.Errorf("storage: %q is not a scratch entry", name)
	}
	if err := os.RemoveAll(filepath.Join(s.dir, name)); err != nil {
		return fmt.Errorf("storage: remove scratch entry: %w", err)
	}
	return nil
}

// RemoveAttemptTemp implements Store.
func (s scratch) RemoveAttemptTemp(taskNo string, keep int) (int, error) {
	if taskNo == "" || strings.ContainsAny(taskNo, `/\*?[`) {
		return 0, fmt.Errorf("storage: %q is not a task number", taskNo)
	}
	matches, err := filepath.Glob(filepath.Join(s.dir, taskNo+"-*"))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range matches {
		owner, attempt := TempOwner(filepath.Base(m))
		if owner != taskNo || keep != 0 && attempt == keep {
			continue
		}
		if os.RemoveAll(m) == nil {
			n++
		}
	}
	return n, nil
}

// ownsTemp reports whether p is a file CreateTemp made.
func (s scratch) ownsTemp(p string) bool {
	return filepath.Dir(filepath.Dir(p)) == s.dir
}

// Discard closes and removes a temp file that will not be committed (CreateTemp's
// directory with it) or a SpoolLocal copy. It is safe on nil and after a failed Commit.
func Discard(tmp *os.File) {
	if tmp == nil {
		return
	}
	tmp.Close()
	os.Remove(tmp.Name())
	if dir := filepath.Dir(tmp.Name()); filepath.Base(filepath.Dir(dir)) == ScratchDir && strings.HasPrefix(tmp.Name(), dir+string(filepath.Separator)+"part") {
		os.RemoveAll(dir)
	}
}

// syncClose flushes a finished temp file to disk and closes it.
func syncClose(tmp *os.File) error {
	if err := tmp.Sync(); err != nil && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("storage: sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("storage: close %s: %w", tmp.Name(), err)
	}
	return nil
}

// spool is SpoolLocal for either backend: it opens key with open and copies the object into
// a new file in dir (the scratch dir when empty).
func (s scratch) spool(ctx context.Context, open func(context.Context, string) (Object, error), key, dir string) (*os.File, error) {
	obj, err := open(ctx, key)
	if err != nil {
		return nil, err
	}
	defer obj.Close()
	if dir == "" {
		dir = s.dir
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("storage: spool %s: %w", key, err)
	}
	f, err := os.CreateTemp(dir, "spool-*"+path.Ext(key))
	if err != nil {
		return nil, fmt.Errorf("storage: spool %s: %w", key, err)
	}
	n, err := io.Copy(f, ctxReader{ctx: ctx, r: obj})
	if err == nil && n != obj.Size() {
		err = fmt.Errorf("copied %d of %d bytes", n, obj.Size())
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("storage: spool %s: %w", key, err)
	}
	return f, nil
}

// ctxReader stops a copy when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
