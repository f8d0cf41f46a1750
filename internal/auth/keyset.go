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

	fetchMu sync.Mutex // one fetch at a time
	mu      sync.Mutex // guards the fields below
	keys    []jose.JSONWebKey
	fetched time.Time // last successful fetch
	tried   time.Time // last attempt
	lastErr error
}

// Key set errors; go-oidc folds them into its own message, which keeps their text.
var (
	errUnknownKey   = errors.New("the token's signing key (kid) is not one of the provider's keys")
	errBadSignature = errors.New("the token's signature does not verify")
	errNoKeys       = errors.New("the provider's signing keys could not be fetched")
)

// NewKeySet returns a key set read from url or file; now is its clock (nil: time.Now).
func NewKeySet(url, file string, client *http.Client, algs []string, refreshInterval, maxAge time.Duration, now func() time.Time) *KeySet {
	if now == nil {
		now = time.Now
	}
	ks := &KeySet{url: url, file: file, client: client, refreshInterval: refreshInterval, maxAge: maxAge, now: now}
	for _, a := range algs {
		ks.algs = append(ks.algs, jose.SignatureAlgorithm(a))
	}
	return ks
}

// VerifySignature implements oidc.KeySet: it returns the payload of a JWT signed by one of the
// provider's keys.
func (k *KeySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSigned(raw, k.algs)
	if err != nil {
		return nil, fmt.Errorf("malformed jwt: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("the token must carry exactly one signature")
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
			return nil, fmt.Errorf("%w: %v", errNoKeys, k.lastErr)
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
			return nil, fmt.Errorf("%w: %v", errNoKeys, err)
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
			return nil, fmt.Errorf("%w: %v", errNoKeys, err)
		}
		return k.keys, nil
	}
	k.keys, k.fetched, k.lastErr = fresh, k.now(), nil
	return fresh, nil
}

// fetch reads the JWKS.
func (k *KeySet) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
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
