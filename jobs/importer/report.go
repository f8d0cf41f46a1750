package importer

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/taskcenter/taskcenter/internal/files"
	"github.com/taskcenter/taskcenter/internal/xlsxsafe"
	"github.com/taskcenter/taskcenter/store"
)

// reportPath is where the error report of one attempt goes: named after the attempt that
// writes it, so an attempt that has been superseded can never overwrite (or, when its
// result is discarded, delete) the live attempt's report.
func reportPath(l store.Lease) string {
	return filepath.ToSlash(filepath.Join(files.Results, fmt.Sprintf("%s-a%d-errors.xlsx", l.TaskNo, l.Attempt)))
}

// writeErrorReport streams a task's rejected rows into an .xlsx: row number, fields and
// reason, then the row's original cells (as kept: see rawCells) under the original header,
// every text cell neutralised. Whatever task_items holds, the report stays within what a
// sheet can take: at most maxRawCells original columns, each cell cut to maxRawCellChars.
// It returns the report's data-dir path and the first few messages.
func writeErrorReport(ctx context.Context, st *store.Store, fs *files.Store, l store.Lease, header []string) (string, []string, error) {
	header = rawCells(header)
	if len(header) > maxRawCells {
		header = header[:maxRawCells]
	}
	prefix := fmt.Sprintf("%s-a%d", l.TaskNo, l.Attempt)
	out, err := xlsxsafe.NewWriter(fs, prefix, "errors", append([]string{"row", "field", "reason"}, header...))
	if err != nil {
		return "", nil, err
	}
	defer out.Close()
	var first []string
	after := 0
	for {
		items, err := st.Items(ctx, l.TaskID, after, 5000)
		if err != nil {
			return "", nil, err
		}
		for _, it := range items {
			var cells []string
			json.Unmarshal(it.Raw, &cells) //nolint:errcheck // written by this package
			cells = rawCells(cells)
			if len(cells) > maxRawCells {
				cells = cells[:maxRawCells]
			}
			row := make([]any, 0, 3+len(cells))
			row = append(row, it.Row, it.Field, clipChars(it.Message, xlsxsafe.MaxCellChars))
			for _, c := range cells {
				row = append(row, c)
			}
			if err := out.Row(row); err != nil {
				return "", nil, err
			}
			if len(first) < 10 {
				first = append(first, clipChars(fmt.Sprintf("row %d, %s", it.Row, it.Message), 500))
			}
			after = it.Row
		}
		if len(items) < 5000 {
			break
		}
	}
	rel := reportPath(l)
	if _, err := out.Commit(rel); err != nil {
		return "", nil, err
	}
	return rel, first, nil
}
