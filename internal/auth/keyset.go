package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// KeySet is the provider's signing keys (a JWKS) for go-oidc's verifier: fetched from a URL
// (the discovery document's jwks_uri, or a configured one) or read from a file, and cached.
//
// go-oidc's own RemoteKeySet fetches the keys again for every token whose key it does not
// know, so a stream of tokens with made-up key ids makes a stream of requests to the
// provider. This one follows key rotation the same way — a token naming an unknown key id
// fetches the keys again — but at most once per refreshInterval. Keys are also refreshed on
// a schedule: keys older than maxAge are fetched again before the next token is checked, so
// a key the provider removed stops working within maxAge (5 minutes by default). While that
// fetch is under way other tokens are checked with the keys in hand instead of queueing
// behind it, and when it fails (the provider is down) the keys in hand stay in use.
type KeySet struct {
	url, file       string
	client          *http.Client
	algs            []jose.SignatureAlgorithm
	refreshInterval time.Duration
	maxAge          time.Duration
	now             func() time.Time
	health          Health // told how each fetch from the provider went; nil: nobody

	fetchMu sync.Mutex // one fetch at a time
	mu      sync.Mutex // guards the fields below
	keys    []jose.JSONWebKey
	fetched time.Time // last successful fetch
	tried   time.Time // last attempt
	lastErr error
}

// Key set errors. go-oidc folds them into its own message; the verification that called the
// key set keeps the error itself (checkedKeys), so they are told apart by identity.
var (
	errUnknownKey   = errors.New("the token's signing key (kid) is not one of the provider's keys")
	errBadSignature = errors.New("the token's signature does not verify")
	errMalformed    = errors.New("malformed jwt")
	// errNoKeys comes wrapped with ErrProviderUnavailable: no token can be checked.
	errNoKeys = errors.New("the provider's signing keys could not be fetched")
)

// newKeySet returns a key set read from url or file, with cfg's algorithms, refresh
// interval, max age, clock and health.
func newKeySet(url, file string, client *http.Client, cfg OIDCConfig) *KeySet {
	ks := &KeySet{url: url, file: file, client: client, refreshInterval: cfg.JWKSRefreshInterval, maxAge: cfg.JWKSMaxAge,
		now: cfg.Clock, health: cfg.Health}
	if ks.now == nil {
		ks.now = time.Now
	}
	for _, a := range cfg.Algorithms {
		ks.algs = append(ks.algs, jose.SignatureAlgorithm(a))
	}
	return ks
}

// VerifySignature implements oidc.KeySet: it returns the payload of a JWT signed by one of the
// provider's keys.
func (k *KeySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSigned(raw, k.algs)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errMalformed, err)
	}
	if len(jws.Signatures) != 1 {
		return nil, fmt.Errorf("%w: the token must carry exactly one signature", errMalformed)
	}
	kid := jws.Signatures[0].Header.KeyID
	keys, err := k.current(ctx, false)
	if err != nil && len(keys) == 0 {
		return nil, err
	}
	if payload, known, err := verifyWith(jws, keys, kid); known {
		return payload, err
	}
	// An unknown key id: the provider may have rotated its keys.
	keys, err = k.current(ctx, true)
	if err != nil && len(keys) == 0 {
		return nil, err
	}
	payload, known, err := verifyWith(jws, keys, kid)
	if !known {
		return nil, errUnknownKey
	}
	return payload, err
}

// verifyWith verifies jws with the key named kid (every key of a fitting type when the token
// names none). known is false when no key could be tried.
func verifyWith(jws *jose.JSONWebSignature, keys []jose.JSONWebKey, kid string) (payload []byte, known bool, err error) {
	for _, key := range keys {
		if kid != "" && key.KeyID != kid {
			continue
		}
		if key.Use != "" && key.Use != "sig" {
			continue
		}
		if key.Algorithm != "" && key.Algorithm != jws.Signatures[0].Header.Algorithm {
			continue
		}
		known = true
		if payload, err := jws.Verify(&key); err == nil {
			return payload, true, nil
		}
	}
	if known {
		return nil, true, errBadSignature
	}
	return nil, false, nil
}

// current returns the cached keys, fetching them first when there are none, when they are
// older than maxAge, or (refresh) when a token named an unknown key — each at most once per
// refreshInterval. When a fetch fails the old keys stay in use; while keys that are only old
// are being fetched again, other callers use them rather than wait.
func (k *KeySet) current(ctx context.Context, refresh bool) ([]jose.JSONWebKey, error) {
	k.mu.Lock()
	keys, fetched, tried := k.keys, k.fetched, k.tried
	k.mu.Unlock()
	now := k.now()
	stale := keys == nil || now.Sub(fetched) >= k.maxAge || refresh
	if !stale || now.Sub(tried) < k.refreshInterval {
		if keys == nil {
			k.mu.Lock()
			defer k.mu.Unlock()
			return nil, noKeys(k.lastErr)
		}
		return keys, nil
	}
	if !k.fetchMu.TryLock() {
		if keys != nil && !refresh {
			return keys, nil
		}
		k.fetchMu.Lock()
	}
	defer k.fetchMu.Unlock()
	k.mu.Lock()
	if k.tried.After(tried) { // another caller fetched meanwhile
		keys, err := k.keys, k.lastErr
		k.mu.Unlock()
		if keys == nil {
			return nil, noKeys(err)
		}
		return keys, nil
	}
	k.tried = k.now()
	k.mu.Unlock()
	fresh, err := k.fetch(ctx)
	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil {
		k.lastErr = err
		if k.keys == nil {
			return nil, noKeys(err)
		}
		return k.keys, nil
	}
	k.keys, k.fetched, k.lastErr = fresh, k.now(), nil
	return fresh, nil
}

// noKeys is the error of a key set that has no keys to check a token with.
func noKeys(cause error) error {
	return fmt.Errorf("%w: %w: %v", ErrProviderUnavailable, errNoKeys, cause)
}

// fetch reads the JWKS; a fetch from the provider tells the health how it went.
func (k *KeySet) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	keys, err := k.read(ctx)
	if k.file == "" && k.health != nil {
		if err != nil {
			k.health.Fail(fmt.Errorf("fetch the signing keys: %w", err))
		} else {
			k.health.OK()
		}
	}
	return keys, err
}

// read reads and decodes the JWKS.
func (k *KeySet) read(ctx context.Context) ([]jose.JSONWebKey, error) {
	var body []byte
	if k.file != "" {
		b, err := os.ReadFile(k.file)
		if err != nil {
			return nil, err
		}
		body = b
	} else {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "application/json")
		res, err := k.client.Do(req)
		if err != nil {
			return nil, err
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %s", k.url, res.Status)
		}
		if body, err = io.ReadAll(io.LimitReader(res.Body, 1<<20)); err != nil {
			return nil, err
		}
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("the JWKS does not decode: %w", err)
	}
	var keys []jose.JSONWebKey
	for _, key := range set.Keys {
		if key.IsPublic() && key.Valid() { // a symmetric or private key is never a verification key here
			keys = append(keys, key)
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("the JWKS holds no public signing key")
	}
	return keys, nil
}
