// Package files keeps taskcenter's files under the data dir: uploads, results, and the temp
// files jobs write before an atomic rename. The database stores paths relative to the root,
// so the data dir can move (or be a shared mount when workers scale out).
package files

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Areas under the root.
const (
	Uploads = "uploads"
	Results = "results"
	Temp    = "tmp"
)

// Store is a directory of task files.
type Store struct {
	root string
}

// New makes sure the areas exist under root.
func New(root string) (*Store, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("data dir %q: %w", root, err)
	}
	for _, area := range []string{Uploads, Results, Temp} {
		if err := os.MkdirAll(filepath.Join(abs, area), 0o750); err != nil {
			return nil, fmt.Errorf("data dir: %w", err)
		}
	}
	return &Store{root: abs}, nil
}

// Root is the absolute data directory.
func (s *Store) Root() string { return s.root }

// Path turns a stored relative path into an absolute one, refusing anything that would
// leave the root.
func (s *Store) Path(rel string) (string, error) {
	clean := filepath.Clean(filepath.FromSlash(rel))
	if rel == "" || filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("file path %q is outside the data dir", rel)
	}
	return filepath.Join(s.root, clean), nil
}

// CreateTemp opens a new temp file whose name starts with prefix (a task number), so
// cleanup can find the partial files of a task.
func (s *Store) CreateTemp(prefix, ext string) (*os.File, error) {
	f, err := os.CreateTemp(filepath.Join(s.root, Temp), prefix+"-*"+ext)
	if err != nil {
		return nil, fmt.Errorf("create temp file: %w", err)
	}
	return f, nil
}

// Commit makes a finished temp file durable and moves it to rel atomically: readers see
// either nothing or the whole file.
func (s *Store) Commit(tmp *os.File, rel string) error {
	dst, err := s.Path(rel)
	if err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("move result into place: %w", err)
	}
	if d, err := os.Open(filepath.Dir(dst)); err == nil {
		d.Sync() //nolint:errcheck // best effort: makes the rename itself durable
		d.Close()
	}
	return nil
}

// Discard removes a temp file that will not be committed.
func Discard(tmp *os.File) {
	tmp.Close()
	os.Remove(tmp.Name())
}

// Remove deletes a stored file; a missing file is not an error.
func (s *Store) Remove(rel string) error {
	p, err := s.Path(rel)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// RemoveTemp deletes the temp files of a task (prefix) older than olderThan. It returns how
// many it removed.
func (s *Store) RemoveTemp(prefix string, olderThan time.Duration) (int, error) {
	matches, err := filepath.Glob(filepath.Join(s.root, Temp, prefix+"-*"))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range matches {
		info, err := os.Stat(m)
		if err != nil || time.Since(info.ModTime()) < olderThan {
			continue
		}
		if os.Remove(m) == nil {
			n++
		}
	}
	return n, nil
}
