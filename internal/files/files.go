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
	"strconv"
	"strings"
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

// AttemptPrefix is the temp-file prefix of one attempt of a task: cleanup and takeovers
// delete exactly the partial files of attempts that are dead.
func AttemptPrefix(taskNo string, attempt int) string { return fmt.Sprintf("%s-a%d", taskNo, attempt) }

// CreateTemp opens a new temp file in a directory of its own under the temp area, named
// prefix-<random> (prefix: AttemptPrefix, or what the file is for). Anything a writer
// spills beside the file (excelize's own temp files) lands in the same directory, so
// removing the directory removes every trace of an abandoned write.
func (s *Store) CreateTemp(prefix, ext string) (*os.File, error) {
	dir, err := os.MkdirTemp(filepath.Join(s.root, Temp), prefix+"-*")
	if err != nil {
		return nil, fmt.Errorf("create temp dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "part"+ext), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		os.Remove(dir)
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
	removeTempDir(tmp.Name())
	if d, err := os.Open(filepath.Dir(dst)); err == nil {
		d.Sync() //nolint:errcheck // best effort: makes the rename itself durable
		d.Close()
	}
	return nil
}

// Discard removes a temp file that will not be committed, with its directory.
func Discard(tmp *os.File) {
	tmp.Close()
	os.Remove(tmp.Name())
	removeTempDir(tmp.Name())
}

// removeTempDir removes the directory CreateTemp made for the file at p, with whatever else
// was spilled into it.
func removeTempDir(p string) {
	dir := filepath.Dir(p)
	if filepath.Base(filepath.Dir(dir)) == Temp {
		os.RemoveAll(dir)
	}
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

// RemoveTemp deletes a temp entry (a file, or a directory CreateTemp made) by its path
// relative to the data dir.
func (s *Store) RemoveTemp(rel string) error {
	p, err := s.Path(rel)
	if err != nil {
		return err
	}
	if filepath.Base(filepath.Dir(p)) != Temp {
		return fmt.Errorf("%q is not a temp entry", rel)
	}
	return os.RemoveAll(p)
}

// RemoveAttemptTemp deletes the temp entries of every attempt of a task except attempt keep
// (0: all of them). It returns how many it removed.
func (s *Store) RemoveAttemptTemp(taskNo string, keep int) (int, error) {
	matches, err := filepath.Glob(filepath.Join(s.root, Temp, taskNo+"-*"))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range matches {
		if _, attempt := TempOwner(filepath.Base(m)); keep != 0 && attempt == keep {
			continue
		}
		if os.RemoveAll(m) == nil {
			n++
		}
	}
	return n, nil
}

// TempOwner reads the task number and attempt from a temp entry's name
// ("tsk_X-a3-123456"); attempt is 0 when the name carries none.
func TempOwner(name string) (taskNo string, attempt int) {
	taskNo, rest, _ := strings.Cut(name, "-")
	if a, _, ok := strings.Cut(rest, "-"); ok && len(a) > 1 && a[0] == 'a' {
		if n, err := strconv.Atoi(a[1:]); err == nil {
			attempt = n
		}
	}
	return taskNo, attempt
}

// ResultOwner reads the task number and attempt from a result file's name
// ("tsk_X-a3.xlsx", "tsk_X-a3-errors.xlsx"); ok is false for any other name.
func ResultOwner(name string) (taskNo string, attempt int, ok bool) {
	base := strings.TrimSuffix(name, filepath.Ext(name))
	taskNo, rest, found := strings.Cut(base, "-")
	if !found || taskNo == "" {
		return "", 0, false
	}
	a, _, _ := strings.Cut(rest, "-")
	if len(a) < 2 || a[0] != 'a' {
		return "", 0, false
	}
	n, err := strconv.Atoi(a[1:])
	if err != nil || n < 1 {
		return "", 0, false
	}
	return taskNo, n, true
}
