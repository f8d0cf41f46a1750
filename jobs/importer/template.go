package importer

import (
	"bytes"
	"encoding/csv"
	"fmt"

	"github.com/xuri/excelize/v2"

	"github.com/taskcenter/taskcenter/internal/sheet"
	"github.com/taskcenter/taskcenter/internal/sheet/sheettype"
	"github.com/taskcenter/taskcenter/internal/xlsxsafe"
)

// The import template ("下载模板"): the columns the import reads, named in the reader's
// language, one example row, and in the .xlsx a drop-down of the levels, text-formatted code
// and phone columns (so Excel keeps an 11-digit phone number as typed) and a frozen header.

// templateColumn is one column of the template.
type templateColumn struct {
	f       field
	example [2]string // en, zh
	width   float64
	text    bool // formatted as text
}

var templateColumns = []templateColumn{
	{fCode, [2]string{"C0001", "C0001"}, 14, true},
	{fName, [2]string{"Acme Trading Co.", "上海示例贸易有限公司"}, 28, false},
	{fPhone, [2]string{"13800138000", "13800138000"}, 16, true},
	{fEmail, [2]string{"contact@example.com", "contact@example.com"}, 26, false},
	{fCity, [2]string{"Shanghai", "上海"}, 12, false},
	{fLevel, [2]string{"gold", "黄金"}, 10, false},
}

// levelChoicesIn are the level values the drop-down offers, in lang.
func levelChoicesIn(lang Lang) []string {
	if lang == LangZH {
		return []string{"普通", "白银", "黄金", "铂金", "钻石"}
	}
	return []string{"normal", "silver", "gold", "platinum", "diamond"}
}

// Template writes the import template in lang as format (XLSX or CSV), and its file name.
func Template(lang Lang, format sheet.Format) ([]byte, string, error) {
	li := 0
	if lang == LangZH {
		li = 1
	}
	header := make([]string, len(templateColumns))
	example := make([]string, len(templateColumns))
	for i, c := range templateColumns {
		header[i] = fieldLabel(fieldNames[c.f], lang)
		example[i] = c.example[li]
	}
	name := "customers-template-" + string(lang) + "." + string(format)
	switch format {
	case sheet.CSV:
		b, err := csvTemplate(header, example)
		return b, name, err
	case sheet.XLSX:
		b, err := xlsxTemplate(lang, header, example)
		return b, name, err
	}
	return nil, "", fmt.Errorf("no template in format %q", format)
}

// csvTemplate is the template as a CSV: UTF-8 with a BOM, as Excel's "CSV UTF-8" writes it,
// so Excel opens the Chinese header correctly.
func csvTemplate(header, example []string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("\uFEFF")
	w := csv.NewWriter(&b)
	w.UseCRLF = true
	w.Write(header)  //nolint:errcheck // a bytes.Buffer does not fail
	w.Write(example) //nolint:errcheck
	w.Flush()
	return b.Bytes(), w.Error()
}

// xlsxTemplate is the template as an .xlsx: styled header, text columns, level drop-down.
func xlsxTemplate(lang Lang, header, example []string) ([]byte, error) {
	f := excelize.NewFile()
	defer f.Close()
	xlsxsafe.SetDimensions(f)
	sheetName := "customers"
	if lang == LangZH {
		sheetName = "客户"
	}
	if err := f.SetSheetName("Sheet1", sheetName); err != nil {
		return nil, err
	}
	bold, err := f.NewStyle(&excelize.Style{Font: &excelize.Font{Bold: true},
		Fill: excelize.Fill{Type: "pattern", Pattern: 1, Color: []string{"#DDEBF7"}}})
	if err != nil {
		return nil, err
	}
	textStyle, err := f.NewStyle(&excelize.Style{NumFmt: 49}) // "@": text
	if err != nil {
		return nil, err
	}
	for i, c := range templateColumns {
		col := sheettype.ColumnName(i)
		if err := f.SetColWidth(sheetName, col, col, c.width); err != nil {
			return nil, err
		}
		if c.text {
			if err := f.SetColStyle(sheetName, col, textStyle); err != nil {
				return nil, err
			}
		}
		if err := f.SetCellStr(sheetName, col+"1", header[i]); err != nil {
			return nil, err
		}
		if err := f.SetCellStr(sheetName, col+"2", example[i]); err != nil {
			return nil, err
		}
	}
	last := sheettype.ColumnName(len(templateColumns)-1) + "1"
	if err := f.SetCellStyle(sheetName, "A1", last, bold); err != nil {
		return nil, err
	}
	if err := f.SetPanes(sheetName, &excelize.Panes{Freeze: true, YSplit: 1, TopLeftCell: "A2", ActivePane: "bottomLeft"}); err != nil {
		return nil, err
	}
	dv := excelize.NewDataValidation(true)
	levelCol := sheettype.ColumnName(len(templateColumns) - 1)
	dv.Sqref = fmt.Sprintf("%s2:%s%d", levelCol, levelCol, excelize.TotalRows)
	if err := dv.SetDropList(levelChoicesIn(lang)); err != nil {
		return nil, err
	}
	if lang == LangZH {
		dv.SetError(excelize.DataValidationErrorStyleStop, "等级", "请从列表中选择：普通、白银、黄金、铂金、钻石")
	} else {
		dv.SetError(excelize.DataValidationErrorStyleStop, "level", "choose from the list: normal, silver, gold, platinum, diamond")
	}
	if err := f.AddDataValidation(sheetName, dv); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if _, err := f.WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
