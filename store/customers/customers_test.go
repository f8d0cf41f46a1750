package customers_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/store/customers"
	"github.com/taskcenter/taskcenter/store/storetest"
)

// Every filter of the customer export is served by an index, for the count and for the keyset
// pages, on a table large enough that Postgres would rather scan it otherwise.
func TestCustomerExportFiltersUseIndexes(t *testing.T) {
	t.Parallel()
	db := storetest.NewPostgres(t).DB
	storetest.Exec(t, db, `INSERT INTO customers (code, name, phone, city, level)
		SELECT 'C' || lpad(g::text, 7, '0'), 'n', '13800138000', (ARRAY['Hangzhou','Beijing','Shanghai','Shenzhen','Chengdu',
		       'Wuhan','Xian','Nanjing','Suzhou','Tianjin'])[1 + g % 10] || (g % 97)::text, (ARRAY['normal','silver','gold','platinum','diamond'])[1 + g % 5]
		FROM generate_series(1, 60000) g`)
	storetest.Exec(t, db, `ANALYZE customers`)
	plans, err := customers.ExportPlans(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	for name, plan := range plans {
		if strings.Contains(plan, "Seq Scan on customers") {
			t.Errorf("%s scans the whole table:\n%s", name, plan)
		}
	}
}

// Two replaces' removals never interleave: the second waits for the first to commit, then
// removes what the first left that its own file does not hold.
func TestReplaceRemovalsAreSerialised(t *testing.T) {
	t.Parallel()
	db := storetest.NewPostgres(t).DB
	ctx := context.Background()
	storetest.Exec(t, db, `INSERT INTO customers (code, name, phone) VALUES ('A', 'a', '1'), ('B', 'b', '1'), ('C', 'c', '1'), ('D', 'd', '1')`)
	storetest.Exec(t, db, `INSERT INTO import_codes (task_id, code, row_no) VALUES (1, 'A', 2), (1, 'B', 3), (2, 'A', 2), (2, 'C', 3)`)

	first, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	removed1, err := customers.RemoveMissing(ctx, first, 1, 2)
	if err != nil || removed1 != 2 {
		t.Fatalf("first replace removed %d, %v; want C and D", removed1, err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var pid int
	if err := conn.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		n   int64
		err error
	}
	second := make(chan outcome, 1)
	go func() {
		var n int64
		err := conn.RunInTx(ctx, &sql.TxOptions{}, func(ctx context.Context, tx bun.Tx) (err error) {
			n, err = customers.RemoveMissing(ctx, tx, 2, 2)
			return err
		})
		second <- outcome{n, err}
	}()
	testenv.Eventually(t, 10*time.Second, "the second replace to wait for the first's lock", func() bool {
		return storetest.Count(t, db, `SELECT count(*) FROM pg_locks WHERE pid = ? AND locktype = 'advisory' AND NOT granted`, pid) == 1
	})
	select {
	case o := <-second:
		t.Fatalf("the second replace ran while the first held the lock: %+v", o)
	default:
	}
	if err := first.Commit(); err != nil {
		t.Fatal(err)
	}
	o := <-second
	if o.err != nil || o.n != 1 {
		t.Fatalf("second replace removed %d, %v; want B only (C and D were gone)", o.n, o.err)
	}
	if n := storetest.Count(t, db, `SELECT count(*) FROM customers`); n != 1 {
		t.Fatalf("%d customers left, want A", n)
	}
}
