package storage_test

import (
	"archive/zip"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/testenv"
)

// env is one backend under test.
type env struct {
	backend string
	store   storage.Store
	root    string      // the local data dir (scratch for s3)
	gw      *testenv.S3 // nil for local
	cfg     storage.Config
}

// newEnv opens a fresh store of the named backend; tweak adjusts the config first.
func newEnv(t *testing.T, backend string, tweak func(*storage.Config)) *env {
	t.Helper()
	e := &env{backend: backend, root: t.TempDir()}
	e.cfg = storage.Config{Backend: backend}
	if backend == storage.BackendS3 {
		e.gw = testenv.NewS3(t)
		e.cfg = storage.Config{
			Backend:      storage.BackendS3,
			Endpoint:     e.gw.Endpoint,
			Bucket:       "taskcenter-test",
			Region:       e.gw.Region,
			AccessKey:    e.gw.AccessKey,
			SecretKey:    e.gw.SecretKey,
			PathStyle:    true,
			Presign:      true,
			CreateBucket: true,
			PartSize:     storage.MinPartSize,
		}
	}
	if tweak != nil {
		tweak(&e.cfg)
	}
	st, err := storage.New(t.Context(), e.cfg, e.root)
	if err != nil {
		t.Fatalf("storage.New(%s): %v", backend, err)
	}
	e.store = st
	return e
}

var backends = []string{storage.BackendLocal, storage.BackendS3}

// eachBackend runs fn as a parallel subtest per backend, each with its own store.
func eachBackend(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			fn(t, newEnv(t, b, nil))
		})
	}
}

// randomBytes is n reproducible bytes.
func randomBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16)})
	r.Read(b) //nolint:errcheck // ChaCha8 never fails
	return b
}

func put(t *testing.T, e *env, key string, data []byte, size int64) storage.Info {
	t.Helper()
	var r io.Reader = bytes.NewReader(data)
	if size < 0 {
		r = struct{ io.Reader }{r} // hide Len/ReadAt: a stream of unknown length
	}
	info, err := e.store.Put(t.Context(), key, r, size, "")
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	return info
}

func readAll(t *testing.T, e *env, key string) []byte {
	t.Helper()
	obj, err := e.store.Open(t.Context(), key)
	if err != nil {
		t.Fatalf("open %s: %v", key, err)
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	if int64(len(b)) != obj.Size() {
		t.Fatalf("read %s: %d bytes, Size() says %d", key, len(b), obj.Size())
	}
	return b
}

func TestPutOpenStat(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		cases := []struct {
			name string
			key  string
			n    int
			size func(n int) int64
		}{
			{"empty object", "uploads/2026/empty.csv", 0, func(n int) int64 { return int64(n) }},
			{"known size", "uploads/2026/07/known.xlsx", 3<<20 + 17, func(n int) int64 { return int64(n) }},
			{"unknown size, small", "results/tsk_S-a1.xlsx", 1234, func(int) int64 { return -1 }},
			{"unknown size, one part", "results/tsk_S-a2.xlsx", 2<<20 + 5, func(int) int64 { return -1 }},
			{"unknown size, several parts", "results/tsk_S-a3.xlsx", 11<<20 + 3, func(int) int64 { return -1 }},
			{"unicode key", "uploads/客户/导出 2026.xlsx", 100, func(n int) int64 { return int64(n) }},
		}
		for i, c := range cases {
			data := randomBytes(uint64(i), c.n)
			before := time.Now().Add(-2 * time.Second) // S3 times have a one-second grain
			info := put(t, e, c.key, data, c.size(c.n))
			after := time.Now().Add(2 * time.Second)
			if info.Key != c.key || info.Size != int64(c.n) {
				t.Errorf("%s: put answered %+v, want key %s size %d", c.name, info, c.key, c.n)
			}
			if got := readAll(t, e, c.key); !bytes.Equal(got, data) {
				t.Errorf("%s: read back %d bytes that differ from the %d put", c.name, len(got), len(data))
			}
			st, err := e.store.Stat(t.Context(), c.key)
			if err != nil {
				t.Fatalf("%s: stat: %v", c.name, err)
			}
			if st.Size != int64(c.n) || st.Key != c.key || st.ModTime.Before(before) || st.ModTime.After(after) {
				t.Errorf("%s: stat = %+v, want size %d and a modtime between %s and %s", c.name, st, c.n, before, after)
			}
			if strings.HasSuffix(c.key, ".xlsx") && st.ContentType != "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" {
				t.Errorf("%s: content type %q, want the xlsx type", c.name, st.ContentType)
			}
		}
	})
}

