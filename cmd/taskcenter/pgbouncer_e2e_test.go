package main

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/testenv"
)

// startPgBouncer runs a real PgBouncer in transaction pooling in front of the test's schema on
// the shared Postgres, and returns the URL clients use. Its database alias sets the schema on
// every server connection it opens (connect_query), since a transaction-mode pooler cannot
// pass a client's search_path along.
func startPgBouncer(t *testing.T, direct, schema string) string {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/pgbouncer"); err != nil {
			t.Fatalf("pgbouncer is not installed (scripts/services.sh tools installs it): %v", err)
		}
	}
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	pass, _ := u.User.Password()
	host, port, _ := net.SplitHostPort(u.Host)
	dir, err := os.MkdirTemp("", "taskcenter-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o777) //nolint:errcheck // pgbouncer runs as another user when we are root
	listen := testenv.FreePort(t)
	ini := fmt.Sprintf(`[databases]
tcdb = host=%s port=%s dbname=%s connect_query='SET search_path TO %s'

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = plain
auth_file = %s/userlist.txt
pool_mode = transaction
max_client_conn = 500
default_pool_size = 20
ignore_startup_parameters = search_path, application_name, extra_float_digits
logfile = %s/pgbouncer.log
pidfile = %s/pgbouncer.pid
`, host, port, u.Path[1:], schema, listen, dir, dir, dir)
	for name, body := range map[string]string{"pgbouncer.ini": ini, "userlist.txt": fmt.Sprintf("%q %q\n", u.User.Username(), pass)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{filepath.Join(dir, "pgbouncer.ini")}
	cmd := exec.Command(bin, args...)
	if cur, _ := user.Current(); cur != nil && cur.Uid == "0" {
		// PgBouncer refuses to run as root.
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", bin}, args...)...)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() }) //nolint:errcheck
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", listen))
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			t.Fatalf("pgbouncer did not start: %v\n%s", err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	pooled := *u
	pooled.Host = fmt.Sprintf("127.0.0.1:%d", listen)
	pooled.Path = "/tcdb"
	pooled.RawQuery = "sslmode=disable"
	return pooled.String()
}

// The whole service runs through PgBouncer in transaction pooling with one setting
// (database.pooler: pgbouncer): submits, claims, batches, terminal writes, cancel and retry,
// an export and an import with exact counts.
func TestServiceRunsThroughPgBouncerInTransactionMode(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	pooled := startPgBouncer(t, e.pg.URL, e.pg.Schema)
	e.vars["TASKCENTER_DATABASE_URL"] = pooled
	e.vars["TASKCENTER_DATABASE_POOLER"] = "pgbouncer"
	e.vars["TASKCENTER_DATABASE_MIGRATE_URL"] = e.pg.URL
	e.seedCustomers(3000)
	p := e.start("all")
	p.exportThenImport(3000)
	// Cancel and retry go through the pooler too.
	waiting := p.submitExport(bobToken, map[string]any{"type": "tasks"})
	p.do("POST", "/api/v1/tasks/"+waiting.ID+"/cancel", bobToken, nil)
	// A task that had started ends CANCELLED at its next batch boundary (or SUCCESS if it was done).
	if ended := p.waitStatus(bobToken, waiting.ID, 3*time.Minute, "CANCELLED", "SUCCESS"); ended.Status == "CANCELLED" {
		if res := p.do("POST", "/api/v1/tasks/"+waiting.ID+"/retry", bobToken, nil); res.status != http.StatusAccepted {
			t.Fatalf("retry of the cancelled task through pgbouncer: %d %s", res.status, res.body)
		}
	}
	if final := p.waitStatus(bobToken, waiting.ID, 3*time.Minute, "SUCCESS", "FAILED"); final.Status != "SUCCESS" {
		t.Fatalf("cancel/retry through pgbouncer: %+v", final)
	}
}
