// Package client is a Go client of the taskcenter REST API: submit imports, exports and other
// task types, follow them to the end (live through Server-Sent Events where the server offers
// them, polling otherwise), list, cancel, retry and download results, manage webhook
// subscriptions, and verify the signature of webhook deliveries. It depends on the standard
// library only.
//
// Errors the API answers are *Problem values carrying the stable problem code:
//
//	var p *client.Problem
//	if errors.As(err, &p) && p.Code == "task_not_found" { … }
package client

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client calls one taskcenter server with one bearer token. It is safe for concurrent use.
type Client struct {
	base      *url.URL
	token     string
	http      *http.Client
	userAgent string
	pollFirst time.Duration
	maxPoll   time.Duration
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sends requests through hc (for its transport, proxies or TLS settings).
// Do not give it a Timeout: downloads and event streams last as long as they need; bound
// calls with their context instead.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// WithPollInterval sets the first and the longest interval between polls when Wait cannot
// follow the event stream. Defaults 500ms and 5s.
func WithPollInterval(first, longest time.Duration) Option {
	return func(c *Client) { c.pollFirst, c.maxPoll = first, longest }
}

// New returns a client of the server at baseURL (e.g. http://localhost:8080) using token.
func New(baseURL, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("taskcenter: base URL %q must be an absolute http(s) URL such as http://localhost:8080", baseURL)
	}
	c := &Client{base: u, token: token, http: http.DefaultClient, userAgent: "taskcenter-go-client/1",
		pollFirst: 500 * time.Millisecond, maxPoll: 5 * time.Second}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Problem is an error the API answered (RFC 9457 problem details). Code is stable and meant
// for programs; Detail is written for people.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
	// Params are the values the detail names (the message "problem.<code>").
	Params    map[string]string `json:"params,omitempty"`
	RequestID string            `json:"request_id"`
	Errors    []FieldError      `json:"errors"`
	// Details are structured facts to act on: for an import whose header cannot be used, the
	// file's headers, the unknown ones and the fields missing (see ResubmitImport's Columns).
	Details json.RawMessage `json:"details,omitempty"`
	// RetryAfter is the server's Retry-After, when it sent one (429, 503).
	RetryAfter time.Duration `json:"-"`
}

// FieldError is one invalid field of a rejected request. Message is in English; Code and
// Params are the same message as data, for a program that says it in another language.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
	// Code names the message, e.g. "field_error.too_long".
	Code string `json:"code"`
	// Params are the values the message names.
	Params map[string]string `json:"params,omitempty"`
}

func (p Problem) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%d %s)", cmp.Or(p.Detail, p.Title, http.StatusText(p.Status)), p.Status, p.Code)
	for _, f := range p.Errors {
		fmt.Fprintf(&b, "; %s: %s", f.Field, f.Message)
	}
	if p.RequestID != "" {
		fmt.Fprintf(&b, " [request %s]", p.RequestID)
	}
	return b.String()
}

// As lets errors.As fill a Problem value as well as a *Problem.
func (p *Problem) As(target any) bool {
	if t, ok := target.(*Problem); ok {
		*t = *p
		return true
	}
	return false
}

// url resolves an API path (with an optional query) against the base URL.
func (c *Client) url(path string, q url.Values) string {
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + path
	if len(q) > 0 {
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// request builds an authenticated request.
func (c *Client) request(ctx context.Context, method, path string, q url.Values, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.url(path, q), body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("User-Agent", c.userAgent)
	return req, nil
}

// callFor makes a call (see call) whose 2xx answer is a T, and returns it.
func callFor[T any](ctx context.Context, c *Client, method, path string, q url.Values, in any, headers ...string) (*T, error) {
	out := new(T)
	if _, err := c.call(ctx, method, path, q, in, out, headers...); err != nil {
		return nil, err
	}
	return out, nil
}

// items makes a GET of path whose answer lists Ts under "items", and returns them.
func items[T any](ctx context.Context, c *Client, path string) ([]T, error) {
	out, err := callFor[struct {
		Items []T `json:"items"`
	}](ctx, c, http.MethodGet, path, nil, nil)
	if err != nil {
		return nil, err
	}
	return out.Items, nil
}

// call sends a JSON request (in may be nil) and decodes a 2xx JSON answer into out (may be
// nil); any other answer is a *Problem.
func (c *Client) call(ctx context.Context, method, path string, q url.Values, in, out any, headers ...string) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := c.request(ctx, method, path, q, body)
	if err != nil {
		return nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] != "" {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	req.Header.Set("Accept", "application/json")
	return c.do(req, out)
}

// do sends req and decodes the answer.
func (c *Client) do(req *http.Request, out any) (*http.Response, error) {
	res, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode >= 300 {
		return res, problemOf(res)
	}
	if out != nil && res.StatusCode != http.StatusNoContent {
		if err := json.NewDecoder(res.Body).Decode(out); err != nil {
			return res, fmt.Errorf("taskcenter: decode the answer to %s %s: %w", req.Method, req.URL.Path, err)
		}
	}
	return res, nil
}

// open sends req for an answer read as it streams: the response when it is 200 (the caller
// closes its body), or else the Problem it answered.
func (c *Client) open(req *http.Request) (*http.Response, error) {
	res, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		defer res.Body.Close()
		return nil, problemOf(res)
	}
	return res, nil
}

// problemOf reads an error answer; a body that is not problem+json still gives a Problem.
func problemOf(res *http.Response) *Problem {
	p := &Problem{}
	b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if json.Unmarshal(b, p) != nil || p.Status == 0 {
		p = &Problem{Status: res.StatusCode, Title: http.StatusText(res.StatusCode), Code: "http_" + strconv.Itoa(res.StatusCode),
			Detail: strings.TrimSpace(string(b))}
		if len(p.Detail) > 200 {
			p.Detail = p.Detail[:200] + "…"
		}
	}
	if p.RequestID == "" {
		p.RequestID = res.Header.Get("X-Request-ID")
	}
	if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && s > 0 {
		p.RetryAfter = time.Duration(s) * time.Second
	}
	return p
}
