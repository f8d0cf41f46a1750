package importer

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/task"
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
// rejected rows counted by the field at fault and, under each field, by reason (most first),
// then the rows sheet: row number, fields and reason, then the row's original cells (as
// kept: see rawCells) under the original header, every text cell neutralised. Whatever
// task_items holds, the report stays within what a sheet can take: at most maxRawCells
// original columns, each cell cut to maxRawCellChars. It returns the report's storage key
// and the first few rejected rows.
//
// The column titles, field names and reasons are in lang; the first rows returned are in
// the canonical form (English) whatever lang is, and as catalogue messages to be said in
// the reader's language.
func writeErrorReport(ctx context.Context, st *store.Store, fs storage.Store, l store.Lease, tempPrefix string, header []string, lang Lang) (string, firstRows, error) {
	out, first, err := renderErrorReport(ctx, st, fs, l.TaskID, tempPrefix, header, lang)
	if err != nil {
		return "", firstRows{}, err
	}
	defer out.Close()
	rel := reportPath(l)
	if _, err := out.Commit(ctx, rel); err != nil {
		return "", firstRows{}, err
	}
	return rel, first, nil
}

// firstRows are an import's first rejected rows as a result keeps them: in English
// ("row 128, phone: must be …") and as catalogue messages, in the same order.
type firstRows struct {
	texts    []string
	messages []task.RowMessage
}

// itemParts are a rejected row's problems as catalogue messages: those stored with it, or,
// for a row stored before they were kept (messages NULL), its English message read back
// through the catalogue's templates (ParseMessage).
func itemParts(it store.Item) []task.FieldMessage {
	if it.Messages != nil {
		return it.Messages
	}
	return ParseMessage(it.Message)
}

// renderErrorReport writes the report of task taskID into a temp file of out, not yet
// committed; the caller closes out.
func renderErrorReport(ctx context.Context, st *store.Store, fs storage.Store, taskID int64, prefix string, header []string, lang Lang) (*xlsxsafe.Writer, firstRows, error) {
	header = rawCells(header)
	if len(header) > maxRawCells {
		header = header[:maxRawCells]
	}
	titles := reportHeaders(lang)
	say := func(code string) string { return msg.Render(lang, code, nil) }
	sheet, summary := say("report.errors_sheet"), say("report.summary_sheet")
	summaryTitles := []string{say("report.field"), say("report.reason"), say("report.rejected_rows")}
	byField, err := st.RejectedByField(ctx, taskID, false)
	if err != nil {
		return nil, firstRows{}, err
	}
	out, err := xlsxsafe.NewWriter(fs, prefix, summary, summaryTitles)
	if err != nil {
		return nil, firstRows{}, err
	}
	ok := false
	defer func() {
		if !ok {
			out.Close()
		}
	}()
	if err := writeSummary(out, byField, lang); err != nil {
		return nil, firstRows{}, err
	}
	if err := out.NextSheet(sheet, append(titles[:], header...)); err != nil {
		return nil, firstRows{}, err
	}
	var first firstRows
	after := -1 // an undo's conflicts include row 0: a customer a replace removed
	for {
		items, err := st.Items(ctx, taskID, after, 5000)
		if err != nil {
			return nil, firstRows{}, err
		}
		for _, it := range items {
			var cells []string
			json.Unmarshal(it.Raw, &cells) //nolint:errcheck // written by this package
			cells = rawCells(cells)
			if len(cells) > maxRawCells {
				cells = cells[:maxRawCells]
			}
			parts := itemParts(it)
			row := make([]any, 0, 3+len(cells))
			row = append(row, it.Row, TranslateFields(it.Field, lang), clipChars(renderParts(parts, lang), xlsxsafe.MaxCellChars))
			for _, c := range cells {
				row = append(row, c)
			}
			if err := out.Row(row); err != nil {
				return nil, firstRows{}, err
			}
			if len(first.texts) < 10 {
				text := clipChars(fmt.Sprintf("row %d, %s", it.Row, it.Message), 500)
				m := task.RowMessage{Row: it.Row, Parts: it.Messages}
				if it.Messages == nil {
					m = ParseRowError(text) // a row stored before its messages: as cut for first_errors
				}
				first.texts, first.messages = append(first.texts, text), append(first.messages, m)
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

// writeSummary writes the summary sheet's rows: each field's rejected rows by reason; rows
// stored without their messages count under the field with no reason.
func writeSummary(out *xlsxsafe.Writer, byField []store.FieldCount, lang Lang) error {
	for _, c := range byField {
		label, said := fieldLabel(c.Field, lang), int64(0)
		for _, r := range c.Reasons {
			if err := out.Row([]any{label, reasonIn(r.Code, r.Params, lang), r.Count}); err != nil {
				return err
			}
			said += r.Count
		}
		if c.Count > said {
			if err := out.Row([]any{label, "", c.Count - said}); err != nil {
				return err
			}
		}
	}
	return nil
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
