// Package sheettest gives the readers', the importer's and the end-to-end tests their
// spreadsheets: the files kept under testdata/imports (written by spreadsheet programs and
// libraries, and hostile ones), and workbooks built by hand, byte by byte, to break a bound
// (Zip).
package sheettest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/taskcenter/taskcenter/internal/testenv"
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

// dir is testdata/imports at the root of the module.
func dir(t testing.TB) string {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "testdata", "imports")
}
