// Package audit is the audit trail: who did what to which object, when, from where, through
// which request, and how it ended (the audit_events table).
//
// A refusal nobody was identified for is counted instead (CountAudit): one row per client
// address, minute, via, action and status, whose Count grows with each attempt.
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
	"sync"
	"sync/atomic"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/store/pg"
)

// WriteTimeout bounds the write of one audit row, apart from the request it records: a row
// of the trail is worth a longer wait than a read, so a slow Postgres delays the answer
// rather than losing the row (one that still cannot be written is logged in full).
const WriteTimeout = 10 * time.Second

// Trail writes and reads the audit trail.
type Trail struct {
	db *bun.DB

	mu sync.Mutex
	// counting holds the counted rows being written by this process, by their key: the
	// attempts that arrived meanwhile, for the writer to add before it returns.
	counting map[countKey]*int64
}

// New returns the audit trail over db.
func New(db *bun.DB) *Trail { return &Trail{db: db, counting: map[countKey]*int64{}} }

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
	// Count is how many attempts the row stands for: 1, or for a counted refusal
	// (CountAudit) the attempts of its address, kind and minute. At is then the first's.
	Count int64 `bun:"count"`
}

const columns = `id, at, actor, via, action, target, outcome, status, detail, client_addr, request_id, count`

// Audit outcomes.
const (
	Success = "success" // the action was carried out
	Denied  = "denied"  // no valid credential, a missing scope or role, or a throttled credential (401, 403, 429)
	Refused = "refused" // the request was refused as it stood (another 4xx)
	Error   = "error"   // the server failed (5xx)
)

// Audit actions of sign-in and of refusals nobody was identified for.
const (
	ActionSignIn        = "auth.sign_in"        // a sign-in to the page or the console, or a refused one
	ActionSignOut       = "auth.sign_out"       // a sign-out of the page or the console
	ActionNoCredential  = "auth.no_credential"  // an API request with no credential (counted)
	ActionBadCredential = "auth.bad_credential" // an API request with a refused credential (counted)
	ActionThrottled     = "auth.throttled"      // a refused credential past the throttle's limit, anywhere (counted)
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

// countKey is what a counted row is counted under (with the minute, which the database
// gives).
type countKey struct {
	addr, via, action string
	status            int
}

// CountAudit counts one attempt of a refusal nobody was identified for (e's Actor and Target
// are not kept): one row per client address, minute by the database's clock, via, action and
// status, whose Count is the attempts; At, Detail and RequestID are the first attempt's. It
// returns how many attempts this call wrote, its own and those that arrived meanwhile: 0
// when another call of this process is writing the row's count, which then adds this
// attempt before it returns. So a flood keeps at most one statement per row in flight per
// process, instead of every request queueing on the row's lock with a connection held.
func (s *Trail) CountAudit(ctx context.Context, e Event) (int64, error) {
	k := countKey{addr: e.ClientAddr, via: e.Via, action: e.Action, status: e.Status}
	s.mu.Lock()
	if pending, busy := s.counting[k]; busy {
		*pending++
		s.mu.Unlock()
		return 0, nil
	}
	pending := new(int64)
	s.counting[k] = pending
	s.mu.Unlock()
	var written int64
	for n := int64(1); ; {
		_, err := pg.Exec(ctx, s.db.DB, `INSERT INTO audit_events (actor, via, action, target, outcome, status, detail, client_addr, request_id, count, minute)
			VALUES ('', $1, $2, '', $3, $4, $5, $6, $7, $8, date_trunc('minute', now()))
			ON CONFLICT (client_addr, minute, via, action, status) WHERE minute IS NOT NULL
			DO UPDATE SET count = audit_events.count + excluded.count`,
			e.Via, e.Action, e.Outcome, e.Status, e.Detail, e.ClientAddr, e.RequestID, n)
		s.mu.Lock()
		if err != nil {
			lost := n + *pending
			delete(s.counting, k)
			s.mu.Unlock()
			return written, fmt.Errorf("count audit %s (%d attempts): %w", e.Action, lost, err)
		}
		written += n
		n, *pending = *pending, 0
		if n == 0 {
			delete(s.counting, k)
			s.mu.Unlock()
			return written, nil
		}
		s.mu.Unlock()
	}
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
