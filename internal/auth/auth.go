// Package auth identifies API callers beyond the config tokens: JWTs from the
// company's identity provider and browser sign-in with it (OpenID Connect, through
// github.com/coreos/go-oidc and golang.org/x/oauth2), the trusted gateway's headers, and the
// hashing of API tokens and config tokens.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Scopes an API token may carry. A session, a JWT, a gateway user or a config token has every
// scope its role allows.
const (
	// ScopeRead lets a caller read tasks, types, schedules, webhooks and statistics, and
	// download results and reports.
	ScopeRead = "tasks:read"
	// ScopeWrite lets a caller change things: submit, cancel, retry, schedules, webhooks,
	// tokens.
	ScopeWrite = "tasks:write"
	// ScopeAdmin gives an admin's reach: everyone's tasks, the audit trail, tokens for others.
	// It is granted only by an admin.
	ScopeAdmin = "admin"
)

// AllScopes lists every scope, in the order they are shown.
var AllScopes = []string{ScopeRead, ScopeWrite, ScopeAdmin}

// Identity is the user a credential names.
type Identity struct {
	// User is the owner name: qualified by the source (oidc:<name>:<subject>,
	// gateway:<subject>), or the bare name the operator mapped the subject to.
	User string
	// Subject is the user as the source named them (the claim's or the header's value).
	Subject string
	Admin   bool
	// Expiry is when the credential stops being valid (zero: not known).
	Expiry time.Time
}

// APITokenPrefix starts every API token the product issues, so a token can be told from a
// JWT or a config token at a glance (and found by secret scanners).
const APITokenPrefix = "tc_"

// NewAPIToken returns a new API token (160 random bits) and its hash.
func NewAPIToken() (token, hash string) {
	token = APITokenPrefix + strings.ToLower(rand.Text()) + strings.ToLower(rand.Text()[:6])
	return token, HashToken(token)
}

// HashToken is the hex SHA-256 of a token: what is stored and looked up. API tokens are
// random and long, so a plain hash is enough (no salt or slow hash is needed).
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return hex.EncodeToString(sum[:])
}

// TokenPrefix is the part of a token shown in listings to recognise it.
func TokenPrefix(token string) string {
	if len(token) > len(APITokenPrefix)+6 {
		return token[:len(APITokenPrefix)+6]
	}
	return token
}

// ConfigTokenSum is the SHA-256 a config token is matched by: its own hash, or the one it
// was given as ("sha256:<64 hex digits>"). ok is false for a malformed hash.
func ConfigTokenSum(token string) (sum [32]byte, ok bool) {
	if h, hashed := strings.CutPrefix(token, "sha256:"); hashed {
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != 32 {
			return sum, false
		}
		copy(sum[:], b)
		return sum, true
	}
	return sha256.Sum256([]byte(strings.TrimSpace(token))), true
}

// validUser reports whether a user name from a JWT or a header can be an owner: text of at
// most 200 characters without control characters.
func validUser(s string) bool {
	if s == "" || len(s) > 200 || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}
