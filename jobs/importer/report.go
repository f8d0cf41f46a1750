package importer

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/xuri/excelize/v2"

	"github.com/taskcenter/taskcenter/internal/files"
	"github.com/taskcenter/taskcenter/internal/xlsxsafe"
	"github.com/taskcenter/taskcenter/store"
)

// writeErrorReport streams a task's rejected rows into an .xlsx: row number, fields and
// reason, then the row's original cells under the original header, every text cell
// neutralised. It returns the report's data-dir path and the first few messages.
func writeErrorReport(ctx context.Context, st *store.Store, fs *files.Store, task *store.Task, header []string) (string, []string, error) {
	tmp, err := fs.CreateTemp(task.TaskNo, ".xlsx")
	if err != nil {
		return "", nil, err
	}
	committed := false
	defer func() {
		if !committed {
			files.Discard(tmp)
		}
	}()
	book := excelize.NewFile(excelize.Options{TmpDir: filepath.Dir(tmp.Name())})
	defer book.Close()
	const sheet = "Sheet1"
	if err := book.SetSheetName(sheet, "errors"); err != nil {
		return "", nil, err
	}
	sw, err := book.NewStreamWriter("errors")
	if err != nil {
		return "", nil, err
	}
	if err := sw.SetPanes(&excelize.Panes{Freeze: true, YSplit: 1, TopLeftCell: "A2", ActivePane: "bottomLeft"}); err != nil {
		return "", nil, err
	}
	head := []any{"row", "field", "reason"}
	for _, h := range header {
		head = append(head, xlsxsafe.Neutralize(h))
	}
	if err := sw.SetRow("A1", head); err != nil {
		return "", nil, err
	}
	var first []string
	line, after := 2, 0
	for {
		items, err := st.Items(ctx, task.ID, after, 5000)
		if err != nil {
			return "", nil, err
		}
		for _, it := range items {
			var cells []string
			json.Unmarshal(it.Raw, &cells) //nolint:errcheck // written by this package
			row := []any{it.Row, it.Field, xlsxsafe.Neutralize(it.Message)}
			for _, c := range cells {
				row = append(row, xlsxsafe.Neutralize(c))
			}
			cell, _ := excelize.CoordinatesToCellName(1, line)
			if err := sw.SetRow(cell, row); err != nil {
				return "", nil, err
			}
			if len(first) < 10 {
				first = append(first, fmt.Sprintf("row %d, %s", it.Row, it.Message))
			}
			line++
			after = it.Row
		}
		if len(items) < 5000 {
			break
		}
	}
	if err := sw.Flush(); err != nil {
		return "", nil, err
	}
	if _, err := book.WriteTo(tmp); err != nil {
		return "", nil, err
	}
	rel := filepath.ToSlash(filepath.Join(files.Results, fmt.Sprintf("%s-a%d-errors.xlsx", task.TaskNo, task.Attempt)))
	if err := fs.Commit(tmp, rel); err != nil {
		return "", nil, err
	}
	committed = true
	return rel, first, nil
}