func TestPutKeepsGivenContentType(t *testing.T) {
	e := newEnv(t, storage.BackendS3, nil)
	if _, err := e.store.Put(t.Context(), "tmp/x.bin", strings.NewReader("x"), 1, "application/x-taskcenter"); err != nil {
		t.Fatal(err)
	}
	st, err := e.store.Stat(t.Context(), "tmp/x.bin")
	if err != nil || st.ContentType != "application/x-taskcenter" {
		t.Fatalf("stat = %+v, %v; want the content type given to Put", st, err)
	}
}

func TestReadAtSeek(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		const size = 3<<20 + 123
		data := randomBytes(7, size)
		put(t, e, "uploads/r.bin", data, size)
		obj, err := e.store.Open(t.Context(), "uploads/r.bin")
		if err != nil {
			t.Fatal(err)
		}
		defer obj.Close()
		if obj.Size() != size {
			t.Fatalf("Size() = %d, want %d", obj.Size(), size)
		}
		check := func(off, n int64) {
			t.Helper()
			p := make([]byte, n)
			got, err := obj.ReadAt(p, off)
			wantN := max(0, min(n, size-off))
			if int64(got) != wantN {
				t.Fatalf("ReadAt(%d bytes at %d) = %d bytes, want %d (err %v)", n, off, got, wantN, err)
			}
			if wantN < n && !errors.Is(err, io.EOF) {
				t.Fatalf("ReadAt(%d bytes at %d) past the end: err %v, want io.EOF", n, off, err)
			}
			if wantN == n && err != nil {
				t.Fatalf("ReadAt(%d bytes at %d): %v", n, off, err)
			}
			if got > 0 && !bytes.Equal(p[:got], data[off:off+int64(got)]) {
				t.Fatalf("ReadAt(%d bytes at %d) returned other bytes", n, off)
			}
		}
		for _, r := range [][2]int64{
			{0, 10}, {size - 10, 10}, {size - 5, 10}, {size, 1}, {size + 100, 1},
			{1<<20 - 3, 6}, {2<<20 - 1, 2}, // across read-ahead blocks
			{500, 2 << 20}, // a big read, not cached
			{0, size}, {100, 0},
		} {
			check(r[0], r[1])
		}
		rng := rand.New(rand.NewPCG(1, 2))
		for range 200 {
			check(rng.Int64N(size), rng.Int64N(64<<10)+1)
		}

		// Concurrent ReadAt is allowed (archive/zip and the race detector both care).
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				p := make([]byte, 4096)
				for i := range 20 {
					off := int64((g*7919 + i*104729) % (size - 4096))
					if _, err := obj.ReadAt(p, off); err != nil || !bytes.Equal(p, data[off:off+4096]) {
						t.Errorf("concurrent ReadAt at %d: %v or other bytes", off, err)
						return
					}
				}
			})
		}
		wg.Wait()

		// Read and Seek are independent of ReadAt.
		seekRead := func(off int64, whence int, n int, wantPos int64) {
			t.Helper()
			pos, err := obj.Seek(off, whence)
			if err != nil || pos != wantPos {
				t.Fatalf("Seek(%d, %d) = %d, %v; want %d", off, whence, pos, err, wantPos)
			}
			p := make([]byte, n)
			if _, err := io.ReadFull(obj, p); err != nil {
				t.Fatalf("read %d after seek to %d: %v", n, pos, err)
			}
			if !bytes.Equal(p, data[wantPos:wantPos+int64(n)]) {
				t.Fatalf("read after seek to %d returned other bytes", pos)
			}
		}
		seekRead(1<<20, io.SeekStart, 1000, 1<<20)
		check(5, 5) // a ReadAt between two Reads does not move the Read position
		seekRead(-500, io.SeekCurrent, 100, 1<<20+500)
		seekRead(-10, io.SeekEnd, 10, size-10)
		if n, err := obj.Read(make([]byte, 1)); n != 0 || err != io.EOF {
			t.Fatalf("Read at the end = %d, %v; want 0, io.EOF", n, err)
		}
		if _, err := obj.Seek(-1, io.SeekStart); err == nil {
			t.Fatal("Seek to a negative position succeeded")
		}
	})
}

