package main

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A request whose head is larger than http.max_header_bytes is answered 431 on every address
// the process serves (the API with the page and the console, and the metrics address), even by
// a client that writes all of its 2.8 MB head before it reads, at the pace of a real network;
// the server serves the next request as usual.
func TestOversizedHeadersAnswer431OnEveryAddress(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	p := e.start("all")
	for name, base := range map[string]string{"api": p.base, "metrics": p.metricsBase(t)} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			addr := strings.TrimPrefix(base, "http://")
			for _, path := range []string{"/healthz", "/api/v1/tasks", "/monitor/"} {
				if name == "metrics" && path != "/healthz" {
					continue
				}
				status, err := sendOversizedHead(addr, path, 2_800_000)
				if err != nil || status != http.StatusRequestHeaderFieldsTooLarge {
					t.Fatalf("GET %s with a 2.8 MB header: status %d, %v; want 431", path, status, err)
				}
			}
			res, err := http.Get(base + "/healthz")
			if err != nil {
				t.Fatalf("a normal request afterwards: %v", err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("a normal request afterwards: %d", res.StatusCode)
			}
		})
	}
}

// sendOversizedHead writes a GET whose head is about size bytes over its own TCP connection,
// in 32 KiB pieces a few milliseconds apart (the server has read its limit and answered long
// before the client is done), and only then reads the answer.
func sendOversizedHead(addr, path string, size int) (int, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	req := []byte("GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer " + aliceToken +
		"\r\nX-Oversized: " + strings.Repeat("x", size) + "\r\n\r\n")
	for len(req) > 0 {
		n := min(len(req), 32<<10)
		if _, err := c.Write(req[:n]); err != nil {
			return 0, err
		}
		req = req[n:]
		time.Sleep(15 * time.Millisecond)
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Second)) //nolint:errcheck
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	res.Body.Close()
	return res.StatusCode, nil
}
