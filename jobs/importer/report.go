package importer

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/xlsxsafe"
	"github.com/taskcenter/taskcenter/store"
)

// reportPath is where the error report of one attempt goes: named after the attempt that
// writes it, so an attempt that has been superseded can never overwrite (or, when its
// result is discarded, delete) the live attempt's report.
func reportPath(l store.Lease) string {
	return storage.ResultKey(l.TaskNo, l.Attempt, "-errors", ".xlsx")
}

// writeErrorReport streams a task's rejected rows into an .xlsx: first a summary sheet, the
// rejected rows counted by the field at fault (most first), then the rows sheet: row number,
// fields and reason, then the row's original cells (as kept: see rawCells) under the original header,
// every text cell neutralised. Whatever task_items holds, the report stays within what a
// sheet can take: at most maxRawCells original columns, each cell cut to maxRawCellChars.
// It returns the report's storage key and the first few messages.
//
// The column titles, field names and reasons are in lang; the first messages returned are
// in the canonical form (English) whatever lang is: they are translated when shown.
func writeErrorReport(ctx context.Context, st *store.Store, fs storage.Store, l store.Lease, tempPrefix string, header []string, lang Lang) (string, []string, error) {
	out, first, err := renderErrorReport(ctx, st, fs, l.TaskID, tempPrefix, header, lang)
	if err != nil {
		return "", nil, err
	}
	defer out.Close()
	rel := reportPath(l)
	if _, err := out.Commit(ctx, rel); err != nil {
		return "", nil, err
	}
	return rel, first, nil
}

// renderErrorReport writes the report of task taskID into a temp file of out, not yet
// committed; the caller closes out.
func renderErrorReport(ctx context.Context, st *store.Store, fs storage.Store, taskID int64, prefix string, header []string, lang Lang) (*xlsxsafe.Writer, []string, error) {
	header = rawCells(header)
	if len(header) > maxRawCells {
		header = header[:maxRawCells]
	}
	titles := reportHeaders(lang)
	say := func(code string) string { return msg.Render(lang, code, nil) }
	sheet, summary, summaryTitles := say("report.errors_sheet"), say("report.summary_sheet"), []string{say("report.field"), say("report.rejected_rows")}
	byField, err := st.RejectedByField(ctx, taskID, false)
	if err != nil {
		return nil, nil, err
	}
	out, err := xlsxsafe.NewWriter(fs, prefix, summary, summaryTitles)
	if err != nil {
		return nil, nil, err
	}
	ok := false
	defer func() {
		if !ok {
			out.Close()
		}
	}()
	for _, c := range byField {
		if err := out.Row([]any{fieldLabel(c.Field, lang), c.Count}); err != nil {
			return nil, nil, err
		}
	}
	if err := out.NextSheet(sheet, append(titles[:], header...)); err != nil {
		return nil, nil, err
	}
	var first []string
	after := -1 // an undo's conflicts include row 0: a customer a replace removed
	for {
		items, err := st.Items(ctx, taskID, after, 5000)
		if err != nil {
			return nil, nil, err
		}
		for _, it := range items {
			var cells []string
			json.Unmarshal(it.Raw, &cells) //nolint:errcheck // written by this package
			cells = rawCells(cells)
			if len(cells) > maxRawCells {
				cells = cells[:maxRawCells]
			}
			row := make([]any, 0, 3+len(cells))
			row = append(row, it.Row, TranslateFields(it.Field, lang), clipChars(TranslateMessage(it.Message, lang), xlsxsafe.MaxCellChars))
			for _, c := range cells {
				row = append(row, c)
			}
			if err := out.Row(row); err != nil {
				return nil, nil, err
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
	ok = true
	return out, first, nil
}

// ErrorReportIn writes the error report of a finished import in lang to a local scratch file
// (never stored), for a download in another language than the stored report's (the rejected
// rows are kept with the task; only the words change). The caller serves the file and calls
// done.
func ErrorReportIn(ctx context.Context, st *store.Store, fs storage.Store, task *store.Task, lang Lang) (path string, done func(), err error) {
	var cp checkpoint
	json.Unmarshal(task.Checkpoint, &cp) //nolint:errcheck // written by this package
	out, _, err := renderErrorReport(ctx, st, fs, task.ID, task.TaskNo+"-"+string(lang), cp.Header, lang)
	if err != nil {
		return "", nil, err
	}
	p, err := out.Flush()
	if err != nil {
		out.Close()
		return "", nil, err
	}
	return p, func() { out.Close() }, nil
}
