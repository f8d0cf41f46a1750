package linger

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serve runs an HTTP server on a lingering listener until the test ends.
func serve(t *testing.T, cfg Config) (addr string, ln net.Listener) {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln = Listen(raw, cfg)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }), //nolint:errcheck
		ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }() //nolint:errcheck // ends with the test
	t.Cleanup(func() { srv.Close(); <-done })        //nolint:errcheck
	return raw.Addr().String(), ln
}

// sendPaced writes a request whose head is header bytes long, in 32 KiB pieces a few
// milliseconds apart, as a client on a real network would: it is still writing well after
// the server has read its limit and answered.
func sendPaced(c net.Conn, header int) error {
	req := []byte("GET / HTTP/1.1\r\nHost: taskcenter\r\nX-Big: " + strings.Repeat("a", header) + "\r\n\r\n")
	for len(req) > 0 {
		n := min(len(req), 32<<10)
		if _, err := c.Write(req[:n]); err != nil {
			return err
		}
		req = req[n:]
		time.Sleep(15 * time.Millisecond)
	}
	return nil
}

// A client that writes a 2.8 MB request head and only then reads gets the 431, not a reset:
// the connection reads on until the client has finished and hung up.
func TestAnOversizedHeadIsAnsweredNotReset(t *testing.T) {
	t.Parallel()
	addr, _ := serve(t, Config{})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := sendPaced(c, 2_800_000); err != nil {
		t.Fatalf("the client could not finish writing its request: %v", err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second)) //nolint:errcheck
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("status %d, want 431", res.StatusCode)
	}
	// The server is fine: the next client is served.
	res2, err := http.Get("http://" + addr + "/")
	if err != nil || res2.StatusCode != http.StatusOK {
		t.Fatalf("a normal request afterwards: %v %v", res2, err)
	}
	res2.Body.Close()
}

// A client that never stops sending cannot hold the connection: it is closed once the
// linger's time runs out.
func TestLingeringIsBounded(t *testing.T) {
	t.Parallel()
	addr, _ := serve(t, Config{Time: 1500 * time.Millisecond, Idle: time.Second})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	c.Write([]byte("GET / HTTP/1.1\r\nHost: taskcenter\r\nX-Big: ")) //nolint:errcheck
	chunk := []byte(strings.Repeat("a", 32<<10))
	for time.Since(start) < 30*time.Second {
		if _, err := c.Write(chunk); err != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// 1 MB of head, the server's half-second wait, then at most the linger's 1.5 s.
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the connection was held for %s", took)
	}
}

// A client that goes quiet after its oversized head is let go after Idle, and closing the
// listener (a shutdown) ends a linger at once.
func TestQuietClientsAndShutdownEndTheLinger(t *testing.T) {
	t.Parallel()
	addr, ln := serve(t, Config{Time: time.Minute, Idle: time.Minute})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Half the head more than the limit, then silence: the server answers and lingers.
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: taskcenter\r\nX-Big: " + strings.Repeat("a", 1<<20+(64<<10)))); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second)) //nolint:errcheck
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("answer: %v %v", res, err)
	}
	start := time.Now()
	ln.Close()
	if _, err := io.Copy(io.Discard, br); err != nil && !errors.Is(err, net.ErrClosed) && !isReset(err) {
		t.Fatalf("reading to the end: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the lingering connection outlived its listener by %s", took)
	}
}

func isReset(err error) bool { return strings.Contains(err.Error(), "reset") }