// zipFixture is a small .xlsx-like archive: a deflated sheet of a few MB (so reads cross
// read-ahead blocks), a stored member, and small parts.
func zipFixture(t *testing.T) ([]byte, map[string][]byte) {
	t.Helper()
	var sheet strings.Builder
	sheet.WriteString(`<?xml version="1.0" encoding="UTF-8"?><worksheet><sheetData>`)
	for i := range 40000 {
		fmt.Fprintf(&sheet, `<row r="%d"><c t="inlineStr"><is><t>C%06d 客户 %d</t></is></c></row>`, i+1, i, i*7919%100003)
	}
	sheet.WriteString(`</sheetData></worksheet>`)
	members := map[string][]byte{
		"[Content_Types].xml":      []byte(`<?xml version="1.0"?><Types/>`),
		"xl/workbook.xml":          []byte(`<workbook><sheets><sheet name="客户"/></sheets></workbook>`),
		"xl/worksheets/sheet1.xml": []byte(sheet.String()),
		"xl/media/blob.bin":        randomBytes(3, 700<<10),
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range members {
			if !yield(n) {
				return
			}
		}
	})
	for _, name := range names {
		method := zip.Deflate
		if strings.HasSuffix(name, ".bin") {
			method = zip.Store
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: method})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(members[name]) //nolint:errcheck // a bytes.Buffer
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), members
}

