package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// tc import --dry-run --mode replace sends both choices; tc undo ID posts the undo and says
// whether it was already asked for.
func TestImportDryRunAndUndo(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/api/v1/imports":
			if err := r.ParseMultipartForm(1 << 20); err != nil {
				t.Error(err)
			}
			mu.Lock()
			seen = append(seen, "import mode="+r.FormValue("mode")+" dry_run="+r.FormValue("dry_run"))
			mu.Unlock()
			w.WriteHeader(http.StatusAccepted)
			fmt.Fprint(w, `{"task":{"id":"tsk_imp","type":"import:customers","status":"PENDING"},"duplicate":false}`)
		case r.Method == http.MethodPost && r.URL.Path == "/api/v1/tasks/tsk_imp/undo":
			fmt.Fprint(w, `{"task":{"id":"tsk_undo","type":"import:customers-undo","status":"SUCCESS"},"duplicate":true}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	file := filepath.Join(t.TempDir(), "c.csv")
	if err := os.WriteFile(file, []byte("code,name,phone\nA1,a,13800000001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runTC(t, srv.URL, "good-token-0123456789", "import", file, "--dry-run", "--mode", "replace"); code != 0 ||
		!strings.Contains(out, "submitted tsk_imp") || len(seen) != 1 || seen[0] != "import mode=replace dry_run=true" {
		t.Fatalf("import --dry-run: exit %d %q %q, server saw %q", code, out, errOut, seen)
	}
	if code, out, errOut := runTC(t, srv.URL, "good-token-0123456789", "undo", "tsk_imp"); code != 0 || out != "already submitted tsk_undo (import:customers-undo), SUCCESS\n" {
		t.Fatalf("undo: exit %d %q %q", code, out, errOut)
	}
}
