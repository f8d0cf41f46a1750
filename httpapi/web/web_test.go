package web

import (
	"io/fs"
	"regexp"
	"testing"
)

// The page loads nothing from elsewhere: every embedded file refers only to this server.
func TestEveryEmbeddedFileRefersOnlyToThisServer(t *testing.T) {
	t.Parallel()
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	n := 0
	fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error { //nolint:errcheck
		if err != nil || d.IsDir() {
			return err
		}
		n++
		b, _ := files.ReadFile(p)
		if m := external.Find(b); m != nil {
			t.Errorf("%s refers to %s", p, m)
		}
		return nil
	})
	if n < 10 { // 6 templates, 2 dictionaries, a script and a style sheet
		t.Fatalf("only %d embedded files", n)
	}
}