func TestZipRandomAccess(t *testing.T) {
	archive, members := zipFixture(t)
	eachBackend(t, func(t *testing.T, e *env) {
		put(t, e, "uploads/fixture.xlsx", archive, -1)
		obj, err := e.store.Open(t.Context(), "uploads/fixture.xlsx")
		if err != nil {
			t.Fatal(err)
		}
		defer obj.Close()
		zr, err := zip.NewReader(obj, obj.Size())
		if err != nil {
			t.Fatalf("zip.NewReader over the object: %v", err)
		}
		if len(zr.File) != len(members) {
			t.Fatalf("%d members, want %d", len(zr.File), len(members))
		}
		// Back to front: random access, not one pass.
		for i := len(zr.File) - 1; i >= 0; i-- {
			f := zr.File[i]
			rc, err := f.Open()
			if err != nil {
				t.Fatalf("open member %s: %v", f.Name, err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatalf("read member %s: %v", f.Name, err)
			}
			if !bytes.Equal(got, members[f.Name]) {
				t.Fatalf("member %s: %d bytes that differ from the %d written", f.Name, len(got), len(members[f.Name]))
			}
		}
	})
}

func TestOverwriteIsAtomic(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		const key = "results/tsk_O-a1.xlsx"
		v1 := bytes.Repeat([]byte{'a'}, 2<<20)
		v2 := bytes.Repeat([]byte{'b'}, 3<<20+1)
		put(t, e, key, v1, int64(len(v1)))
		old, err := e.store.Open(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		defer old.Close()
		put(t, e, key, v2, -1)

		// The reader of the old object gets the old object whole (local: the file it holds)
		// or is told it changed (s3: its ETag no longer matches); never a mix.
		got, err := io.ReadAll(old)
		switch {
		case err == nil && bytes.Equal(got, v1):
		case err != nil && errors.Is(err, storage.ErrChanged) && e.backend == storage.BackendS3:
			if bytes.ContainsRune(got, 'b') {
				t.Fatal("the old reader saw bytes of the new object")
			}
		default:
			t.Fatalf("old reader: %d bytes, err %v; want the old object whole, or ErrChanged on s3", len(got), err)
		}
		if e.backend == storage.BackendLocal && err != nil {
			t.Fatalf("local: the open file must keep its content: %v", err)
		}
		if got := readAll(t, e, key); !bytes.Equal(got, v2) {
			t.Fatal("a new reader does not see the new object")
		}

		// Under concurrent overwrites every successful read is one whole version.
		versions := [][]byte{
			bytes.Repeat([]byte{'x'}, 1<<20),
			bytes.Repeat([]byte{'y'}, 1<<20+7),
			bytes.Repeat([]byte{'z'}, 6<<20+1), // a multipart upload on s3
		}
		put(t, e, key, versions[0], int64(len(versions[0])))
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		wg.Go(func() {
			defer cancel()
			for i := range 12 {
				v := versions[i%len(versions)]
				size := int64(len(v))
				if i%2 == 1 {
					size = -1
				}
				if _, err := e.store.Put(t.Context(), key, bytes.NewReader(v), size, ""); err != nil {
					t.Errorf("overwrite %d: %v", i, err)
					return
				}
			}
		})
		var reads, changed sync.Map
		for r := range 4 {
			wg.Go(func() {
				for n := 0; ctx.Err() == nil; n++ {
					obj, err := e.store.Open(ctx, key)
					if err != nil {
						if ctx.Err() == nil {
							t.Errorf("reader %d: open: %v", r, err)
						}
						return
					}
					got, err := io.ReadAll(obj)
					obj.Close()
					if err != nil {
						if ctx.Err() != nil {
							return
						}
						if e.backend == storage.BackendS3 && errors.Is(err, storage.ErrChanged) {
							changed.Store(fmt.Sprint(r, n), true)
							continue
						}
						t.Errorf("reader %d: %v", r, err)
						return
					}
					if !slices.ContainsFunc(versions, func(v []byte) bool { return bytes.Equal(v, got) }) {
						t.Errorf("reader %d read %d bytes that are no version whole", r, len(got))
						return
					}
					reads.Store(fmt.Sprint(r, n), true)
				}
			})
		}
		wg.Wait()
	})
}

func TestMissingObjects(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		const key = "results/missing.xlsx"
		checkMissing := func(when string) {
			t.Helper()
			if _, err := e.store.Stat(ctx, key); !errors.Is(err, storage.ErrNotExist) || !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s: Stat error %v, want ErrNotExist (and fs.ErrNotExist)", when, err)
			}
			if _, err := e.store.Open(ctx, key); !errors.Is(err, storage.ErrNotExist) || !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s: Open error %v, want ErrNotExist (and fs.ErrNotExist)", when, err)
			}
			if _, err := e.store.SpoolLocal(ctx, key, ""); !errors.Is(err, storage.ErrNotExist) {
				t.Errorf("%s: SpoolLocal error %v, want ErrNotExist", when, err)
			}
			if err := e.store.Delete(ctx, key); err != nil {
				t.Errorf("%s: Delete of a missing object: %v, want nil", when, err)
			}
		}
		checkMissing("never written")
		put(t, e, key, []byte("data"), 4)
		if err := e.store.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
		checkMissing("deleted")
		// A "directory" is not an object.
		put(t, e, "results/dir/inner.xlsx", []byte("x"), 1)
		if _, err := e.store.Stat(ctx, "results/dir"); !errors.Is(err, storage.ErrNotExist) {
			t.Errorf("Stat of a key prefix: %v, want ErrNotExist", err)
		}
	})
}

