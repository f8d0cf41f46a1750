package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Download is what a download wrote.
type Download struct {
	// Name is the file name the server suggests (Content-Disposition).
	Name string
	// ContentType is the file's media type.
	ContentType string
	// Size is the number of bytes written.
	Size int64
	// Resumed counts the times the transfer broke and went on from where it stopped.
	Resumed int
}

// nameFrom takes the file's name and media type from the headers of the answer that brings it.
func (d *Download) nameFrom(h http.Header) {
	d.ContentType = h.Get("Content-Type")
	if _, params, err := mime.ParseMediaType(h.Get("Content-Disposition")); err == nil {
		d.Name = params["filename"]
	}
}

// maxResumes bounds how often one download resumes after the connection broke.
const maxResumes = 5

// DownloadResult streams a finished task's result file to w. A transfer that breaks goes on
// from the last byte written (Range, guarded by If-Range so a changed file restarts nothing
// silently), up to 5 times.
func (c *Client) DownloadResult(ctx context.Context, id string, w io.Writer) (*Download, error) {
	return c.download(ctx, "/api/v1/tasks/"+url.PathEscape(id)+"/result", w)
}

// DownloadErrorReport streams an import's error report (.xlsx of the rejected rows) to w.
func (c *Client) DownloadErrorReport(ctx context.Context, id string, w io.Writer) (*Download, error) {
	return c.download(ctx, "/api/v1/tasks/"+url.PathEscape(id)+"/error-report", w)
}

func (c *Client) download(ctx context.Context, path string, w io.Writer) (*Download, error) {
	d := &Download{}
	var validator string // ETag or Last-Modified of the first answer
	for {
		req, err := c.request(ctx, http.MethodGet, path, nil, nil)
		if err != nil {
			return d, err
		}
		if d.Size > 0 {
			req.Header.Set("Range", "bytes="+strconv.FormatInt(d.Size, 10)+"-")
			if validator != "" {
				req.Header.Set("If-Range", validator)
			}
		}
		res, err := c.http.Do(req)
		if err != nil {
			if d.Size > 0 && d.Resumed < maxResumes && ctx.Err() == nil {
				d.Resumed++
				sleep(ctx, time.Duration(d.Resumed)*500*time.Millisecond)
				continue
			}
			return d, err
		}
		switch {
		case res.StatusCode == http.StatusOK && d.Size > 0:
			res.Body.Close()
			return d, fmt.Errorf("taskcenter: the file changed while it was being downloaded; %d bytes were written, start again", d.Size)
		case res.StatusCode == http.StatusOK:
			validator = cmp.Or(res.Header.Get("ETag"), res.Header.Get("Last-Modified"))
			d.nameFrom(res.Header)
		case res.StatusCode == http.StatusPartialContent && d.Size > 0 && strings.HasPrefix(res.Header.Get("Content-Range"), "bytes "+strconv.FormatInt(d.Size, 10)+"-"):
		default:
			p := problemOf(res)
			res.Body.Close()
			return d, p
		}
		n, err := io.Copy(destination{w}, res.Body)
		res.Body.Close()
		d.Size += n
		if err == nil {
			return d, nil
		}
		var werr writeError
		if errors.As(err, &werr) || ctx.Err() != nil || d.Resumed >= maxResumes {
			return d, err
		}
		d.Resumed++
	}
}

// writeError marks errors of the destination writer (never retried). io.Copy does not tell
// them apart, so the destination is wrapped.
type writeError struct{ error }

func (e writeError) Unwrap() error { return e.error }

// destination wraps the caller's writer so its errors are writeErrors.
type destination struct{ w io.Writer }

func (d destination) Write(p []byte) (int, error) {
	n, err := d.w.Write(p)
	if err != nil {
		err = writeError{err}
	}
	return n, err
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
