// Package xlsxsafe neutralises cell values a spreadsheet program would treat as a formula
// (CSV/formula injection), for every file taskcenter writes for users to open.
package xlsxsafe

// Neutralize prefixes s with an apostrophe when it starts with a character that makes
// Excel, LibreOffice or Sheets read the cell as a formula: = + - @, tab or carriage return.
// The value stays readable and is shown as text.
func Neutralize(s string) string {
	if s == "" {
		return s
	}
	switch s[0] {
	case '=', '+', '-', '@', '\t', '\r':
		return "'" + s
	}
	return s
}