func TestList(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		old := []string{"results/tsk_A-a1.xlsx", "uploads/2026/01/f.xlsx", "tmp/old.part"}
		young := []string{"results/tsk_A-a2-errors.xlsx", "results/tsk_B-a1.xlsx", "results-other/x.csv", "uploads/2026/02/g.xlsx"}
		for _, k := range old {
			put(t, e, k, []byte(k), -1)
		}
		cutoff := ageObjects(t, e, old)
		for _, k := range young {
			put(t, e, k, []byte(k), -1)
		}
		list := func(prefix string, olderThan time.Time) []string {
			t.Helper()
			var keys []string
			err := e.store.List(ctx, prefix, olderThan, func(i storage.Info) error {
				if i.Size != int64(len(i.Key)) {
					t.Errorf("list %q: %s has size %d, want %d", prefix, i.Key, i.Size, len(i.Key))
				}
				keys = append(keys, i.Key)
				return nil
			})
			if err != nil {
				t.Fatalf("list %q: %v", prefix, err)
			}
			slices.Sort(keys)
			return keys
		}
		for _, c := range []struct {
			prefix    string
			olderThan time.Time
			want      []string
		}{
			{"results/", time.Time{}, []string{"results/tsk_A-a1.xlsx", "results/tsk_A-a2-errors.xlsx", "results/tsk_B-a1.xlsx"}},
			{"results/tsk_A", time.Time{}, []string{"results/tsk_A-a1.xlsx", "results/tsk_A-a2-errors.xlsx"}},
			{"results", time.Time{}, []string{"results-other/x.csv", "results/tsk_A-a1.xlsx", "results/tsk_A-a2-errors.xlsx", "results/tsk_B-a1.xlsx"}},
			{"uploads/2026/", time.Time{}, []string{"uploads/2026/01/f.xlsx", "uploads/2026/02/g.xlsx"}},
			{"uploads/2026/0", time.Time{}, []string{"uploads/2026/01/f.xlsx", "uploads/2026/02/g.xlsx"}},
			{"nothing/", time.Time{}, nil},
			{"results/", cutoff, []string{"results/tsk_A-a1.xlsx"}},
			{"", cutoff, []string{"results/tsk_A-a1.xlsx", "tmp/old.part", "uploads/2026/01/f.xlsx"}},
			{"uploads/", cutoff, []string{"uploads/2026/01/f.xlsx"}},
		} {
			if got := list(c.prefix, c.olderThan); !slices.Equal(got, c.want) {
				t.Errorf("list %q older than %v = %q, want %q", c.prefix, c.olderThan, got, c.want)
			}
		}

		// fn's error stops the listing and comes back as it is.
		errEnough := errors.New("enough")
		calls := 0
		err := e.store.List(ctx, "results/", time.Time{}, func(storage.Info) error { calls++; return errEnough })
		if !errors.Is(err, errEnough) || calls != 1 {
			t.Errorf("list stopped by fn: err %v after %d calls, want errEnough after 1", err, calls)
		}
		// A sweep may delete what it is given.
		err = e.store.List(ctx, "results/", time.Time{}, func(i storage.Info) error { return e.store.Delete(ctx, i.Key) })
		if err != nil {
			t.Fatalf("list deleting: %v", err)
		}
		if got := list("results/", time.Time{}); len(got) != 0 {
			t.Errorf("after a deleting sweep results/ holds %q", got)
		}
		if err := e.store.List(ctx, "../", time.Time{}, func(storage.Info) error { return nil }); !errors.Is(err, storage.ErrInvalidKey) {
			t.Errorf("list ../: %v, want ErrInvalidKey", err)
		}
	})
}

// ageObjects makes keys older than the cutoff it returns, and every object written after it
// returns younger: the local backend backdates the files; S3 cannot, so the test waits past
// the one-second grain of S3 times.
func ageObjects(t *testing.T, e *env, keys []string) time.Time {
	t.Helper()
	if e.backend == storage.BackendLocal {
		past := time.Now().Add(-time.Hour)
		for _, k := range keys {
			if err := os.Chtimes(filepath.Join(e.root, filepath.FromSlash(k)), past, past); err != nil {
				t.Fatal(err)
			}
		}
		return time.Now().Add(-30 * time.Minute)
	}
	time.Sleep(2100 * time.Millisecond)
	return time.Now().Add(-time.Second)
}

