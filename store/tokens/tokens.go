// Package tokens keeps the API tokens users manage in the product (the api_tokens table).
// Only a token's SHA-256 is stored: the token itself is shown once, when it is created.
// Creating and revoking write their audit row (store/audit) in the same statement as the
// change. Package store embeds *Tokens in its Store, so callers write st.CreateAPIToken(...).
package tokens

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/store/audit"
	"github.com/taskcenter/taskcenter/store/pg"
)

// Tokens keeps the API tokens.
type Tokens struct{ db *bun.DB }

// New returns the API tokens over db.
func New(db *bun.DB) *Tokens { return &Tokens{db: db} }

// APIToken is a token for a service or a script, acting as its owner within its scopes.
type APIToken struct {
	bun.BaseModel `bun:"table:api_tokens"`

	ID         int64      `bun:"id,pk,autoincrement"`
	TokenNo    string     `bun:"token_no"`
	Hash       string     `bun:"hash"`
	Prefix     string     `bun:"prefix"`
	Owner      string     `bun:"owner"`
	Role       string     `bun:"role"`
	Name       string     `bun:"name"`
	Scopes     []string   `bun:"scopes,array"`
	CreatedBy  string     `bun:"created_by"`
	CreatedAt  time.Time  `bun:"created_at"`
	ExpiresAt  time.Time  `bun:"expires_at"`
	LastUsedAt *time.Time `bun:"last_used_at"`
	RevokedAt  *time.Time `bun:"revoked_at"`
	RevokedBy  *string    `bun:"revoked_by"`
}

const columns = `id, token_no, hash, prefix, owner, role, name, scopes, created_by, created_at, expires_at,
	last_used_at, revoked_at, revoked_by`

// ErrNotFound: no such token, or not visible to the caller.
var ErrNotFound = errors.New("api token not found")

// NewAPIToken is what creating a token needs; Hash is the token's hex SHA-256.
type NewAPIToken struct {
	Hash      string
	Prefix    string
	Owner     string
	Role      string
	Name      string
	Scopes    []string
	CreatedBy string
	ExpiresAt time.Time
}

// CreateAPIToken stores a token (and, with an audit origin in ctx, its token.create audit row in the
// same statement).
func (s *Tokens) CreateAPIToken(ctx context.Context, nt NewAPIToken) (*APIToken, error) {
	tok := new(APIToken)
	err := pg.One(ctx, s.db, s.db.DB, tok, `
		WITH t AS (
			INSERT INTO api_tokens (token_no, hash, prefix, owner, role, name, scopes, created_by, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			RETURNING `+columns+`
		), au AS (
			INSERT INTO audit_events (actor, via, action, target, outcome, detail, client_addr, request_id)
			SELECT $10::text, $11::text, 'token.create', token_no, 'success', 'for ' || owner || ': ' || array_to_string(scopes, ' '),
			       $12::text, $13::text
			FROM t WHERE $10::text <> ''
		)
		SELECT `+columns+` FROM t`,
		append([]any{pg.NewNo("tok_"), nt.Hash, nt.Prefix, nt.Owner, nt.Role, nt.Name, nt.Scopes, nt.CreatedBy, nt.ExpiresAt}, audit.Params(ctx)...)...)
	if err != nil {
		return nil, fmt.Errorf("create api token: %w", err)
	}
	audit.Written(ctx, 1)
	return tok, nil
}

// APITokenByHash returns the live token (not revoked, not expired) with this hash, and notes
// its use (at most once a minute, so a busy script does not write on every request).
func (s *Tokens) APITokenByHash(ctx context.Context, hash string) (*APIToken, error) {
	tok, err := pg.Get[APIToken](ctx, s.db, ErrNotFound, "look up api token", `SELECT `+columns+` FROM api_tokens
		WHERE hash = $1 AND revoked_at IS NULL AND expires_at > now()`, hash)
	if err != nil {
		return nil, err
	}
	if tok.LastUsedAt == nil || time.Since(*tok.LastUsedAt) > time.Minute {
		if _, err := pg.Exec(ctx, s.db.DB, `UPDATE api_tokens SET last_used_at = now()
			WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')`, tok.ID); err != nil {
			return nil, fmt.Errorf("note api token use: %w", err)
		}
	}
	return tok, nil
}

// ListAPITokens returns the tokens scope may see (owner, when given, narrows an admin's
// view), newest first, revoked ones included.
func (s *Tokens) ListAPITokens(ctx context.Context, scope pg.Scope, owner string) ([]APIToken, error) {
	owner = scope.ListedOwner(owner)
	return pg.List[APIToken](ctx, s.db, "list api tokens", `SELECT `+columns+` FROM api_tokens
		WHERE ($1 = '' OR owner = $1) ORDER BY id DESC LIMIT 1000`, owner)
}

// RevokeAPIToken ends a token at once (and, with an audit origin in ctx, writes its token.revoke
// audit row in the same statement). Revoking a revoked token changes nothing and answers it.
func (s *Tokens) RevokeAPIToken(ctx context.Context, tokenNo string, scope pg.Scope, by string) (*APIToken, error) {
	tok := new(APIToken)
	err := pg.One(ctx, s.db, s.db.DB, tok, `
		WITH t AS (
			UPDATE api_tokens SET revoked_at = now(), revoked_by = $4
			WHERE token_no = $1 AND ($2 OR owner = $3) AND revoked_at IS NULL
			RETURNING `+columns+`
		), au AS (
			INSERT INTO audit_events (actor, via, action, target, outcome, detail, client_addr, request_id)
			SELECT $5::text, $6::text, 'token.revoke', token_no, 'success', 'of ' || owner, $7::text, $8::text
			FROM t WHERE $5::text <> ''
		)
		SELECT `+columns+` FROM t`, append([]any{tokenNo, scope.Admin, scope.Owner, by}, audit.Params(ctx)...)...)
	if err == nil {
		audit.Written(ctx, 1)
		return tok, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("revoke api token %s: %w", tokenNo, err)
	}
	return pg.Get[APIToken](ctx, s.db, ErrNotFound, fmt.Sprintf("revoke api token %s", tokenNo),
		`SELECT `+columns+` FROM api_tokens WHERE token_no = $1 AND ($2 OR owner = $3)`, tokenNo, scope.Admin, scope.Owner)
}
