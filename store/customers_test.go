package store_test

import (
	"context"
	"strings"
	"testing"
)

// Every filter of the customer export is served by an index, for the count and for the keyset
// pages, on a table large enough that Postgres would rather scan it otherwise.
func TestCustomerExportFiltersUseIndexes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.exec(`INSERT INTO customers (code, name, phone, city, level)
		SELECT 'C' || lpad(g::text, 7, '0'), 'n', '13800138000', (ARRAY['Hangzhou','Beijing','Shanghai','Shenzhen','Chengdu',
		       'Wuhan','Xian','Nanjing','Suzhou','Tianjin'])[1 + g % 10] || (g % 97)::text, (ARRAY['normal','silver','gold','platinum','diamond'])[1 + g % 5]
		FROM generate_series(1, 60000) g`)
	f.exec(`ANALYZE customers`)
	plans, err := f.s.CustomerExportPlans(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for name, plan := range plans {
		if strings.Contains(plan, "Seq Scan on customers") {
			t.Errorf("%s scans the whole table:\n%s", name, plan)
		}
	}
}
