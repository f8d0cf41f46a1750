package importer

import (
	"context"
	"errors"
	"io"
	"strings"

	"github.com/taskcenter/taskcenter/jobs"
)

// Form is an upload form as the client sent it, one field at a time (the HTTP layer's
// multipart reader): the import reads it without knowing HTTP.
type Form interface {
	// NextField returns the next field's name, its file name (a file field) and its body;
	// io.EOF after the last.
	NextField() (name, filename string, body io.Reader, err error)
}

// FormError is a form the request failed to deliver (cut short, too slow, over the size
// limit): the transport's own error, for the HTTP layer to answer as what it is.
type FormError struct{ Err error }

func (e *FormError) Error() string { return "the upload could not be read: " + e.Err.Error() }
func (e *FormError) Unwrap() error { return e.Err }

// Others are the form's fields the caller reads besides the import's: each named field's
// value is stored where Values points, and Done is called once the form is read, before the
// file is checked, and may refuse the upload. Fields nobody reads are skipped unread.
type Others struct {
	Values map[string]*string
	Done   func() error
}

// maxChoice is the longest value a form field other than the file (and columns) may have.
const maxChoice = 256

// maxColumnsField is the longest columns field: a mapping of every field, long headers.
const maxColumnsField = 4 << 10

// SubmitForm reads an import's form and returns the task's submission for owner. The file is
// streamed to storage as it arrives (receive); each of the uploader's choices is checked as it
// arrives (Submit.Set, over defaults), so a bad one is refused before a large file after it
// is read; a field the import does not read goes to others (the caller's own fields, such as
// a notification). Then the stored file is checked (accept). maxBytes
// bounds the file; ctx bounds the reads and the checks (the request's).
func (u *Uploads) SubmitForm(ctx context.Context, owner string, defaults Submit, form Form, maxBytes int64,
	others Others) (jobs.Submission, error) {
	choice := defaults
	var received *receivedFile
	defer func() { received.Discard() }()
	for {
		name, filename, body, err := form.NextField()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return jobs.Submission{}, &FormError{err}
		}
		if name == "file" {
			if received != nil {
				return jobs.Submission{}, badForm(`send one "file" field`)
			}
			if received, err = u.receive(ctx, filename, body, maxBytes); err != nil {
				return jobs.Submission{}, err // a FileProblem, a FormError, or the store's failure
			}
			continue
		}
		dest, theirs := others.Values[name]
		if !theirs && !isChoice(name) {
			continue // a field nobody reads
		}
		limit := maxChoice
		if name == "columns" {
			limit = maxColumnsField
		}
		value, err := smallField(body, limit)
		if err != nil {
			return jobs.Submission{}, err
		}
		if theirs {
			*dest = value
		} else if err := choice.Set(name, value); err != nil {
			return jobs.Submission{}, err
		}
	}
	if received == nil {
		return jobs.Submission{}, badForm(`the form has no "file" field; send the spreadsheet as file=@customers.xlsx`)
	}
	if others.Done != nil {
		if err := others.Done(); err != nil {
			return jobs.Submission{}, err
		}
	}
	sub, err := u.accept(ctx, received, owner, choice)
	received = nil // accept consumed it
	return sub, err
}

// smallField reads a short form value, up to limit bytes; a longer one is refused.
func smallField(r io.Reader, limit int) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return "", &FormError{err}
	}
	if len(b) > limit {
		if limit == maxColumnsField {
			return "", badForm("the columns field must be at most 4 KiB")
		}
		return "", badForm("form fields other than file must be at most 256 bytes")
	}
	return strings.TrimSpace(string(b)), nil
}

// badForm is a form whose fields are not what an import takes.
func badForm(msg string) *FileProblem {
	return &FileProblem{Kind: BadForm, Code: "invalid_upload", Message: msg}
}