func TestKeysThatEscapeAreRefused(t *testing.T) {
	bad := []string{
		"", "/etc/passwd", "../x", "uploads/../../x", "uploads/..", "a//b", "a/./b", "./a", "a/",
		`a\b`, `..\x`, "a\x00b", "a\nb", "\xff.xlsx", strings.Repeat("k", 1025),
	}
	for _, k := range bad {
		if err := storage.ValidKey(k); !errors.Is(err, storage.ErrInvalidKey) {
			t.Errorf("ValidKey(%q) = %v, want ErrInvalidKey", k, err)
		}
	}
	for _, k := range []string{"uploads/2026/客户.xlsx", "a b/c+d=e (1).txt", "results/tsk_X-a1.xlsx", "x", "..a/b..", strings.Repeat("k", 1024)} {
		if err := storage.ValidKey(k); err != nil {
			t.Errorf("ValidKey(%q) = %v, want nil", k, err)
		}
	}
	eachBackend(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		for _, k := range bad {
			checks := map[string]error{}
			_, checks["put"] = e.store.Put(ctx, k, strings.NewReader("x"), 1, "")
			_, checks["stat"] = e.store.Stat(ctx, k)
			_, checks["open"] = e.store.Open(ctx, k)
			checks["delete"] = e.store.Delete(ctx, k)
			_, _, checks["presign"] = e.store.Presign(ctx, k, "x.xlsx", 0)
			_, checks["spool"] = e.store.SpoolLocal(ctx, k, "")
			tmp, err := e.store.CreateTemp("t", ".bin")
			if err != nil {
				t.Fatal(err)
			}
			_, checks["commit"] = e.store.Commit(ctx, tmp, k, "")
			storage.Discard(tmp)
			for op, err := range checks {
				if !errors.Is(err, storage.ErrInvalidKey) {
					t.Errorf("%s %q: %v, want ErrInvalidKey", op, k, err)
				}
			}
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(e.root), "x")); err == nil {
			t.Error("a put escaped the data dir")
		}
	})
}

func TestCreateTempCommit(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		data := randomBytes(11, 6<<20+99) // more than one part: a parallel multipart upload on s3
		tmp, err := e.store.CreateTemp("tsk_C-a1", ".xlsx")
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Dir(tmp.Name())
		if !strings.HasPrefix(tmp.Name(), filepath.Join(e.root, "tmp")+string(filepath.Separator)) ||
			!strings.HasPrefix(filepath.Base(dir), "tsk_C-a1-") || filepath.Ext(tmp.Name()) != ".xlsx" {
			t.Fatalf("temp file %s: want tmp/tsk_C-a1-*/part.xlsx under %s", tmp.Name(), e.root)
		}
		if _, err := tmp.Write(data); err != nil {
			t.Fatal(err)
		}
		// What excelize spills beside the file goes with it.
		if err := os.WriteFile(filepath.Join(dir, "excelize-spill"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		info, err := e.store.Commit(ctx, tmp, "results/tsk_C-a1.xlsx", "")
		if err != nil {
			t.Fatalf("commit: %v", err)
		}
		if info.Size != int64(len(data)) || info.Key != "results/tsk_C-a1.xlsx" {
			t.Errorf("commit answered %+v", info)
		}
		if got := readAll(t, e, "results/tsk_C-a1.xlsx"); !bytes.Equal(got, data) {
			t.Fatal("the committed object differs from the temp file")
		}
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the temp dir %s is still there after commit (%v)", dir, err)
		}
		st, err := e.store.Stat(ctx, "results/tsk_C-a1.xlsx")
		if err != nil || !strings.Contains(st.ContentType, "spreadsheetml") {
			t.Errorf("stat after commit: %+v, %v; want the xlsx content type", st, err)
		}

		// Discard drops a temp file that will not be committed, with its directory.
		tmp2, err := e.store.CreateTemp("tsk_C-a2", ".xlsx")
		if err != nil {
			t.Fatal(err)
		}
		storage.Discard(tmp2)
		if _, err := os.Stat(filepath.Dir(tmp2.Name())); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Discard left %s", filepath.Dir(tmp2.Name()))
		}
		// Only CreateTemp files are committed (their directory is removed afterwards).
		other, err := os.CreateTemp(t.TempDir(), "x")
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		if _, err := e.store.Commit(ctx, other, "results/other.xlsx", ""); err == nil {
			t.Error("commit of a file CreateTemp did not make succeeded")
		}
		if entries, _ := os.ReadDir(filepath.Join(e.root, "tmp")); len(entries) != 0 {
			t.Errorf("scratch dir not empty: %v", entries)
		}
	})
}

