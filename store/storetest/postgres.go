package storetest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/store"
)

// Postgres is one test's private database (or, where the role may not create databases,
// schema).
type Postgres struct {
	// URL connects to the test's database with search_path set to Schema and application_name
	// to Schema.
	URL string
	// Schema holds the test's tables. It is also its database's name (when it has one) and
	// its connections' application_name, so a test can find (and kill) its own connections.
	Schema string
	DB     *bun.DB
}

// templateSchema is where the template database keeps the migrated tables; each copy renames
// it to the test's name.
const templateSchema = "tc_template"

// templateLockID is the advisory lock (on the configured database) that lets one process at a
// time build a template.
const templateLockID = 0x7463746d706c // "tctmpl"

// errNoCreateDB is the role lacking the right to create databases.
var errNoCreateDB = errors.New("the role may not create databases")

// NewPostgres gives the test a database of its own with every migration applied.
//
// The migrations run once per set of migration files, into a template database named by a
// digest of those files (tctmpl_<digest>); each test gets a copy of it (CREATE DATABASE …
// TEMPLATE: a few megabytes copied, instead of every migration run again, each test queued on
// the migration lock that all tests of all packages share). A template stays for the next run
// and for other checkouts with the same migrations; one for files that changed is built
// beside it. Where the role may not create databases (CREATEDB; `make services` grants it),
// each test gets a schema of its own in the configured database instead, migrated there, and
// dropped when the test ends.
//
// A test's database is not dropped when the test ends: in Postgres 15 every DROP DATABASE
// forces an immediate checkpoint, and a few hundred of them during the suite wrote gigabytes
// and kept the suite's tests waiting on fsync. `make test` drops them after the suite
// (scripts/services.sh prune-test-dbs); a test run some other way leaves them for that, and
// NewPostgres itself drops the oldest when more than keepDatabases have piled up.
func NewPostgres(t testing.TB) *Postgres {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := store.Open(testenv.DatabaseURL(), store.OpenOptions{MaxOpenConns: 2})
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	defer admin.Close()
	if err := store.Ping(ctx, admin); err != nil {
		t.Fatalf("storetest: Postgres at %s is not reachable (run `make services`): %v", redactURL(testenv.DatabaseURL()), err)
	}
	name := fmt.Sprintf("%s%x_%s", databasePrefix, time.Now().Unix(), strings.ToLower(rand.Text()[:8]))
	pg, err := copyTemplate(ctx, t, admin, name)
	if errors.Is(err, errNoCreateDB) {
		pg, err = migratedSchema(ctx, t, admin, name)
	}
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	return pg
}

// copyTemplate creates database name from the template (building the template first if
// needed), with the tables in schema name.
func copyTemplate(ctx context.Context, t testing.TB, admin *bun.DB, name string) (*Postgres, error) {
	tmpl, err := template(ctx, admin)
	if err != nil {
		return nil, err
	}
	pruneDatabases(ctx, admin, keepDatabases)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name+" TEMPLATE "+tmpl); err != nil {
		return nil, fmt.Errorf("create database from %s: %w", tmpl, noCreateDB(err))
	}
	// A test's database is thrown away, so its commits need not wait for the disk: without
	// this, the suite's few hundred databases queued every commit on one WAL fsync. Every
	// session on it (the test's, the taskcenter processes an end-to-end test starts, those
	// through PgBouncer) takes the setting; the cluster and its other databases keep theirs.
	// A schema of the configured database (no CREATEDB) keeps the server's setting.
	if _, err := admin.ExecContext(ctx, "ALTER DATABASE "+name+" SET synchronous_commit = off"); err != nil {
		return nil, fmt.Errorf("set up the copy: %w", err)
	}
	u := withSearchPath(onDatabase(testenv.DatabaseURL(), name), name)
	db, err := store.Open(u, store.OpenOptions{MaxOpenConns: 8})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.ExecContext(ctx, "ALTER SCHEMA "+templateSchema+" RENAME TO "+name); err != nil {
		return nil, fmt.Errorf("rename the copy's schema: %w", err)
	}
	return &Postgres{URL: u, Schema: name, DB: db}, nil
}

