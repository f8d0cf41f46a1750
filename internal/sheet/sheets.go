package sheet

import (
	"fmt"
	"io"
	"strings"

	"github.com/taskcenter/taskcenter/internal/sheet/sheettype"
	"github.com/taskcenter/taskcenter/internal/sheet/xls"
)

// Choosing the sheet. A workbook often has a cover or notes sheet first ("说明"), the data on
// another. When the uploader names no sheet and the first one does not start with the column
// names, Inspect takes the one sheet that does; when several do, it asks which.

// headerMatches reports whether one of the first HeaderSearchRows rows of src is a header
// (isHeader, nil: none is).
func headerMatches(src source, isHeader func([]string) bool) (bool, error) {
	if isHeader == nil {
		return false, nil
	}
	for src.Next() {
		n, cells := src.Row()
		if n > HeaderSearchRows {
			return false, nil
		}
		if isHeader(cells) {
			return true, nil
		}
	}
	return false, src.Err()
}

// pickSheet chooses among the sheets (in workbook order) when none was named: the first when
// its header matches, else the only other one whose header does. open opens a sheet by name.
// A first sheet that cannot be read is an error; another one that cannot is not a match.
func pickSheet(names []string, open func(string) (source, error), isHeader func([]string) bool) (string, error) {
	matches := func(name string) (bool, error) {
		src, err := open(name)
		if err != nil {
			return false, err
		}
		defer src.Close()
		return headerMatches(src, isHeader)
	}
	if len(names) < 2 {
		return firstOf(names), nil
	}
	if ok, err := matches(names[0]); ok || err != nil {
		return names[0], err
	}
	var hits []string
	for _, n := range names[1:] {
		if ok, _ := matches(n); ok {
			hits = append(hits, n)
		}
	}
	switch len(hits) {
	case 0:
		return names[0], nil // the reader of its rows reports the missing header
	case 1:
		return hits[0], nil
	}
	quoted := make([]string, len(hits))
	for i, h := range hits {
		quoted[i] = fmt.Sprintf("%q", h)
	}
	return "", sheettype.Errorf(sheettype.AmbiguousSheet,
		"the first sheet %q does not start with the column names, and several sheets do: %s; send the one to import in the sheet field",
		names[0], strings.Join(quoted, ", "))
}

func firstOf(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

// inspectXLS checks an .xls: it opens, has the sheet asked for (or picks one), every row of
// that sheet reads, and the sheet is within the row limit.
func inspectXLS(r io.ReaderAt, size int64, sheet string, lim Limits, isHeader func([]string) bool) (Inspection, error) {
	bk, err := xls.Open(r, size, lim, xlsStrings(""))
	if err != nil {
		return Inspection{}, err
	}
	defer bk.Close()
	names := bk.Sheets()
	if len(names) == 0 {
		return Inspection{}, sheettype.Errorf(sheettype.NoSheets, "the workbook has no worksheets")
	}
	if sheet == "" {
		if sheet, err = pickSheet(names, func(n string) (source, error) { return bk.Sheet(n) }, isHeader); err != nil {
			return Inspection{}, err
		}
	} else if !contains(names, sheet) {
		return Inspection{}, sheettype.Errorf(sheettype.SheetNotFound, "the workbook has no sheet named %q; it has: %s", sheet, strings.Join(names, ", "))
	}
	src, err := bk.Sheet(sheet)
	if err != nil {
		return Inspection{}, err
	}
	last := 0
	for src.Next() {
		if n, cells := src.Row(); len(src.Long()) > 0 || !Blank(cells) {
			last = n
		}
	}
	if err := src.Err(); err != nil {
		return Inspection{}, err
	}
	ins := Inspection{Format: XLS, Sheet: sheet, Sheets: names, Rows: max(last-1, 0), Counted: true}
	if ins.Rows > lim.MaxRows {
		return Inspection{}, tooManyRows(fmt.Sprintf("the sheet %q", sheet), ins.Rows, lim)
	}
	return ins, nil
}

func contains(names []string, s string) bool {
	for _, n := range names {
		if n == s {
			return true
		}
	}
	return false
}

// Blank reports whether every cell of a row is empty after trimming: a row that holds no
// data, for Inspect counting an .xls sheet's rows as for an importer reading them.
func Blank(row []string) bool {
	for _, c := range row {
		if strings.TrimSpace(c) != "" {
			return false
		}
	}
	return true
}