func TestSpoolLocal(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		data := randomBytes(5, 2<<20+1)
		put(t, e, "uploads/s.xlsx", data, int64(len(data)))
		for _, dir := range []string{t.TempDir(), ""} {
			f, err := e.store.SpoolLocal(t.Context(), "uploads/s.xlsx", dir)
			if err != nil {
				t.Fatal(err)
			}
			want := cmp.Or(dir, filepath.Join(e.root, "tmp"))
			if filepath.Dir(f.Name()) != want || filepath.Ext(f.Name()) != ".xlsx" {
				t.Errorf("spool file %s, want a .xlsx in %s", f.Name(), want)
			}
			got, err := io.ReadAll(f) // positioned at the start
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("spooled copy: %d bytes, %v; want the object", len(got), err)
			}
			storage.Discard(f)
			if _, err := os.Stat(f.Name()); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("Discard left the spool file %s", f.Name())
			}
		}
	})
}

// failingReader yields n bytes, then fails.
type failingReader struct {
	n   int
	err error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, r.err
	}
	k := min(len(p), r.n)
	clear(p[:k])
	r.n -= k
	return k, nil
}

func TestFailedPutLeavesNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		errBroken := errors.New("client went away")
		const key = "uploads/broken.xlsx"
		const kept = "uploads/kept.xlsx"
		put(t, e, kept, []byte("old and whole"), -1)
		for _, c := range []struct {
			name string
			key  string
			r    io.Reader
			size int64
			want error
		}{
			{"reader fails mid-way, unknown size", key, &failingReader{n: 7 << 20, err: errBroken}, -1, errBroken},
			{"reader fails mid-way, known size", key, &failingReader{n: 6 << 20, err: errBroken}, 8 << 20, errBroken},
			{"reader shorter than the size", key, strings.NewReader("short"), 100, nil},
			{"overwrite that fails", kept, &failingReader{n: 6 << 20, err: errBroken}, -1, errBroken},
		} {
			_, err := e.store.Put(ctx, c.key, c.r, c.size, "")
			if err == nil || c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("%s: put error %v, want %v", c.name, err, cmpErr(c.want))
			}
		}
		if _, err := e.store.Stat(ctx, key); !errors.Is(err, storage.ErrNotExist) {
			t.Errorf("a failed put left an object: %v", err)
		}
		if got := readAll(t, e, kept); string(got) != "old and whole" {
			t.Errorf("a failed overwrite changed the object to %d bytes", len(got))
		}
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := e.store.Put(cancelled, key, strings.NewReader("x"), 1, ""); !errors.Is(err, context.Canceled) {
			t.Errorf("put with a cancelled context: %v, want context.Canceled", err)
		}
		if entries, _ := os.ReadDir(filepath.Join(e.root, "tmp")); len(entries) != 0 {
			t.Errorf("failed puts left scratch files: %v", entries)
		}
	})
}

func cmpErr(err error) any {
	if err == nil {
		return "an error"
	}
	return err
}

