package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// LogOptions select a task's log lines.
type LogOptions struct {
	// Attempt keeps to one attempt's lines (0: every attempt's).
	Attempt int
	// Limit is the most lines a page holds (0: the server's default, 100; at most 1000).
	Limit int
}

// LogPage is a page of a task's log, oldest line first. NextCursor continues with the lines
// written before the page's first; it is empty on the earliest page.
type LogPage struct {
	Items      []LogLine `json:"items"`
	NextCursor string    `json:"next_cursor"`
}

// LogPage returns a page of a task's log: with cursor "", its newest lines; with the
// previous page's NextCursor, the lines before them. Every line carries its attempt.
func (c *Client) LogPage(ctx context.Context, id string, opts LogOptions, cursor string) (*LogPage, error) {
	q := url.Values{}
	if opts.Attempt > 0 {
		q.Set("attempt", strconv.Itoa(opts.Attempt))
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	return callFor[LogPage](ctx, c, http.MethodGet, "/api/v1/tasks/"+url.PathEscape(id)+"/logs", q, nil)
}

// DownloadLog writes a task's whole log to w as text, oldest line first under a heading per
// attempt. The log is written as it is read: a broken transfer is not resumed, download it
// again.
func (c *Client) DownloadLog(ctx context.Context, id string, w io.Writer) (*Download, error) {
	d := &Download{}
	req, err := c.request(ctx, http.MethodGet, "/api/v1/tasks/"+url.PathEscape(id)+"/logs.txt", nil, nil)
	if err != nil {
		return d, err
	}
	res, err := c.open(req)
	if err != nil {
		return d, err
	}
	defer res.Body.Close()
	d.nameFrom(res.Header)
	d.Size, err = io.Copy(w, res.Body)
	return d, err
}
