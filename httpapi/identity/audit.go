package identity

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/httpapi/request"
	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/internal/textcheck"
	"github.com/taskcenter/taskcenter/store/audit"
)

// This file writes the audit trail's rows that are not written with a change itself: the
// sign-ins and sign-outs, and (for httpapi) the answers of audited routes and the refusals of
// every route. A refusal of nobody — no credential, a refused one, a throttled attempt — is
// counted (Count): one row per client address, minute and kind, so a flood of junk is a row
// a minute; a refusal of somebody (a missing scope, a cross-site change) has a row of its
// own. Each row also goes to the log when auth.audit.log is set (a counted row once per
// write, with the attempts it added). Admins read the trail at GET /api/v1/audit (ListAudit).

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

// AuditSignIn records a sign-in or a failed one: a refusal of nobody (401, 403) is counted
// as auth.sign_in, a throttled one (429, denied) as auth.throttled.
func (s *Service) AuditSignIn(r *http.Request, user, via, outcome string, status int, detail string) {
	e := audit.Event{Actor: user, Via: via, Action: audit.ActionSignIn, Outcome: outcome, Status: status, Detail: detail,
		ClientAddr: s.ClientAddr(r), RequestID: problem.RequestID(r.Context())}
	if status == http.StatusTooManyRequests {
		e.Action, e.Outcome = audit.ActionThrottled, audit.Denied
	}
	if user == "" && e.Outcome == audit.Denied {
		s.Count(r.Context(), e)
		return
	}
	s.Record(r.Context(), e)
}

// CountRefusal records an API request refused before anybody was identified, counted by
// client address, minute and kind: auth.no_credential (nothing, or nothing the server
// knows, presented), auth.bad_credential (a refused bearer credential, via "bearer", or a
// session cookie that names no live session, via "session"), auth.throttled (429, via
// "bearer"). The detail is the route and the problem of the minute's first attempt.
func (s *Service) CountRefusal(r *http.Request, route string, pr *problem.Problem) {
	e := audit.Event{Action: audit.ActionNoCredential, Outcome: audit.Denied, Status: pr.Status, Detail: truncate(route+": "+pr.Code+": "+pr.Detail, 500),
		ClientAddr: s.ClientAddr(r), RequestID: problem.RequestID(r.Context())}
	_, err := r.Cookie(sessionCookie)
	switch hasCookie := err == nil; {
	case pr.Status == http.StatusTooManyRequests:
		e.Action, e.Via = audit.ActionThrottled, "bearer"
	case r.Header.Get("Authorization") != "":
		e.Action, e.Via = audit.ActionBadCredential, "bearer"
	case hasCookie:
		e.Action, e.Via = audit.ActionBadCredential, "session"
	}
	s.Count(r.Context(), e)
}

// Count writes a counted audit row's attempt (audit.Trail.CountAudit) and logs what it wrote.
// Attempts that cannot be written are logged as lost.
func (s *Service) Count(ctx context.Context, e audit.Event) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), audit.WriteTimeout)
	defer cancel()
	n, err := s.cfg.Store.CountAudit(ctx, e)
	if n > 0 {
		e.Count = n
		s.LogAudit(ctx, e, 1)
	}
	if err != nil {
		s.cfg.Logger.LogAttrs(ctx, slog.LevelError, "audit row not recorded", slog.String("action", e.Action), slog.String("via", e.Via),
			slog.String("client", e.ClientAddr), slog.Int("status", e.Status), slog.String("request_id", e.RequestID), slog.Any("err", err))
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// Record writes an audit row on its own (and to the log). A row that cannot be written is
// logged as lost, with everything it held: the log is the trail's fallback.
func (s *Service) Record(ctx context.Context, e audit.Event) {
	s.LogAudit(ctx, e, 1)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), audit.WriteTimeout)
	defer cancel()
	if err := s.cfg.Store.RecordAudit(ctx, e); err != nil {
		s.cfg.Logger.LogAttrs(ctx, slog.LevelError, "audit row not recorded", slog.String("action", e.Action), slog.String("actor", e.Actor),
			slog.String("target", e.Target), slog.String("outcome", e.Outcome), slog.String("request_id", e.RequestID), slog.Any("err", err))
	}
}

// LogAudit writes an audit row to the log (when auth.audit.log is set) and nowhere else:
// for rows the store wrote with the change itself (rows of them), and for the attempts a
// counted row was given (e.Count of them).
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
	if e.Count > 1 {
		attrs = append(attrs, slog.Int64("count", e.Count))
	}
	s.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "audit", attrs...)
}

// AuditView is one row of the audit trail.
type AuditView struct {
	ID         int64     `json:"id"`
	At         time.Time `json:"at"`
	Actor      string    `json:"actor"`
	Via        string    `json:"via"`
	Action     string    `json:"action"`
	Target     string    `json:"target,omitempty"`
	Outcome    string    `json:"outcome"`
	Status     int       `json:"status,omitempty"`
	Detail     string    `json:"detail,omitempty"`
	ClientAddr string    `json:"client_addr"`
	RequestID  string    `json:"request_id,omitempty"`
	// Count is the attempts the row stands for: 1, or a counted refusal's (audit.Event.Count).
	Count int64 `json:"count"`
}

// ListAudit answers GET /api/v1/audit?actor=&action=&target=&outcome=&from=&to=&limit=&cursor=
// (admins): the trail, newest first.
func (s *Service) ListAudit(w http.ResponseWriter, r *http.Request, _ Principal) error {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return problem.BadRequest("invalid_query", "the query string is not valid URL encoding")
	}
	var errs []problem.FieldError
	f := audit.Filter{Actor: q.Get("actor"), Action: q.Get("action"), Target: q.Get("target"), Outcome: q.Get("outcome")}
	for name, v := range map[string]string{"actor": f.Actor, "action": f.Action, "target": f.Target, "outcome": f.Outcome} {
		if m, bad := textcheck.Problem(v, config.MaxOwner); bad { // the longest: an actor, an owner name
			errs = append(errs, problem.Field(name, m))
		}
	}
	if f.Outcome != "" && f.Outcome != audit.Success && f.Outcome != audit.Denied && f.Outcome != audit.Refused && f.Outcome != audit.Error {
		errs = append(errs, problem.Field("outcome", textcheck.OneOf(audit.Success, audit.Denied, audit.Refused, audit.Error)))
	}
	errs = append(errs, request.QueryTimes(q, map[string]**time.Time{"from": &f.From, "to": &f.To})...)
	errs = append(errs, request.QueryPage(q, &f.Limit, &f.Before)...)
	if len(errs) > 0 {
		return problem.Invalid("invalid_query", "the query has invalid parameters", errs...)
	}
	rows, next, err := s.cfg.Store.ListAudit(r.Context(), f)
	if err != nil {
		return err
	}
	out := struct {
		Items      []AuditView `json:"items"`
		NextCursor string      `json:"next_cursor,omitempty"`
	}{Items: make([]AuditView, len(rows))}
	for i, e := range rows {
		out.Items[i] = AuditView{ID: e.ID, At: e.At.UTC(), Actor: e.Actor, Via: e.Via, Action: e.Action, Target: e.Target, Outcome: e.Outcome,
			Status: e.Status, Detail: e.Detail, ClientAddr: e.ClientAddr, RequestID: e.RequestID, Count: e.Count}
	}
	if next > 0 {
		out.NextCursor = strconv.FormatInt(next, 10)
	}
	request.WriteJSON(w, http.StatusOK, out)
	return nil
}
