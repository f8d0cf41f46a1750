package importer

import (
	"context"
	"errors"
	"io"
	"strings"

	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/store/webhooks"
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

// maxChoice is the longest value a form field other than the file (and columns) may have.
const maxChoice = 256

// maxColumnsField is the longest columns field: a mapping of every field, long headers.
const maxColumnsField = 4 << 10

// SubmitForm reads an import's form and submits its task for owner. The file is streamed to
// storage as it arrives (receive); each of the uploader's choices is checked as it arrives
// (Submit.Set, over defaults), so a bad one is refused before a large file after it is read;
// fields the import does not read are skipped unread. Then the notification is checked, the
// stored file is checked (accept), and the task is submitted with its notification. maxBytes
// bounds the file; ctx bounds the reads and the checks (the request's).
func (u *Uploads) SubmitForm(ctx context.Context, owner, requestID string, defaults Submit, form Form, maxBytes int64) (jobs.SubmitResult, error) {
	choice := defaults
	var (
		received *receivedFile
		notify   webhooks.Notify
	)
	defer func() { received.Discard() }()
	fields := map[string]*string{"notify_url": &notify.URL, "notify_secret": &notify.Secret}
	for {
		name, filename, body, err := form.NextField()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return jobs.SubmitResult{}, &FormError{err}
		}
		if name == "file" {
			if received != nil {
				return jobs.SubmitResult{}, badForm(`send one "file" field`)
			}
			if received, err = u.receive(ctx, filename, body, maxBytes); err != nil {
				return jobs.SubmitResult{}, err // a FileProblem, a FormError, or the store's failure
			}
			continue
		}
		dest, isNotify := fields[name]
		if !isNotify && !isChoice(name) {
			continue // a field the import does not read
		}
		limit := maxChoice
		if name == "columns" {
			limit = maxColumnsField
		}
		value, err := smallField(body, limit)
		if err != nil {
			return jobs.SubmitResult{}, err
		}
		if isNotify {
			*dest = value
		} else if err := choice.Set(name, value); err != nil {
			return jobs.SubmitResult{}, err
		}
	}
	if received == nil {
		return jobs.SubmitResult{}, badForm(`the form has no "file" field; send the spreadsheet as file=@customers.xlsx`)
	}
	ns, err := u.checkNotify(ctx, notify, owner)
	if err != nil {
		return jobs.SubmitResult{}, err
	}
	sub, err := u.accept(ctx, received, owner, choice)
	received = nil // accept consumed it
	if err != nil {
		return jobs.SubmitResult{}, err
	}
	return u.submit(ctx, sub, ns, requestID)
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
