package request

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/internal/config"
)

// BodyLimits bound how slowly a client may send a request body. The server has no overall
// read timeout (an upload of 100 MB on a slow link takes long), so without these one
// client trickling a byte a second could hold a connection, a goroutine and a temp file
// forever.
type BodyLimits struct {
	// IdleTimeout ends a request whose body sends nothing for this long (408).
	// Default 30s.
	IdleTimeout time.Duration
	// MinRate is the slowest average a body may arrive at, in bytes per second, judged over
	// each RateWindow (408 when slower). Default 16 KiB/s: a 100 MB upload may take up to
	// about 1 h 45 min; a 1 MB one half a minute.
	MinRate int64
	// RateWindow is the span MinRate is judged over. Default 10s.
	RateWindow time.Duration
}

// WithDefaults fills what l leaves at zero from the configuration's defaults, their one home.
func (l BodyLimits) WithDefaults() BodyLimits {
	d := config.Default().HTTP
	l.IdleTimeout = cmp.Or(max(l.IdleTimeout, 0), d.BodyIdleTimeout)
	l.MinRate = cmp.Or(max(l.MinRate, 0), d.BodyMinRate)
	l.RateWindow = cmp.Or(max(l.RateWindow, 0), d.BodyRateWindow)
	return l
}

// SlowBodyError ends reading a body that arrives too slowly.
type SlowBodyError struct {
	// Idle: nothing arrived for the idle timeout; otherwise the rate was below the minimum.
	Idle   bool
	limits BodyLimits
}

func (e *SlowBodyError) Error() string {
	if e.Idle {
		return fmt.Sprintf("the request body sent nothing for %s", e.limits.IdleTimeout)
	}
	return fmt.Sprintf("the request body arrived slower than %d KiB/s", e.limits.MinRate>>10)
}

// GuardedBody enforces BodyLimits on a request body. Before each read it sets the
// connection's read deadline to now + IdleTimeout; after each read it checks the rate of
// the current window. At the end of the body it clears the deadline, so the server's
// background read (which cancels the request context on a timeout) is not cut off while
// the handler works on.
type GuardedBody struct {
	body        io.ReadCloser
	ctl         *http.ResponseController
	limits      BodyLimits
	windowStart time.Time
	windowBytes int64
	err         error
}

func (b *GuardedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	now := time.Now()
	if b.windowStart.IsZero() {
		b.windowStart = now
	}
	b.ctl.SetReadDeadline(now.Add(b.limits.IdleTimeout)) //nolint:errcheck // unsupported in tests with recorders: the rate check still holds
	n, err := b.body.Read(p)
	b.windowBytes += int64(n)
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			err = &SlowBodyError{Idle: true, limits: b.limits}
		} else {
			b.ctl.SetReadDeadline(time.Time{}) //nolint:errcheck
		}
		b.err = err
		return n, err
	}
	if elapsed := time.Since(b.windowStart); elapsed >= b.limits.RateWindow {
		if float64(b.windowBytes) < float64(b.limits.MinRate)*elapsed.Seconds() {
			// Leave a deadline in the past: the server gives up on the rest of the body at
			// once instead of draining it.
			b.ctl.SetReadDeadline(time.Now()) //nolint:errcheck
			b.err = &SlowBodyError{limits: b.limits}
			return n, b.err
		}
		b.windowStart, b.windowBytes = time.Now(), 0
	}
	return n, nil
}

func (b *GuardedBody) Close() error { return b.body.Close() }

// Done reports whether the body was read to its end.
func (b *GuardedBody) Done() bool { return errors.Is(b.err, io.EOF) }

// Finish runs when the handler has returned: whatever the server still reads of a body
// left unread is bounded by the idle timeout too.
func (b *GuardedBody) Finish() {
	if b.err == nil {
		b.ctl.SetReadDeadline(time.Now().Add(b.limits.IdleTimeout)) //nolint:errcheck
	}
}

// GuardBody puts BodyLimits on r's body, if it has one; call finish on the result (when
// not nil) after the handler.
func GuardBody(w http.ResponseWriter, r *http.Request, limits BodyLimits) *GuardedBody {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	g := &GuardedBody{body: r.Body, ctl: http.NewResponseController(w), limits: limits}
	r.Body = g
	return g
}

// ReadError turns a failure reading a request body into a problem.
func ReadError(err error) error {
	var slow *SlowBodyError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &slow):
		return slow.Problem()
	case errors.As(err, &mbe):
		return problem.New(http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the request body is larger than %d bytes", mbe.Limit))
	default:
		return problem.BadRequest("invalid_body", "the request body could not be read")
	}
}

// Problem is the answer to a body that arrived too slowly.
func (e *SlowBodyError) Problem() *problem.Problem {
	return problem.New(http.StatusRequestTimeout, "body_too_slow", e.Error()+"; send it again on a faster connection")
}
