package httpapi

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/httpapi/request"
)

// slowClient sends a request over a raw connection: the head at once, then the body a few
// bytes at a time every interval (never, when interval is 0), and returns the answer.
type slowClient struct {
	conn net.Conn
	done chan struct{}
	resp chan *http.Response
	errs chan error
}

func startSlow(t *testing.T, srv *httptest.Server, method, path, token, contentType string, declared int, first string, chunk string, every time.Duration) *slowClient {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	c := &slowClient{conn: conn, done: make(chan struct{}), resp: make(chan *http.Response, 1), errs: make(chan error, 1)}
	t.Cleanup(func() { close(c.done); conn.Close() })
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s",
		method, path, token, contentType, declared, first)
	if every > 0 {
		go func() {
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				select {
				case <-c.done:
					return
				case <-tick.C:
					if _, err := io.WriteString(conn, chunk); err != nil {
						return
					}
				}
			}
		}()
	}
	go func() {
		conn.SetReadDeadline(time.Now().Add(30 * time.Second)) //nolint:errcheck
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			c.errs <- err
			return
		}
		res.Body.Close()
		c.resp <- res
	}()
	return c
}

// answer waits for the server's answer.
func (c *slowClient) answer(t *testing.T, within time.Duration) *http.Response {
	t.Helper()
	select {
	case res := <-c.resp:
		return res
	case err := <-c.errs:
		t.Fatalf("no answer: %v", err)
	case <-time.After(within):
		t.Fatalf("no answer within %s: the server still holds the request", within)
	}
	return nil
}

// pending reports whether the server has not answered yet.
func (c *slowClient) pending() bool {
	select {
	case res := <-c.resp:
		c.resp <- res
		return false
	case err := <-c.errs:
		c.errs <- err
		return false
	default:
		return true
	}
}

const multipartHead = "--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"c.csv\"\r\nContent-Type: text/csv\r\n\r\ncode,name,phone\r\n"

func TestSlowUploadsAreCutOff(t *testing.T) {
	t.Parallel()
	e := newAPI(t, func(d *Deps) {
		d.Body = request.BodyLimits{IdleTimeout: 700 * time.Millisecond, MinRate: 1024, RateWindow: 500 * time.Millisecond}
	})
	srv := httptest.NewServer(e.handler)
	t.Cleanup(srv.Close)

	t.Run("a byte at a time", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		c := startSlow(t, srv, "POST", "/api/v1/imports", aliceToken, "multipart/form-data; boundary=B", 1<<20, multipartHead, "C", 100*time.Millisecond)
		res := c.answer(t, 10*time.Second)
		if res.StatusCode != http.StatusRequestTimeout || !res.Close {
			t.Fatalf("trickled upload: %d %v", res.StatusCode, res.Header)
		}
		t.Logf("cut off after %s", time.Since(start).Round(time.Millisecond))
	})
	t.Run("silent after the head", func(t *testing.T) {
		t.Parallel()
		c := startSlow(t, srv, "POST", "/api/v1/imports", aliceToken, "multipart/form-data; boundary=B", 1<<20, multipartHead, "", 0)
		if res := c.answer(t, 10*time.Second); res.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("silent upload: %d", res.StatusCode)
		}
	})
	t.Run("a slow JSON body", func(t *testing.T) {
		t.Parallel()
		c := startSlow(t, srv, "POST", "/api/v1/exports", bobToken, "application/json", 4000, `{"type":"customers","filter":{"city":"`, "a", 100*time.Millisecond)
		if res := c.answer(t, 10*time.Second); res.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("trickled JSON: %d", res.StatusCode)
		}
	})
	t.Run("an unauthenticated slow body is not drained", func(t *testing.T) {
		t.Parallel()
		c := startSlow(t, srv, "POST", "/api/v1/imports", "wrong-token", "multipart/form-data; boundary=B", 100_000, "x", "x", time.Second)
		res := c.answer(t, 5*time.Second)
		if res.StatusCode != http.StatusUnauthorized || !res.Close {
			t.Fatalf("unauthenticated: %d %v", res.StatusCode, res.Header)
		}
	})
}

func TestUploadsPerUserAreCapped(t *testing.T) {
	t.Parallel()
	e := newAPI(t, func(d *Deps) {
		d.Import.MaxConcurrentUploads = 2
		d.Body = request.BodyLimits{IdleTimeout: 2 * time.Second, MinRate: 1, RateWindow: time.Minute}
	})
	srv := httptest.NewServer(e.handler)
	t.Cleanup(srv.Close)
	// Two uploads that hold their slot: the head, then nothing for a while.
	held := []*slowClient{
		startSlow(t, srv, "POST", "/api/v1/imports", aliceToken, "multipart/form-data; boundary=B", 1<<20, multipartHead, "", 0),
		startSlow(t, srv, "POST", "/api/v1/imports", aliceToken, "multipart/form-data; boundary=B", 1<<20, multipartHead, "", 0),
	}
	time.Sleep(300 * time.Millisecond) // both reach the handler
	upload := func(token string) *http.Response {
		body, ct := multipartBody(t, "c.csv", []byte("code,name,phone\nC1,A,13800000001\n"+token), nil)
		req, _ := http.NewRequest("POST", srv.URL+"/api/v1/imports", body)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", ct)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	res := upload(aliceToken)
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
		t.Fatalf("a third upload of alice: %d %v", res.StatusCode, res.Header)
	}
	if res := upload(bobToken); res.StatusCode != http.StatusAccepted {
		t.Fatalf("bob's upload while alice is at her cap: %d", res.StatusCode)
	}
	for _, c := range held {
		if !c.pending() {
			t.Fatal("a held upload was answered early")
		}
	}
	// Once the held uploads are cut off, their slots are free again.
	for _, c := range held {
		if res := c.answer(t, 10*time.Second); res.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("held upload: %d", res.StatusCode)
		}
	}
	if res := upload(aliceToken); res.StatusCode != http.StatusAccepted {
		t.Fatalf("alice after her uploads ended: %d", res.StatusCode)
	}
}
