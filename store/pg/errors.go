package pg

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// IsUnavailable reports whether err means Postgres could not be reached or is restarting,
// as opposed to a query that failed on its own, or ran out of time (IsTimeout): the API
// answers 503 for these. It reads error types, never message text.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "08") || // connection exception
			pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03" || // shutdown, crash, cannot connect now
			pgErr.Code == "53300" // too many connections
	}
	if IsTimeout(err) {
		return false
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connErr) || errors.As(err, &netErr) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// IsTimeout reports whether err is a statement that ran out of time: its context's deadline,
// a statement or lock timeout on the server. The database answers; it is busy (or a row is
// held), not gone.
func IsTimeout(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "57014" || pgErr.Code == "55P03" // query_canceled (statement_timeout), lock_not_available
	}
	return errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err)
}

// IsNoRows reports whether err is a statement that found no row.
func IsNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }
