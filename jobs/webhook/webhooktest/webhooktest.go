// Package webhooktest gives tests a subscriber's endpoint that can go down and come back on
// the same address, as a real one does when it restarts, so a test can watch deliveries fail
// and then be sent again.
package webhooktest

import (
	"net"
	"net/http"
	"sync"
	"testing"
)

// Endpoint serves a handler on a port of 127.0.0.1 of its own.
type Endpoint struct {
	t    testing.TB
	addr string
	h    http.Handler

	mu  sync.Mutex
	srv *http.Server // nil while down
}

// NewEndpoint serves h until Stop or the end of the test.
func NewEndpoint(t testing.TB, h http.Handler) *Endpoint {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &Endpoint{t: t, addr: ln.Addr().String(), h: h}
	e.serve(ln)
	t.Cleanup(e.Stop)
	return e
}

// Addr is the endpoint's host:port.
func (e *Endpoint) Addr() string { return e.addr }

// URL is the endpoint's URL with path.
func (e *Endpoint) URL(path string) string { return "http://" + e.addr + path }

// Stop closes the listener and every connection: deliveries fail at once.
func (e *Endpoint) Stop() {
	e.mu.Lock()
	srv := e.srv
	e.srv = nil
	e.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// Start serves again on the address the endpoint had.
func (e *Endpoint) Start() {
	e.t.Helper()
	ln, err := net.Listen("tcp", e.addr)
	if err != nil {
		e.t.Fatal(err)
	}
	e.serve(ln)
}

func (e *Endpoint) serve(ln net.Listener) {
	srv := &http.Server{Handler: e.h}
	e.mu.Lock()
	e.srv = srv
	e.mu.Unlock()
	go srv.Serve(ln) //nolint:errcheck // closed by Stop
}
