package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskcenter/taskcenter/internal/sheet"
)

// rawCeiling is the import's ceiling: the project's own reader (internal/sheet) parsing the
// file while its rows stream, through pgx's COPY FROM STDIN, into an UNLOGGED staging table
// with no index. No validation, no upsert, no bookkeeping: no import of the file can be
// faster on this host. Creating the table is not timed. With -into-customers it is the
// table's floor instead: the same, then one INSERT … ON CONFLICT of every row into the
// customers table (its indexes, its WAL), the least any import into that table costs.
func rawCeiling(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("raw-ceiling", flag.ContinueOnError)
	path := fs.String("file", "", "the .xlsx or .csv to read")
	url := fs.String("pg", "", "Postgres URL (its search_path is where the staging table goes)")
	into := fs.Bool("into-customers", false, "then move the rows into the (empty) customers table with one INSERT … ON CONFLICT, timed too: "+
		"the least the real table costs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, *url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `DROP TABLE IF EXISTS import_ceiling;
		CREATE UNLOGGED TABLE import_ceiling (code text, name text, phone text, email text, city text, level text)`); err != nil {
		return fmt.Errorf("create the staging table: %w", err)
	}

	start := time.Now()
	f, err := os.Open(*path)
	if err != nil {
		return err
	}
	file := &localFile{f}
	info, err := f.Stat()
	if err != nil {
		return err
	}
	format, err := sheet.FormatOf(*path)
	if err != nil {
		return err
	}
	// The declared size is trusted: counting the rows is a check of the import's, not part
	// of the least work of reading them.
	ins, err := sheet.Inspect(file, info.Size(), sheet.Choice{Format: format}, sheet.Options{Count: sheet.CountNever})
	if err != nil {
		return err
	}
	rd, err := sheet.Open(file, ins, sheet.Limits{}, os.TempDir())
	if err != nil {
		f.Close()
		return err
	}
	defer rd.Close()
	columns := []string{"code", "name", "phone", "email", "city", "level"} // the file's six, as text
	n, err := conn.CopyFrom(ctx, pgx.Identifier{"import_ceiling"}, columns, &ceilingRows{rd: rd, vals: make([]any, len(columns))})
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	if *into {
		if _, err := conn.Exec(ctx, `INSERT INTO customers (code, name, phone, email, city, level, last_import_task_id, last_import_row)
			SELECT code, name, phone, email, city, level, 0, 0 FROM import_ceiling
			ON CONFLICT (code) DO UPDATE SET name = EXCLUDED.name, phone = EXCLUDED.phone, email = EXCLUDED.email, city = EXCLUDED.city,
			       level = EXCLUDED.level, last_import_task_id = EXCLUDED.last_import_task_id, last_import_row = EXCLUDED.last_import_row, updated_at = now()
			WHERE customers.last_import_task_id IS DISTINCT FROM EXCLUDED.last_import_task_id`); err != nil {
			return fmt.Errorf("move into customers: %w", err)
		}
	}
	return json.NewEncoder(stdout).Encode(map[string]float64{"seconds": time.Since(start).Seconds(), "rows": float64(n), "peak_rss_mb": vmHWM(os.Getpid())})
}

// ceilingRows feeds the sheet's data rows (below row 1, the header) to CopyFrom.
type ceilingRows struct {
	rd   *sheet.Reader
	vals []any
}

func (c *ceilingRows) Next() bool {
	for c.rd.Next() {
		n, cells := c.rd.Row()
		if n == 1 || sheet.Blank(cells) {
			continue
		}
		for i := range c.vals {
			v := ""
			if i < len(cells) {
				v = cells[i]
			}
			c.vals[i] = v
		}
		return true
	}
	return false
}

func (c *ceilingRows) Values() ([]any, error) { return c.vals, nil }

func (c *ceilingRows) Err() error { return c.rd.Err() }

// localFile is a local file as sheet.Open reads an upload.
type localFile struct{ *os.File }

func (f *localFile) Size() int64 {
	info, err := f.Stat()
	if err != nil {
		return 0
	}
	return info.Size()
}

var _ sheet.File = (*localFile)(nil)
