package testenv

import (
	"testing"

	"github.com/taskcenter/taskcenter/internal/storage"
)

// NewFiles is a data dir of the test's own and the file store over it, keeping files as sc
// says (the zero Config: on disk under the dir).
func NewFiles(t testing.TB, sc storage.Config) (fs storage.Store, root string) {
	t.Helper()
	root = t.TempDir()
	fs, err := storage.New(t.Context(), sc, root)
	if err != nil {
		t.Fatal(err)
	}
	return fs, root
}
