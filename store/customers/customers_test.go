package customers_test

import (
	"context"
	"strings"
	"testing"

	"github.com/taskcenter/taskcenter/store/customers"
	"github.com/taskcenter/taskcenter/store/storetest"
)

// Every filter of the customer export is served by an index, for the count and for the keyset
// pages, on a table large enough that Postgres would rather scan it otherwise.
func TestCustomerExportFiltersUseIndexes(t *testing.T) {
	t.Parallel()
	db := storetest.NewPostgres(t).DB
	ctx := context.Background()
	for _, q := range []string{`INSERT INTO customers (code, name, phone, city, level)
		SELECT 'C' || lpad(g::text, 7, '0'), 'n', '13800138000', (ARRAY['Hangzhou','Beijing','Shanghai','Shenzhen','Chengdu',
		       'Wuhan','Xian','Nanjing','Suzhou','Tianjin'])[1 + g % 10] || (g % 97)::text, (ARRAY['normal','silver','gold','platinum','diamond'])[1 + g % 5]
		FROM generate_series(1, 60000) g`, `ANALYZE customers`} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("exec %q: %v", q, err)
		}
	}
	plans, err := customers.ExportPlans(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	for name, plan := range plans {
		if strings.Contains(plan, "Seq Scan on customers") {
			t.Errorf("%s scans the whole table:\n%s", name, plan)
		}
	}
}
