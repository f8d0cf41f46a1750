package session

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Throttle counts refused credentials in Redis, so its limits hold across replicas. Each
// refusal counts twice: against the client address it came from, and against the credential
// it presented (by a keyed hash: Redis never holds the secret). Once either count reaches the
// limit within the window, further refused attempts from that address (whatever they
// present), and with that credential (from any address), must wait. One address cannot guess
// freely, and neither can many addresses guessing at one credential.
//
// A throttle never stands between a valid credential and its owner: callers check the
// credential first and ask the throttle only about refused ones, so junk sent from an
// address every client shares (a proxy, a NAT) locks nobody out.
//
// The window is fixed: it starts at a key's first refusal and ends window later. An IPv6
// address counts with its /64, which one client usually holds whole.
type Throttle struct {
	rdb      redis.UniversalClient
	prefix   string
	failures int
	window   time.Duration
	key      []byte
}

// defaultCredentialKey keys the credential hashes of a throttle given no key of its own.
var defaultCredentialKey = []byte("taskcenter refused-credential throttle v1")

// NewThrottle allows failures refused attempts per client address, and per credential, per
// window, counted in Redis under prefix.
func NewThrottle(rdb redis.UniversalClient, prefix string, failures int, window time.Duration) *Throttle {
	return &Throttle{rdb: rdb, prefix: prefix, failures: failures, window: window, key: defaultCredentialKey}
}

// WithKey keys the credential hashes with key (the same on every replica, or the replicas
// count one credential under different names): whoever reads Redis then cannot test guesses
// of a refused credential against its hash.
func (t *Throttle) WithKey(key []byte) *Throttle {
	if len(key) > 0 {
		t.key = key
	}
	return t
}

// Blocked reports how long a refused attempt from addr presenting credential must wait, in
// whole seconds: 0 when it may be counted now, else the time left of the longest window its
// address or credential has used up. An empty credential counts the address alone. When Redis
// cannot tell, the attempt is let through (0, and the error says why): the credential check
// itself stands.
func (t *Throttle) Blocked(ctx context.Context, addr, credential string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	keys := t.keys(addr, credential)
	pipe := t.rdb.Pipeline()
	counts := make([]*redis.StringCmd, len(keys))
	ttls := make([]*redis.DurationCmd, len(keys))
	for i, k := range keys {
		counts[i], ttls[i] = pipe.Get(ctx, k), pipe.PTTL(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("credential throttle: %w", err)
	}
	var wait time.Duration
	for i := range keys {
		if n, err := counts[i].Int(); err != nil || n < t.failures {
			continue
		}
		left := t.window
		if d, err := ttls[i].Result(); err == nil && d > 0 {
			left = d
		}
		wait = max(wait, left)
	}
	if wait == 0 {
		return 0, nil
	}
	return max(int((wait+time.Second-1)/time.Second), 1), nil
}

// countScript adds one refusal to a key and starts its window when it has none (its first
// refusal, or a key left without one): one key per call, so it runs on Redis Cluster too.
const countScript = `local n = redis.call('INCR', KEYS[1])
if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return n`

// Failed counts a refused attempt against addr and against credential (unless empty), each for
// the window from its first refusal.
func (t *Throttle) Failed(ctx context.Context, addr, credential string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisTimeout)
	defer cancel()
	pipe := t.rdb.Pipeline()
	for _, k := range t.keys(addr, credential) {
		pipe.Eval(ctx, countScript, []string{k}, t.window.Milliseconds())
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("credential throttle: %w", err)
	}
	return nil
}

// keys are the Redis keys a refusal counts under: its address's, and its credential's.
func (t *Throttle) keys(addr, credential string) []string {
	keys := []string{t.prefix + "addr:" + addrKey(addr)}
	if credential = strings.TrimSpace(credential); credential != "" {
		keys = append(keys, t.prefix+"cred:"+t.print(credential))
	}
	return keys
}

// print is a credential's name in Redis: 128 bits of its HMAC-SHA256 under the throttle's key.
func (t *Throttle) print(credential string) string {
	m := hmac.New(sha256.New, t.key)
	m.Write([]byte(credential))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// addrKey is what an address counts as: itself, or for IPv6 its /64.
func addrKey(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil || !a.Is6() || a.Is4In6() {
		return addr
	}
	p, err := a.Prefix(64)
	if err != nil {
		return addr
	}
	return p.String()
}