// template returns the name of the migrated template database for the current migration
// files, building it if no one has.
func template(ctx context.Context, admin *bun.DB) (string, error) {
	digest, err := migrationsDigest()
	if err != nil {
		return "", err
	}
	name := "tctmpl_" + digest[:16]
	if ok, err := databaseExists(ctx, admin, name); ok || err != nil {
		return name, err
	}
	// One builder at a time, across processes: the others wait here and then find it built.
	conn, err := admin.Conn(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock(?)", templateLockID); err != nil {
		return "", fmt.Errorf("lock the template build: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(?)", templateLockID) //nolint:errcheck // released with the session anyway
	if ok, err := databaseExists(ctx, admin, name); ok || err != nil {
		return name, err
	}
	// A build under a name of its own, renamed when complete: a builder that dies half-way
	// leaves no template that looks finished. Holding the lock, any build left is such a one.
	var orphans []string
	if err := admin.NewRaw(`SELECT datname FROM pg_database WHERE datname ~ '^tctmpl_[0-9a-f]{16}_'`).Scan(ctx, &orphans); err != nil {
		return "", fmt.Errorf("list template builds: %w", err)
	}
	for _, o := range orphans {
		admin.ExecContext(ctx, "DROP DATABASE "+o+" WITH (FORCE)") //nolint:errcheck // an orphan that stays costs only disk
	}
	build := name + "_" + strings.ToLower(rand.Text()[:8])
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+build); err != nil {
		return "", fmt.Errorf("create the template: %w", noCreateDB(err))
	}
	if err := migrateTemplate(ctx, build); err != nil {
		admin.ExecContext(context.WithoutCancel(ctx), "DROP DATABASE "+build+" WITH (FORCE)") //nolint:errcheck
		return "", err
	}
	if _, err := admin.ExecContext(ctx, "ALTER DATABASE "+build+" RENAME TO "+name); err != nil {
		admin.ExecContext(context.WithoutCancel(ctx), "DROP DATABASE "+build+" WITH (FORCE)") //nolint:errcheck
		return "", fmt.Errorf("name the template: %w", err)
	}
	// The templates of earlier migration files are done with (a checkout still on them builds
	// its own again).
	var old []string
	if err := admin.NewRaw(`SELECT datname FROM pg_database WHERE datname ~ '^tctmpl_[0-9a-f]{16}$' AND datname <> ?`, name).Scan(ctx, &old); err == nil {
		for _, o := range old {
			admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+o) //nolint:errcheck // one being copied stays for later
		}
	}
	return name, nil
}

// migrateTemplate applies every migration to database build, in templateSchema, and closes
// its connections (a database being copied or renamed may have none).
func migrateTemplate(ctx context.Context, build string) error {
	db, err := store.Open(withSearchPath(onDatabase(testenv.DatabaseURL(), build), templateSchema), store.OpenOptions{MaxOpenConns: 4})
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+templateSchema); err != nil {
		return fmt.Errorf("create the template's schema: %w", err)
	}
	if _, err := store.Migrate(ctx, db); err != nil {
		return fmt.Errorf("migrate the template: %w", err)
	}
	return nil
}

// migratedSchema creates schema name in the configured database and applies every migration
// to it.
func migratedSchema(ctx context.Context, t testing.TB, admin *bun.DB, name string) (*Postgres, error) {
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+name); err != nil {
		return nil, fmt.Errorf("create schema: %w", err)
	}
	t.Cleanup(func() { dropSchema(t, name) })
	u := withSearchPath(testenv.DatabaseURL(), name)
	db, err := store.Open(u, store.OpenOptions{MaxOpenConns: 8})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { db.Close() })
	if _, err := store.Migrate(ctx, db); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	return &Postgres{URL: u, Schema: name, DB: db}, nil
}

// dropSchema drops the test's schema at its end, within 30 s, on a connection of its own.
func dropSchema(t testing.TB, name string) {
	a, err := store.Open(testenv.DatabaseURL(), store.OpenOptions{MaxOpenConns: 1})
	if err != nil {
		return
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := a.ExecContext(ctx, "DROP SCHEMA "+name+" CASCADE"); err != nil {
		t.Logf("storetest: drop schema %s: %v", name, err)
	}
}

// databasePrefix starts the name of every test database: tctest_<unix seconds, hex>_<random>.
const databasePrefix = "tctest_"

// keepDatabases is how many test databases may pile up (about 9 MB each) before NewPostgres
// drops the oldest; `make test` makes fewer than half as many and drops them after the suite.
const keepDatabases = 400

// pruneDatabases drops up to 20 of the oldest test databases, older than ten minutes and with
// no one connected, when more than keep exist. Best effort: one it cannot drop now is left
// for later.
func pruneDatabases(ctx context.Context, admin *bun.DB, keep int) {
	var names []string
	err := admin.NewRaw(`SELECT datname FROM (
			SELECT datname, count(*) OVER () AS n FROM pg_database WHERE datname ~ ('^' || ? || '[0-9a-f]+_')) d
		WHERE n > ? AND ('x' || lpad(split_part(datname, '_', 2), 16, '0'))::bit(64)::bigint < extract(epoch FROM now()) - 600
		ORDER BY datname LIMIT 20`, databasePrefix, keep).Scan(ctx, &names)
	if err != nil {
		return
	}
	for _, name := range names {
		admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name) //nolint:errcheck // in use or gone: left for later
	}
}

// migrationsDigest is a digest of the migration files' names and contents.
func migrationsDigest() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(store.Migrations(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(store.Migrations(), path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("read the migrations: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func databaseExists(ctx context.Context, db *bun.DB, name string) (bool, error) {
	var n int
	if err := db.NewRaw("SELECT count(*) FROM pg_database WHERE datname = ?", name).Scan(ctx, &n); err != nil {
		return false, fmt.Errorf("look for database %s: %w", name, err)
	}
	return n > 0, nil
}

// noCreateDB wraps errNoCreateDB into err when Postgres refused for lack of privilege.
func noCreateDB(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42501" { // insufficient_privilege
		return fmt.Errorf("%w: %w", errNoCreateDB, err)
	}
	return err
}

// onDatabase returns dsn connecting to database name instead.
func onDatabase(dsn, name string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	u.Path = "/" + name
	return u.String()
}

// withSearchPath returns dsn with its search_path and application_name set to schema.
func withSearchPath(dsn, schema string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	q := u.Query()
	q.Set("search_path", schema)
	q.Set("application_name", schema) // lets a test find (and kill) its own connections
	u.RawQuery = q.Encode()
	return u.String()
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable url)"
	}
	return u.Redacted()
}
