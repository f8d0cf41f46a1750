package httpapi

import (
	"context"
	"net/http"
	"time"
)

// healthz answers 200 while the process runs.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 when every dependency answers, 503 otherwise, naming the failing ones.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	checks := map[string]string{}
	status := http.StatusOK
	if s.Ready != nil {
		for name, err := range s.Ready(ctx) {
			checks[name] = "ok"
			if err != nil {
				checks[name] = "unavailable"
				status = http.StatusServiceUnavailable
				s.Logger.Warn("readiness check failed", "dependency", name, "err", err)
			}
		}
	}
	body := map[string]any{"status": "ready", "checks": checks}
	if status != http.StatusOK {
		body["status"] = "not ready"
	}
	writeJSON(w, status, body)
}
