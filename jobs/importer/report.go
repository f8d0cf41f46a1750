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

// writeErrorReport streams a task's rejected rows into an .xlsx: row number, fields and
// reason, then the row's original cells under the original header, every text cell
// neutralised. It returns the report's data-dir path and the first few messages.
func writeErrorReport(ctx context.Context, st *store.Store, fs *files.Store, task *store.Task, header []string) (string, []string, error) {
	out, err := xlsxsafe.NewWriter(fs, task.TaskNo, "errors", append([]string{"row", "field", "reason"}, header...))
	if err != nil {
		return "", nil, err
	}
	defer out.Close()
	var first []string
	after := 0
	for {
		items, err := st.Items(ctx, task.ID, after, 5000)
		if err != nil {
			return "", nil, err
		}
		for _, it := range items {
			var cells []string
			json.Unmarshal(it.Raw, &cells) //nolint:errcheck // written by this package
			row := []any{it.Row, it.Field, it.Message}
			for _, c := range cells {
				row = append(row, c)
			}
			if err := out.Row(row); err != nil {
				return "", nil, err
			}
			if len(first) < 10 {
				first = append(first, fmt.Sprintf("row %d, %s", it.Row, it.Message))
			}
			after = it.Row
		}
		if len(items) < 5000 {
			break
		}
	}
	rel := filepath.ToSlash(filepath.Join(files.Results, fmt.Sprintf("%s-a%d-errors.xlsx", task.TaskNo, task.Attempt)))
	if _, err := out.Commit(rel); err != nil {
		return "", nil, err
	}
	return rel, first, nil
}
