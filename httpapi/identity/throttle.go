package identity

import (
	"fmt"
	"net/http"

	"github.com/taskcenter/taskcenter/httpapi/problem"
)

// This file throttles bearer guessing on the API. A bearer credential is checked first, so a
// valid one always passes whatever its address sent before. A refused one (401) counts
// against the client address (ClientAddr: through the trusted proxies) and against the
// credential (session.Throttle keeps a keyed hash of it, never the secret); once either has
// used up auth.throttle.failures within auth.throttle.window, further refused ones answer
// 429 too_many_failures with Retry-After, and are not counted. The throttle's counts live in
// Redis, so every replica sees the same.

const bearerFailPrefix = "taskcenter:api:bearer_failures:"

// refuseBearer answers a refused bearer credential: refusal (a 401), counted, or 429
// too_many_failures when the client address or the credential has used up its failures.
// When Redis cannot tell, the refusal stands as it is.
func (s *Service) refuseBearer(r *http.Request, credential string, refusal *problem.Problem) error {
	if s.throttle == nil {
		return refusal
	}
	addr := s.ClientAddr(r)
	secs, err := s.throttle.Blocked(r.Context(), addr, credential)
	if err != nil {
		s.cfg.Logger.Warn("bearer throttle unavailable", "err", err)
		return refusal
	}
	if secs > 0 {
		return problem.New(http.StatusTooManyRequests, "too_many_failures", fmt.Sprintf(
			"too many refused credentials from your address or with this credential; send a valid token, or try again in %d s", secs)).WithRetryAfter(secs)
	}
	if err := s.throttle.Failed(r.Context(), addr, credential); err != nil {
		s.cfg.Logger.Warn("bearer throttle unavailable", "err", err)
	}
	return refusal
}
