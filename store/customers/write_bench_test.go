package customers_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/store/customers"
	"github.com/taskcenter/taskcenter/store/storetest"
)

// plainUpsert is the batch statement before imports classified rows and kept before-images:
// the ceiling the classifying write is measured against.
const plainUpsert = `
	INSERT INTO customers (code, name, phone, email, city, level, last_import_task_id, last_import_row)
	SELECT u.code, u.name, u.phone, u.email, u.city, u.level, $1, u.row_no
	FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::int[])
	     AS u(code, name, phone, email, city, level, row_no)
	ON CONFLICT (code) DO UPDATE SET name = EXCLUDED.name, phone = EXCLUDED.phone, email = EXCLUDED.email,
		city = EXCLUDED.city, level = EXCLUDED.level, last_import_task_id = EXCLUDED.last_import_task_id,
		last_import_row = EXCLUDED.last_import_row, updated_at = now()
		WHERE customers.last_import_task_id IS DISTINCT FROM EXCLUDED.last_import_task_id
	RETURNING code`

// BenchmarkWriteBatch writes batches of 1000 customers, new ones (insert) and then the same
// codes again with new values (update), with the import's write in each of its modes and with
// the plain upsert it replaced; it reports rows/s.
func BenchmarkWriteBatch(b *testing.B) {
	const batch = 1000
	for _, c := range []struct {
		name string
		mode *customers.Mode // nil: the plain upsert
	}{
		{"plain-upsert", nil},
		{"upsert", &customers.Mode{}},
		{"replace", &customers.Mode{KeepCodes: true}},
		{"dry-run", &customers.Mode{DryRun: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			db := storetest.NewPostgres(b).DB
			ctx := context.Background()
			rows := func(round, task int) []customers.Row {
				out := make([]customers.Row, batch)
				for i := range out {
					out[i] = customers.Row{Row: i + 2, Code: fmt.Sprintf("B%d-%05d", round, i), Name: fmt.Sprintf("n%d", task), Phone: "13800138000", City: "Hangzhou"}
				}
				return out
			}
			write := func(task int, rs []customers.Row) {
				err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
					if c.mode != nil {
						_, err := customers.Write(ctx, tx, int64(task), rs, *c.mode)
						return err
					}
					var cols [6][]string
					nos := make([]int32, len(rs))
					for i, r := range rs {
						for k, v := range []string{r.Code, r.Name, r.Phone, r.Email, r.City, r.Level} {
							cols[k] = append(cols[k], v)
						}
						nos[i] = int32(r.Row)
					}
					res, err := tx.Tx.QueryContext(ctx, plainUpsert, task, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], nos)
					if err != nil {
						return err
					}
					defer res.Close()
					for res.Next() {
					}
					return res.Err()
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				write(2*i+1, rows(i, 2*i+1)) // new codes
				write(2*i+2, rows(i, 2*i+2)) // the same codes, changed
			}
			b.ReportMetric(float64(2*batch*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
