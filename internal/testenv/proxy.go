package testenv

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP forwarder a test can cut and restore, to take Postgres or Redis away from
// the processes under test (as a restart or an outage would) without touching the shared
// servers other tests use.
type Proxy struct {
	t      testing.TB
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	hold  *hold
	wg    sync.WaitGroup
}

// hold is a request the proxy keeps from the target: the first one carrying marker.
type hold struct {
	marker []byte
	caught chan struct{}
	once   sync.Once
}

// NewProxy forwards a fresh loopback port to target until the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p := &Proxy{t: t, target: target, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(func() {
		p.Cut()
		p.wg.Wait()
	})
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.addr }

// Cut closes every connection and refuses new ones, as a stopped server does.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Hold makes the proxy keep back, from now on, the first request whose bytes carry marker
// (a piece of one SQL statement, say): from there on that connection forwards nothing to
// the target, so the request never arrives and its sender waits, as behind a network that
// stopped mid-request; the other connections go on. The channel closes once a request is
// held. Cut ends the held connection (the request is then lost, never sent).
func (p *Proxy) Hold(marker []byte) <-chan struct{} {
	h := &hold{marker: bytes.Clone(marker), caught: make(chan struct{})}
	p.mu.Lock()
	p.hold = h
	p.mu.Unlock()
	return h.caught
}

func (p *Proxy) currentHold() *hold {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hold
}

// forward copies what the client sends to the server, until a held request (Hold).
func (p *Proxy) forward(server, client net.Conn) {
	buf := make([]byte, 64<<10)
	var tail []byte // the end of what was forwarded, for a marker split across reads
	for {
		n, err := client.Read(buf)
		if n > 0 {
			if h := p.currentHold(); h != nil {
				window := append(tail, buf[:n]...)
				if bytes.Contains(window, h.marker) {
					h.once.Do(func() { close(h.caught) })
					io.Copy(io.Discard, client) //nolint:errcheck // until the client dies or Cut
					return
				}
				keep := min(len(window), len(h.marker)-1)
				tail = append([]byte(nil), window[len(window)-keep:]...)
			}
			if _, werr := server.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Restore accepts connections again on the same address.
func (p *Proxy) Restore() {
	p.t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("proxy: listen again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.pipe(c) })
		}
	})
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) pipe(client net.Conn) {
	if !p.track(client) {
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil || !p.track(server) {
		client.Close()
		return
	}
	done := make(chan struct{}, 2)
	go func() {
		p.forward(server, client) // a cut ends it with an error
		server.Close()
		client.Close()
		done <- struct{}{}
	}()
	go func() {
		io.Copy(client, server) //nolint:errcheck // a cut ends the copy with an error
		client.Close()
		server.Close()
		done <- struct{}{}
	}()
	<-done
	<-done
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}
