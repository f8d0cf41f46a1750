package testenv

import (
	"io"
	"net/http"
	"testing"
)

// NoRedirects is a client that hands a redirect back instead of following it, so a test sees
// the answer itself (its status and Location).
func NoRedirects() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Send sends req with client and returns the answer with its body read whole; t fails when the
// request cannot be sent.
func Send(t testing.TB, client *http.Client, req *http.Request) (*http.Response, string) {
	t.Helper()
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}