func TestLocalLayoutIsTheDataDir(t *testing.T) {
	root := t.TempDir()
	// A data dir as earlier versions left it.
	if err := os.MkdirAll(filepath.Join(root, "uploads"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "uploads", "abc.xlsx"), []byte("existing"), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := storage.New(t.Context(), storage.Config{}, root)
	if err != nil {
		t.Fatal(err)
	}
	if st.Backend() != storage.BackendLocal {
		t.Fatalf("default backend %s, want local", st.Backend())
	}
	e := &env{backend: storage.BackendLocal, store: st, root: root}
	if got := readAll(t, e, "uploads/abc.xlsx"); string(got) != "existing" {
		t.Fatalf("existing upload reads %q", got)
	}
	put(t, e, "results/tsk_L-a1.xlsx", []byte("new"), 3)
	if b, err := os.ReadFile(filepath.Join(root, "results", "tsk_L-a1.xlsx")); err != nil || string(b) != "new" {
		t.Fatalf("results/tsk_L-a1.xlsx is not the file results/tsk_L-a1.xlsx under the data dir: %q, %v", b, err)
	}
	if err := st.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	if u, ok, err := st.Presign(t.Context(), "results/tsk_L-a1.xlsx", "a.xlsx", 0); ok || u != "" || err != nil {
		t.Fatalf("local presign = %q, %v, %v; want ok=false: the API streams", u, ok, err)
	}
}

// genReader produces n pseudo-random bytes without holding them, hashing what it gives and
// sampling the heap as it goes.
type genReader struct {
	left  int64
	rng   *rand.ChaCha8
	hash  hashWriter
	every int64 // bytes between heap samples
	since int64
	peak  uint64
}

type hashWriter interface {
	io.Writer
	Sum([]byte) []byte
}

func (g *genReader) Read(p []byte) (int, error) {
	if g.left == 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), g.left)]
	g.rng.Read(p) //nolint:errcheck // never fails
	g.hash.Write(p)
	g.left -= int64(len(p))
	g.since += int64(len(p))
	if g.since >= g.every {
		g.since = 0
		g.peak = max(g.peak, heapInuse())
	}
	return len(p), nil
}

func heapInuse() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestPutUnknownSizeMemoryIsBounded streams 32 MiB of unknown length into each backend and
// checks the heap never grows by more than a few parts: the upload is not buffered whole.
// Not parallel: it measures the process's heap.
func TestPutUnknownSizeMemoryIsBounded(t *testing.T) {
	const size = 32 << 20
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			e := newEnv(t, b, nil)
			g := &genReader{left: size, rng: rand.NewChaCha8([32]byte{9}), hash: sha256.New(), every: 256 << 10}
			gcPercent := debug.SetGCPercent(20) // keep garbage from hiding in HeapInuse
			defer debug.SetGCPercent(gcPercent)
			runtime.GC()
			base := heapInuse()
			info, err := e.store.Put(t.Context(), "uploads/big.bin", g, -1, "")
			if err != nil {
				t.Fatal(err)
			}
			growth := int64(g.peak) - int64(base)
			// s3 holds one part (5 MiB here) plus the 1 MiB look-ahead; local a copy buffer.
			limit := int64(3 * storage.MinPartSize)
			if b == storage.BackendLocal {
				limit = 4 << 20
			}
			t.Logf("%s: heap in use grew by %.1f MiB at most while putting %d MiB of unknown length", b, float64(growth)/(1<<20), size>>20)
			if growth > limit {
				t.Errorf("heap grew by %d bytes during a %d-byte streaming put, want at most %d", growth, size, limit)
			}
			if info.Size != size {
				t.Fatalf("put stored %d bytes, want %d", info.Size, size)
			}
			obj, err := e.store.Open(t.Context(), "uploads/big.bin")
			if err != nil {
				t.Fatal(err)
			}
			defer obj.Close()
			h := sha256.New()
			if _, err := io.Copy(h, obj); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(h.Sum(nil), g.hash.Sum(nil)) {
				t.Fatal("the stored object differs from what was streamed")
			}
		})
	}
}
