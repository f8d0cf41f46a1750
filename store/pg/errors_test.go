package pg

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// An outage and a statement that ran out of time are told apart by the error's type, never
// by its text: the API answers each as what it is, and only an outage feeds the outage
// tracker (which mutes the request's log line).
func TestOutagesAndTimeoutsAreToldApartByType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                 string
		err                  error
		unavailable, timeout bool
	}{
		{"connection exception", &pgconn.PgError{Code: "08006"}, true, false},
		{"server shutting down", fmt.Errorf("claim: %w", &pgconn.PgError{Code: "57P01"}), true, false},
		{"closed connection", fmt.Errorf("query: %w", pgconn.ErrConnClosed), true, false},
		{"query deadline", fmt.Errorf("list: %w", context.DeadlineExceeded), false, true},
		{"statement timeout", &pgconn.PgError{Code: "57014"}, false, true},
		{"lock timeout", &pgconn.PgError{Code: "55P03"}, false, true},
		{"message that only reads like an outage", errors.New("customer name: conn closed"), false, false},
		{"a failed statement", &pgconn.PgError{Code: "23505"}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := IsUnavailable(tt.err); got != tt.unavailable {
				t.Errorf("IsUnavailable = %v, want %v", got, tt.unavailable)
			}
			if got := IsTimeout(tt.err); got != tt.timeout {
				t.Errorf("IsTimeout = %v, want %v", got, tt.timeout)
			}
		})
	}
}
