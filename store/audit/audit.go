// Package audit is the audit trail: who did what to which object, when, from where, through
// which request, and how it ended (the audit_events table).
//
// A change that commits records its row in the same statement as the change: package store's
// task transitions (submit, cancel, retry) and store/tokens' creating and revoking add an
// INSERT INTO audit_events to their CTE, with Params, when the request's context carries an
// *Origin (NewContext), and count it with Written. Every other row — a refusal, a download, a
// change made by a statement that does not write its own — is written on its own with
// RecordAudit. Package store embeds *Trail in its Store, so callers write st.RecordAudit(...).
package audit

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/store/pg"
)

// Trail writes and reads the audit trail.
type Trail struct{ db *bun.DB }

// New returns the audit trail over db.
func New(db *bun.DB) *Trail { return &Trail{db: db} }

// Event is one row of the audit trail.
type Event struct {
	bun.BaseModel `bun:"table:audit_events"`

	ID     int64     `bun:"id,pk,autoincrement"`
	At     time.Time `bun:"at"`
	Actor  string    `bun:"actor"`
	Via    string    `bun:"via"`
	Action string    `bun:"action"`
	Target string    `bun:"target"`
	// Outcome is Success, Denied, Refused or Error.
	Outcome string `bun:"outcome"`
	// Status is the HTTP status answered; 0 for a row written with the change itself.
	Status     int    `bun:"status"`
	Detail     string `bun:"detail"`
	ClientAddr string `bun:"client_addr"`
	RequestID  string `bun:"request_id"`
}

const columns = `id, at, actor, via, action, target, outcome, status, detail, client_addr, request_id`

// Audit outcomes.
const (
	Success = "success" // the action was carried out
	Denied  = "denied"  // no valid credential, or a missing scope or role (401, 403)
	Refused = "refused" // the request was refused as it stood (another 4xx)
	Error   = "error"   // the server failed (5xx)
)

// Audit actions the store records itself, in the statement of the change.
const (
	ActionTaskSubmit  = "task.submit"
	ActionTaskCancel  = "task.cancel"
	ActionTaskRetry   = "task.retry"
	ActionTokenCreate = "token.create"
	ActionTokenRevoke = "token.revoke"
)

// Origin is who is behind the changes made with a context, and from where: the API puts one
// in each request's context (NewContext), the console in each action's. The store's
// transitions then write their audit row in the same statement as the change, and count it,
// so the caller knows not to write another.
type Origin struct {
	Actor      string
	Via        string
	ClientAddr string
	RequestID  string

	recorded atomic.Int64
}

type originKey struct{}

// NewContext returns ctx carrying a.
func NewContext(ctx context.Context, a *Origin) context.Context {
	return context.WithValue(ctx, originKey{}, a)
}

// FromContext returns the origin ctx carries, or nil.
func FromContext(ctx context.Context) *Origin {
	a, _ := ctx.Value(originKey{}).(*Origin)
	return a
}

// Recorded is how many audit rows the store wrote with changes made under a.
func (a *Origin) Recorded() int64 {
	if a == nil {
		return 0
	}
	return a.recorded.Load()
}

// Add counts n audit rows a committed statement wrote under a.
func (a *Origin) Add(n int) {
	if a != nil && n > 0 {
		a.recorded.Add(int64(n))
	}
}

// Params are the bound values of the audit CTE a statement adds: actor, via, client address,
// request id. An empty actor (no origin in ctx) writes no row.
func Params(ctx context.Context) []any {
	if a := FromContext(ctx); a != nil && a.Actor != "" {
		return []any{a.Actor, a.Via, a.ClientAddr, a.RequestID}
	}
	return []any{"", "", "", ""}
}

// Written counts n audit rows a committed statement wrote under ctx's origin.
func Written(ctx context.Context, n int) {
	if a := FromContext(ctx); a != nil && a.Actor != "" {
		a.Add(n)
	}
}

// RecordAudit writes one audit row on its own (a refusal, a download, a sign-in, a change
// whose statement lives elsewhere).
func (s *Trail) RecordAudit(ctx context.Context, e Event) error {
	_, err := pg.Exec(ctx, s.db.DB, `INSERT INTO audit_events (actor, via, action, target, outcome, status, detail, client_addr, request_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		e.Actor, e.Via, e.Action, e.Target, e.Outcome, e.Status, e.Detail, e.ClientAddr, e.RequestID)
	if err != nil {
		return fmt.Errorf("record audit %s: %w", e.Action, err)
	}
	return nil
}

// Filter narrows the audit listing.
type Filter struct {
	Actor   string
	Action  string // an action, or a prefix ending in "." (task.)
	Target  string
	Outcome string
	From    *time.Time
	To      *time.Time
	// Before continues a listing: rows with a smaller id.
	Before int64
	Limit  int
}

// ListAudit returns audit rows newest first, and the cursor of the next page (0: none).
func (s *Trail) ListAudit(ctx context.Context, f Filter) ([]Event, int64, error) {
	limit := f.Limit
	if limit <= 0 || limit > 500 {
		limit = 50
	}
	var c pg.Conditions
	if f.Actor != "" {
		c.And("actor = " + c.Arg(f.Actor))
	}
	if prefix, ok := strings.CutSuffix(f.Action, "."); ok {
		c.And("starts_with(action, " + c.Arg(prefix+".") + ")")
	} else if f.Action != "" {
		c.And("action = " + c.Arg(f.Action))
	}
	if f.Target != "" {
		c.And("target = " + c.Arg(f.Target))
	}
	if f.Outcome != "" {
		c.And("outcome = " + c.Arg(f.Outcome))
	}
	if f.From != nil {
		c.And("at >= " + c.Arg(*f.From))
	}
	if f.To != nil {
		c.And("at < " + c.Arg(*f.To))
	}
	if f.Before > 0 {
		c.And("id < " + c.Arg(f.Before))
	}
	var out []Event
	err := pg.All(ctx, s.db, s.db.DB, &out, `SELECT `+columns+` FROM audit_events`+c.Where()+
		` ORDER BY id DESC LIMIT `+c.Arg(limit+1), c.Args...)
	if err != nil {
		return nil, 0, fmt.Errorf("list audit: %w", err)
	}
	var next int64
	if len(out) > limit {
		out = out[:limit]
		next = out[limit-1].ID
	}
	return out, next, nil
}

// LastAudit returns the newest successful audit row of action on target, or nil.
func (s *Trail) LastAudit(ctx context.Context, target, action string) (*Event, error) {
	var out []Event
	err := pg.All(ctx, s.db, s.db.DB, &out, `SELECT `+columns+` FROM audit_events
		WHERE target = $1 AND action = $2 AND outcome = 'success' ORDER BY id DESC LIMIT 1`, target, action)
	if err != nil {
		return nil, fmt.Errorf("last %s of %s: %w", action, target, err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return &out[0], nil
}

// PruneAudit deletes audit rows older than age, at most limit of them, and returns how many.
func (s *Trail) PruneAudit(ctx context.Context, age time.Duration, limit int) (int, error) {
	return pg.Prune(ctx, s.db.DB, "audit", `DELETE FROM audit_events WHERE id IN (
		SELECT id FROM audit_events WHERE at < now() - make_interval(secs => $1) ORDER BY at LIMIT $2)`, age, limit)
}
