package contracttest

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"testing"
)

// maxKept bounds the bytes of one body kept for checking; a longer body (a large download)
// is checked by its status and headers only.
const maxKept = 8 << 20

// Transport checks every exchange made through base (nil: http.DefaultTransport) against
// the contract, failing t on a contradiction. The answer's body is checked when the caller
// has read it to the end and closed it; a request body is checked when it can be read again
// (http.NewRequest with a byte reader or string).
func (c *Contract) Transport(t testing.TB, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{c: c, base: base, rep: newReporter(t)}
}

// Client is an http.Client that checks its exchanges (see Transport); each hop of a
// redirect is an exchange of its own.
func (c *Contract) Client(t testing.TB) *http.Client {
	return &http.Client{Transport: c.Transport(t, nil)}
}

type transport struct {
	c    *Contract
	base http.RoundTripper
	rep  *reporter
}

func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body == nil || req.Body == http.NoBody {
		reqBody = []byte{}
	} else if req.GetBody != nil && req.ContentLength >= 0 && req.ContentLength <= maxKept {
		if rc, err := req.GetBody(); err == nil {
			reqBody, _ = io.ReadAll(rc)
			rc.Close()
		}
	}
	res, err := tr.base.RoundTrip(req)
	if err != nil {
		return res, err
	}
	res.Body = &checkedBody{ReadCloser: res.Body, tr: tr, ex: Exchange{Request: req, RequestBody: reqBody,
		Status: res.StatusCode, Header: res.Header.Clone()}, within: res.ContentLength <= maxKept}
	return res, nil
}

// checkedBody keeps what the caller reads and checks the exchange once it has all of it.
type checkedBody struct {
	io.ReadCloser
	tr      *transport
	ex      Exchange
	buf     bytes.Buffer
	within  bool // the body is small enough to keep
	eof     bool
	checked bool
}

func (b *checkedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.within {
		b.buf.Write(p[:n])
		if b.buf.Len() > maxKept {
			b.within = false
			b.buf = bytes.Buffer{}
		}
	}
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *checkedBody) Close() error {
	if !b.checked {
		b.checked = true
		switch {
		case b.eof && b.within:
			b.ex.Body = b.buf.Bytes()
			b.tr.rep.report(b.tr.c.Check(b.ex))
		default:
			// Not read to the end (a stream the test left, a download it did not need):
			// the status and headers are still the document's.
			b.tr.rep.report(b.tr.c.checkHead(b.ex))
		}
	}
	return b.ReadCloser.Close()
}

// Handler checks every exchange served by h against the contract, as a client would see it.
// Streaming (Flush) and http.ResponseController keep working through it.
func (c *Contract) Handler(t testing.TB, h http.Handler) http.Handler {
	rep := newReporter(t)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The request body is kept as the handler reads it (reading it first would change how
		// a slow or endless body is met); it is checked when the handler read all of it.
		var kept *keptBody
		if r.Body != nil && r.Body != http.NoBody {
			kept = &keptBody{ReadCloser: r.Body}
			r.Body = kept
		}
		cw := &capture{ResponseWriter: w, within: true}
		h.ServeHTTP(cw, r)
		ex := Exchange{Request: r, RequestBody: []byte{}, Status: cw.status(), Header: w.Header().Clone()}
		if kept != nil {
			ex.RequestBody = kept.all()
		}
		if cw.hijacked {
			return
		}
		if !cw.within {
			rep.report(c.checkHead(ex))
			return
		}
		ex.Body = cw.buf.Bytes()
		if ex.Header.Get("Content-Type") == "" && len(ex.Body) > 0 {
			ex.Header.Set("Content-Type", http.DetectContentType(ex.Body)) // as net/http sends it
		}
		rep.report(c.Check(ex))
	})
}

// keptBody keeps a copy of the request body as it is read.
type keptBody struct {
	io.ReadCloser
	buf bytes.Buffer
	eof bool
}

func (k *keptBody) Read(p []byte) (int, error) {
	n, err := k.ReadCloser.Read(p)
	if k.buf.Len() <= maxKept {
		k.buf.Write(p[:n])
	}
	k.eof = k.eof || err == io.EOF
	return n, err
}

// all is the whole body, or nil when it was not read to its end or was too long to keep.
func (k *keptBody) all() []byte {
	if !k.eof || k.buf.Len() > maxKept {
		return nil
	}
	return k.buf.Bytes()
}

// capture passes an answer through while keeping a copy of it.
type capture struct {
	http.ResponseWriter
	code     int
	buf      bytes.Buffer
	within   bool
	hijacked bool
}

func (c *capture) status() int {
	if c.code == 0 {
		return http.StatusOK
	}
	return c.code
}

func (c *capture) WriteHeader(code int) {
	if c.code == 0 && code >= 200 {
		c.code = code
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *capture) Write(p []byte) (int, error) {
	if c.code == 0 {
		c.code = http.StatusOK
	}
	if c.within {
		c.buf.Write(p)
		if c.buf.Len() > maxKept {
			c.within, c.buf = false, bytes.Buffer{}
		}
	}
	return c.ResponseWriter.Write(p)
}

func (c *capture) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *capture) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c.hijacked = true
	return http.NewResponseController(c.ResponseWriter).Hijack()
}

func (c *capture) Unwrap() http.ResponseWriter { return c.ResponseWriter }
