package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// With metrics.token set, the API address serves /metrics to that token only.
func TestMetricsOnTheAPIAddressNeedTheToken(t *testing.T) {
	t.Parallel()
	h := bearerOnly("metrics-token-0123456789", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("taskcenter_tasks_waiting 0\n")) //nolint:errcheck
	}))
	for auth, want := range map[string]int{"": 401, "Bearer wrong-token-0123456789": 401, "Bearer metrics-token-0123456789": 200,
		"metrics-token-0123456789": 401} {
		req := httptest.NewRequest("GET", "/metrics", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("Authorization %q: %d, want %d", auth, rec.Code, want)
		}
	}
}
