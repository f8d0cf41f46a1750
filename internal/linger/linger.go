// Package linger makes the last answer on an HTTP connection reach a client that is still
// sending. net/http answers a request head over its MaxHeaderBytes with 431, and closes the
// connection after an answer that left a large body unread (the API's 413 for an oversized
// upload); either way it hangs up while the client may still be writing: after a fixed
// half-second wait it closes a socket holding unread bytes, the kernel answers the client's
// next segment with a reset, and many TCP stacks drop the unread answer along with the
// connection. The client sees "connection reset" or "broken pipe" instead of the status.
//
// RFC 9112 §9.6 (formerly RFC 7230 §6.6) asks a server that closes after an answer to keep
// reading until the client closes too. A Listener's connections do that: once the server has
// shut its side for writing (net/http does so before every close that follows an answer), the
// close reads and discards what the client still sends, bounded in time and bytes, so the
// client finishes writing, reads the answer and hangs up.
package linger

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Config.
const (
	// DefaultTime is the longest a closing connection keeps reading.
	DefaultTime = 10 * time.Second
	// DefaultIdle ends the reading once the client has sent nothing for this long.
	DefaultIdle = 2 * time.Second
	// DefaultBytes is the most a closing connection reads and discards.
	DefaultBytes = 64 << 20
)

// Config bounds the reading after the answer. Zero fields take the defaults.
type Config struct {
	Time  time.Duration
	Idle  time.Duration
	Bytes int64
}

// Listener is a TCP listener whose connections linger on close (see the package comment).
type Listener struct {
	*net.TCPListener
	cfg  Config
	done chan struct{} // closed with the listener: a shutdown does not wait for lingering
	once sync.Once
}

// Listen wraps a TCP listener. Other listeners are returned as they are.
func Listen(ln net.Listener, cfg Config) net.Listener {
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return ln
	}
	if cfg.Time <= 0 {
		cfg.Time = DefaultTime
	}
	if cfg.Idle <= 0 {
		cfg.Idle = DefaultIdle
	}
	if cfg.Bytes <= 0 {
		cfg.Bytes = DefaultBytes
	}
	return &Listener{TCPListener: tl, cfg: cfg, done: make(chan struct{})}
}

// Accept returns the next connection, which lingers on close.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.AcceptTCP()
	if err != nil {
		return nil, err
	}
	return &conn{TCPConn: c, l: l}, nil
}

// Close stops accepting; connections lingering now, or later, stop reading at once, so a
// shutdown is not held up by them.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.TCPListener.Close()
}

// conn embeds the *net.TCPConn so net/http still finds its ReadFrom (sendfile) and
// CloseWrite.
type conn struct {
	*net.TCPConn
	l          *Listener
	halfClosed atomic.Bool
	closing    atomic.Bool
}

// CloseWrite shuts the server's side: its answer is complete, and the close that follows
// lingers.
func (c *conn) CloseWrite() error {
	c.halfClosed.Store(true)
	return c.TCPConn.CloseWrite()
}

// Close reads what the client still sends, when the server has answered and shut its side,
// then closes. A second Close (the server's forced Close during a linger) closes at once and
// so ends the linger.
func (c *conn) Close() error {
	if c.halfClosed.Load() && c.closing.CompareAndSwap(false, true) {
		c.drain()
	}
	return c.TCPConn.Close()
}

// drain reads and discards until the client closes (EOF), sends nothing for Idle, Time or
// Bytes run out, or the listener closes. Reads wait at most a second, so a closed listener
// is noticed.
func (c *conn) drain() {
	cfg := c.l.cfg
	end := time.Now().Add(cfg.Time)
	heard := time.Now()
	buf := make([]byte, 32<<10)
	for left := cfg.Bytes; left > 0; {
		select {
		case <-c.l.done:
			return
		default:
		}
		now := time.Now()
		quiet := heard.Add(cfg.Idle)
		if !now.Before(end) || !now.Before(quiet) {
			return
		}
		deadline := now.Add(time.Second)
		for _, t := range []time.Time{end, quiet} {
			if t.Before(deadline) {
				deadline = t
			}
		}
		if err := c.SetReadDeadline(deadline); err != nil {
			return
		}
		n, err := c.TCPConn.Read(buf[:min(int64(len(buf)), left)])
		if n > 0 {
			left -= int64(n)
			heard = time.Now()
		}
		if ne := net.Error(nil); err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
			return // EOF: the client read the answer and hung up; or the connection is gone
		}
	}
}
