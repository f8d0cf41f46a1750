// Package session keeps browser sessions server-side in Redis, and throttles refused
// credentials per client address and per credential (throttle.go). The console (/monitor/),
// the web page (/) and the REST API (/api/) use them.
//
// A session id is 32 random bytes; the browser holds it in an HttpOnly cookie, Redis holds
// only its SHA-256 (reading Redis gives no session away) under a TTL. Ending a session
// deletes the key, so a logout is seen at once by every replica sharing the Redis; a session
// also ends at its TTL after login whatever the key's own TTL says.
package session

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisTimeout bounds each Redis call a request makes for its session.
const redisTimeout = 2 * time.Second

// idLen is the length of a session id: 32 bytes, base64url without padding.
const idLen = 43

// Data is what Redis keeps for a session.
type Data struct {
	User string `json:"user"`
	// Role is the user's role when the session was opened (the web page's sessions).
	Role string `json:"role,omitempty"`
	// Token is the fingerprint of the token the session was opened with (Fingerprint):
	// removing the token from the config ends its sessions.
	Token string `json:"token"`
	// Issued is the login time, unix seconds.
	Issued int64 `json:"issued"`
	// CSRF is the session's anti-forgery token (the web page's sessions): every
	// state-changing request made with the session cookie must send it back.
	CSRF string `json:"csrf,omitempty"`
	// Via is how the session was opened: "" (a token), "oidc" (the company identity
	// provider) or "gateway" (the trusted gateway's header).
	Via string `json:"via,omitempty"`
	// IDToken is the provider's ID token of an oidc session: the hint of an RP-initiated
	// sign-out.
	IDToken string `json:"id_token,omitempty"`
}

// Fingerprint identifies a token in a session record without storing the token.
func Fingerprint(token string) string {
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return hex.EncodeToString(sum[:8])
}

// Store keeps sessions under one key prefix.
type Store struct {
	rdb    redis.UniversalClient
	prefix string
	ttl    time.Duration
	// key signs cookie values when set (Sign and Verify); nil means the cookie is the bare id.
	key []byte
}

// NewStore returns sessions under prefix lasting ttl.
func NewStore(rdb redis.UniversalClient, prefix string, ttl time.Duration) *Store {
	return &Store{rdb: rdb, prefix: prefix, ttl: ttl}
}

// WithSigningKey makes Cookie and ID sign and check the cookie value with HMAC-SHA256
// under key: a made-up cookie is refused without asking Redis.
func (s *Store) WithSigningKey(key []byte) *Store {
	s.key = key
	return s
}

// TTL is how long a session lasts at most.
func (s *Store) TTL() time.Duration { return s.ttl }

// Key is the Redis key of a session id.
func (s *Store) Key(id string) string {
	sum := sha256.Sum256([]byte(id))
	return s.prefix + hex.EncodeToString(sum[:])
}

// RandomToken returns 32 random bytes, base64url.
func RandomToken() string {
	b := make([]byte, 32)
	rand.Read(b) //nolint:errcheck // never fails
	return base64.RawURLEncoding.EncodeToString(b)
}

// Create stores a session (Issued is set to now) and returns its id.
func (s *Store) Create(ctx context.Context, d Data) (string, error) {
	id := RandomToken()
	d.Issued = time.Now().Unix()
	raw, err := json.Marshal(d)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	if err := s.rdb.Set(ctx, s.Key(id), raw, s.ttl).Err(); err != nil {
		return "", fmt.Errorf("store session: %w", err)
	}
	return id, nil
}

// Get returns a live session: known to Redis and younger than the TTL. A Redis failure is
// returned as an error (the caller logs it); an unknown or expired id is (Data{}, false, nil).
func (s *Store) Get(ctx context.Context, id string) (Data, bool, error) {
	var d Data
	if len(id) != idLen {
		return d, false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	raw, err := s.rdb.Get(ctx, s.Key(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return d, false, nil
	}
	if err != nil {
		return d, false, fmt.Errorf("read session: %w", err)
	}
	if json.Unmarshal(raw, &d) != nil {
		return Data{}, false, nil
	}
	if time.Since(time.Unix(d.Issued, 0)) >= s.ttl {
		return Data{}, false, nil
	}
	return d, true, nil
}

// Delete ends a session.
func (s *Store) Delete(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	if err := s.rdb.Del(ctx, s.Key(id)).Err(); err != nil {
		return fmt.Errorf("end session: %w", err)
	}
	return nil
}

// Cookie is the cookie value for a session id: the id, and with a signing key
// "id.signature".
func (s *Store) Cookie(id string) string {
	if s.key == nil {
		return id
	}
	return id + "." + s.sign(id)
}

// ID returns the session id in a cookie value, or false when the signature does not match.
func (s *Store) ID(cookie string) (string, bool) {
	if s.key == nil {
		return cookie, len(cookie) == idLen
	}
	id, sig, ok := strings.Cut(cookie, ".")
	if !ok || len(id) != idLen {
		return "", false
	}
	return id, subtle.ConstantTimeCompare([]byte(sig), []byte(s.sign(id))) == 1
}

func (s *Store) sign(id string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
