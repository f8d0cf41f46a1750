package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// Local keeps objects as files under a root directory: key "results/x.xlsx" is the file
// <root>/results/x.xlsx, the layout the data dir has always had, so an existing data dir
// works unchanged. Writes go to a temp file in <root>/tmp (the same filesystem), are synced
// and renamed into place.
type Local struct {
	scratch
	root string
}

var _ Store = (*Local)(nil)

func newLocal(root string) (*Local, error) {
	sc, err := newScratch(root)
	if err != nil {
		return nil, err
	}
	return &Local{scratch: sc, root: filepath.Dir(sc.dir)}, nil
}

// Root is the absolute data directory.
func (l *Local) Root() string { return l.root }

// Backend implements Store.
func (l *Local) Backend() string { return BackendLocal }

// path turns a key into the file's path.
func (l *Local) path(key string) (string, error) {
	if err := ValidKey(key); err != nil {
		return "", fmt.Errorf("storage: %w", err)
	}
	return filepath.Join(l.root, filepath.FromSlash(key)), nil
}

// Put implements Store.
func (l *Local) Put(ctx context.Context, key string, r io.Reader, size int64, _ string) (Info, error) {
	if _, err := l.path(key); err != nil {
		return Info{}, err
	}
	tmp, err := l.CreateTemp("put", path.Ext(key))
	if err != nil {
		return Info{}, err
	}
	src := io.Reader(ctxReader{ctx: ctx, r: r})
	if size >= 0 {
		src = io.LimitReader(src, size)
	}
	n, err := io.Copy(tmp, src)
	if err == nil && size >= 0 && n != size {
		err = fmt.Errorf("%w: the reader ended after %d of %d bytes", io.ErrUnexpectedEOF, n, size)
	}
	if err != nil {
		Discard(tmp)
		return Info{}, fmt.Errorf("storage: put %s: %w", key, err)
	}
	info, err := l.Commit(ctx, tmp, key, "")
	if err != nil {
		Discard(tmp)
		return Info{}, err
	}
	return info, nil
}

// Commit implements Store: sync, rename into place, sync the directory.
func (l *Local) Commit(ctx context.Context, tmp *os.File, key, _ string) (Info, error) {
	dst, err := l.path(key)
	if err != nil {
		return Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return Info{}, fmt.Errorf("storage: commit %s: %w", key, err)
	}
	if !l.ownsTemp(tmp.Name()) {
		return Info{}, fmt.Errorf("storage: commit %s: %s was not made by CreateTemp", key, tmp.Name())
	}
	if err := syncClose(tmp); err != nil {
		return Info{}, err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
		return Info{}, fmt.Errorf("storage: commit %s: %w", key, err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return Info{}, fmt.Errorf("storage: commit %s: move into place: %w", key, err)
	}
	Discard(tmp) // the directory CreateTemp made, and anything spilled into it
	if d, err := os.Open(filepath.Dir(dst)); err == nil {
		d.Sync() //nolint:errcheck // best effort: makes the rename itself durable
		d.Close()
	}
	fi, err := os.Stat(dst)
	if err != nil {
		return Info{}, fmt.Errorf("storage: commit %s: %w", key, err)
	}
	return l.info(key, fi), nil
}

func (l *Local) info(key string, fi fs.FileInfo) Info {
	return Info{Key: key, Size: fi.Size(), ModTime: fi.ModTime(), ContentType: contentTypeOf(key)}
}

// notExist maps a missing file (or a directory where an object was asked for) to ErrNotExist.
func notExist(op, key string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errIsDir) {
		return fmt.Errorf("storage: %s %s: %w", op, key, ErrNotExist)
	}
	return fmt.Errorf("storage: %s %s: %w", op, key, err)
}

var errIsDir = errors.New("is a directory")

// Stat implements Store.
func (l *Local) Stat(_ context.Context, key string) (Info, error) {
	p, err := l.path(key)
	if err != nil {
		return Info{}, err
	}
	fi, err := os.Stat(p)
	if err == nil && fi.IsDir() {
		err = errIsDir
	}
	if err != nil {
		return Info{}, notExist("stat", key, err)
	}
	return l.info(key, fi), nil
}

