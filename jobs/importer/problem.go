package importer

import (
	"errors"
	"fmt"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/sheet/sheettype"
)

// FileProblem is why an uploaded file cannot be imported, in words for its uploader.
type FileProblem struct {
	Kind    ProblemKind
	Code    string
	Message string
	// Params are the values the message (problem.<Code> in the catalogue) names, when it
	// names any.
	Params msg.Params
	// Field names the form field at fault when it is one of the uploader's choices (mode,
	// sheet, encoding), with what a valid value is (FieldMessage).
	Field        string
	FieldMessage msg.Message
}

// ProblemKind sorts file problems into the HTTP answers they get.
type ProblemKind int

// Kinds of file problems.
const (
	// Unsupported: not a spreadsheet we read (415).
	Unsupported ProblemKind = iota
	// Invalid: a spreadsheet, but damaged or unusable as it is (422).
	Invalid
	// TooLarge: over a size limit (413).
	TooLarge
	// BadForm: the upload form is not what an import takes (400): no file, two files, a
	// field too long.
	BadForm
	// Gone: the stored upload a re-submit names is no longer kept (410).
	Gone
)

func (p *FileProblem) Error() string { return p.Message }

func problem(kind ProblemKind, code, format string, args ...any) *FileProblem {
	return &FileProblem{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...)}
}

// fileProblem turns what the spreadsheet reader found wrong with a file (a *sheettype.Error)
// into the file problem the uploader is told, with its code and message; any other error is
// returned as it is.
func fileProblem(err error) error {
	var se *sheettype.Error
	if !errors.As(err, &se) {
		return err
	}
	kind := Invalid
	switch se.Code {
	case sheettype.UnsupportedFormat:
		kind = Unsupported
	case sheettype.TooLargeUncompressed:
		kind = TooLarge
	}
	return &FileProblem{Kind: kind, Code: string(se.Code), Message: se.Message}
}
