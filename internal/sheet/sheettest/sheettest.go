// Package sheettest gives tests the spreadsheets kept under testdata/imports: files that
// spreadsheet programs and libraries wrote, and hostile ones, which the readers, the
// importer and the end-to-end tests all read.
package sheettest

import (
	"os"
	"path/filepath"
	"testing"
)

// Fixture is the content of the file name in testdata/imports.
func Fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir(t), name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dir is testdata/imports at the root of the module, found from the test's working
// directory (its package's directory) up.
func dir(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "testdata", "imports")
		}
		if filepath.Dir(d) == d {
			t.Fatalf("no go.mod above %s", wd)
		}
	}
}
