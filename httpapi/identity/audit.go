package identity

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/store/audit"
)

// This file writes the audit trail's rows that are not written with a change itself: the
// sign-ins and sign-outs, and (for httpapi) the answers of audited routes. Each row also goes
// to the log when auth.audit.log is set.

// ClientAddr is where a request comes from: the connection's peer, or, when the peer is one
// of the trusted proxies (auth.trusted_header.proxies), the client they name
// (auth.Gateway.ClientAddr). The audit trail and every throttle use it.
func (s *Service) ClientAddr(r *http.Request) string { return s.cfg.Gateway.ClientAddr(r) }

// OutcomeOf classifies an answer's status.
func OutcomeOf(status int) string {
	switch {
	case status < 400:
		return audit.Success
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return audit.Denied
	case status < 500:
		return audit.Refused
	default:
		return audit.Error
	}
}

// AuditSignIn records a sign-in or a failed one.
func (s *Service) AuditSignIn(r *http.Request, user, via, outcome string, status int, detail string) {
	s.Record(r.Context(), audit.Event{Actor: user, Via: via, Action: "auth.sign_in", Outcome: outcome, Status: status, Detail: detail,
		ClientAddr: s.ClientAddr(r), RequestID: problem.RequestID(r.Context())})
}

// Record writes an audit row on its own (and to the log). A row that cannot be written is
// logged as lost, with everything it held: the log is the trail's fallback.
func (s *Service) Record(ctx context.Context, e audit.Event) {
	s.LogAudit(ctx, e, 1)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	if err := s.cfg.Store.RecordAudit(ctx, e); err != nil {
		s.cfg.Logger.LogAttrs(ctx, slog.LevelError, "audit row not recorded", slog.String("action", e.Action), slog.String("actor", e.Actor),
			slog.String("target", e.Target), slog.String("outcome", e.Outcome), slog.String("request_id", e.RequestID), slog.Any("err", err))
	}
}

// LogAudit writes an audit row to the log (when auth.audit.log is set) and nowhere else:
// for rows the store wrote with the change itself (rows of them).
func (s *Service) LogAudit(ctx context.Context, e audit.Event, rows int64) {
	if !s.cfg.AuditLog {
		return
	}
	attrs := []slog.Attr{slog.String("actor", e.Actor), slog.String("via", e.Via), slog.String("action", e.Action),
		slog.String("target", e.Target), slog.String("outcome", e.Outcome), slog.String("client", e.ClientAddr),
		slog.String("request_id", e.RequestID)}
	if e.Status != 0 {
		attrs = append(attrs, slog.Int("status", e.Status))
	}
	if e.Detail != "" {
		attrs = append(attrs, slog.String("detail", e.Detail))
	}
	if rows > 1 {
		attrs = append(attrs, slog.Int64("rows", rows))
	}
	s.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "audit", attrs...)
}
