package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Through the real process and tc: a dry run of a replace says what it would do and writes
// nothing, the replace does it, the undo puts every customer back, and an undo of the undo is
// refused with a message saying what to do instead.
func TestCLIDryRunReplaceAndUndo(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	p := e.start("all")
	e.seedCustomers(5)
	dir := t.TempDir()
	file := "code,name,phone,email,city,level\n" +
		"C000001,Renamed,13800000001,c1@example.com,Shanghai,gold\n" + // updated
		"C000002,Customer 2,13800000002,c2@example.com,Shanghai,gold\n" + // unchanged
		"N000001,New,13900000001,,Hangzhou,silver\n" // inserted; C000003..5 are not in the file
	if err := os.WriteFile(filepath.Join(dir, "list.csv"), []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	const split = "1 inserted, 1 updated, 1 unchanged, 3 removed"

	r := p.tc(dir, aliceToken, "import", "list.csv", "--mode", "replace", "--dry-run", "--wait")
	if r.code != 0 || !strings.Contains(r.stdout, split) || !strings.Contains(r.stdout, "dry run: nothing was written") ||
		e.count("SELECT count(*) FROM customers") != 5 || e.count("SELECT count(*) FROM customers WHERE name = 'Renamed'") != 0 {
		t.Fatalf("dry run: exit %d %q; %d customers", r.code, r.stdout, e.count("SELECT count(*) FROM customers"))
	}

	r = p.tc(dir, aliceToken, "import", "list.csv", "--mode", "replace", "--wait")
	id := taskNoPattern.FindString(r.stdout)
	if r.code != 0 || !strings.Contains(r.stdout, split) || !strings.Contains(r.stdout, "tc undo "+id) || e.count("SELECT count(*) FROM customers") != 3 {
		t.Fatalf("replace: exit %d %q; %d customers", r.code, r.stdout, e.count("SELECT count(*) FROM customers"))
	}

	r = p.tc(dir, aliceToken, "undo", id, "--wait")
	undo := taskNoPattern.FindString(r.stdout)
	if r.code != 0 || !strings.Contains(r.stdout, "import:customers-undo") || e.count("SELECT count(*) FROM customers") != 5 ||
		e.count("SELECT count(*) FROM customers WHERE name LIKE 'Customer %'") != 5 {
		t.Fatalf("undo: exit %d %q; customers %d", r.code, r.stdout, e.count("SELECT count(*) FROM customers"))
	}

	r = p.tc(dir, aliceToken, "undo", undo)
	if r.code == 0 || !strings.Contains(r.stderr, "an undo cannot be undone; import the file again") {
		t.Fatalf("undo of the undo: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
}