// localObject is an open file that knows its size.
type localObject struct {
	*os.File
	size int64
}

func (o localObject) Size() int64 { return o.size }

// Open implements Store. The file keeps its content when the key is overwritten or deleted
// while it is open (a rename replaces the directory entry, not the file).
func (l *Local) Open(_ context.Context, key string) (Object, error) {
	p, err := l.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, notExist("open", key, err)
	}
	fi, err := f.Stat()
	if err == nil && fi.IsDir() {
		err = errIsDir
	}
	if err != nil {
		f.Close()
		return nil, notExist("open", key, err)
	}
	return localObject{File: f, size: fi.Size()}, nil
}

// Delete implements Store.
func (l *Local) Delete(_ context.Context, key string) error {
	p, err := l.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("storage: delete %s: %w", key, err)
	}
	return nil
}

// List implements Store, walking the deepest directory the prefix names.
func (l *Local) List(ctx context.Context, prefix string, olderThan time.Time, fn func(Info) error) error {
	if err := validPrefix(prefix); err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	dir := "."
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		dir = prefix[:i]
	}
	start := filepath.Join(l.root, filepath.FromSlash(dir))
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // the prefix's directory does not exist, or went away mid-walk
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(l.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if d.IsDir() {
			// Skip directories that cannot hold a match.
			if p != start && !strings.HasPrefix(key+"/", prefix) && !strings.HasPrefix(prefix, key+"/") {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasPrefix(key, prefix) {
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted while we walked
		}
		if err != nil {
			return err
		}
		if !olderThan.IsZero() && !fi.ModTime().Before(olderThan) {
			return nil
		}
		if err := fn(l.info(key, fi)); err != nil {
			return &callbackError{err}
		}
		return nil
	})
	var ce *callbackError
	if errors.As(err, &ce) {
		return ce.err
	}
	if err != nil {
		return fmt.Errorf("storage: list %q: %w", prefix, err)
	}
	return nil
}

// callbackError carries fn's error out of WalkDir untouched.
type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }

// AbortIncomplete implements Store: a local Put writes a temp file in the scratch dir, never
// a multipart upload, so there is nothing to abort.
func (l *Local) AbortIncomplete(_ context.Context, prefix string, _ time.Time, _ int) (int, error) {
	if err := validPrefix(prefix); err != nil {
		return 0, fmt.Errorf("storage: %w", err)
	}
	return 0, nil
}

// Presign implements Store: the local backend has no URL to give, the API streams.
func (l *Local) Presign(_ context.Context, key, _ string, _ time.Duration) (string, bool, error) {
	if err := ValidKey(key); err != nil {
		return "", false, err
	}
	return "", false, nil
}

// Move implements Store: a rename within the data dir.
func (l *Local) Move(ctx context.Context, src, dst string) error {
	from, err := l.path(src)
	if err != nil {
		return err
	}
	to, err := l.path(dst)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("storage: move %s: %w", src, err)
	}
	if fi, err := os.Stat(from); err != nil || fi.IsDir() {
		if err == nil {
			err = errIsDir
		}
		return notExist("move", src, err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o750); err != nil {
		return fmt.Errorf("storage: move %s: %w", src, err)
	}
	if err := os.Rename(from, to); err != nil {
		return notExist("move", src, err)
	}
	if d, err := os.Open(filepath.Dir(to)); err == nil {
		d.Sync() //nolint:errcheck // best effort: makes the rename itself durable
		d.Close()
	}
	return nil
}

// SpoolLocal implements Store.
func (l *Local) SpoolLocal(ctx context.Context, key, dir string) (*os.File, error) {
	return l.spool(ctx, l.Open, key, dir)
}

// Ping implements Store.
func (l *Local) Ping(context.Context) error {
	fi, err := os.Stat(l.dir)
	if err == nil && !fi.IsDir() {
		err = errIsDir
	}
	if err != nil {
		return fmt.Errorf("storage: data dir %s: %w", l.root, err)
	}
	return nil
}
