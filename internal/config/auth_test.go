package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAuthSettings(t *testing.T) {
	t.Parallel()
	hash := strings.Repeat("ab", 32)
	load := func(env map[string]string) (Config, error) {
		return Load("../../configs/taskcenter.yaml", func(k string) string { return env[k] })
	}
	cfg, err := load(map[string]string{"TASKCENTER_AUTH_TOKENS": "sha256:" + hash + ":carol:admin"})
	if err != nil || len(cfg.Auth.Tokens) != 1 || cfg.Auth.Tokens[0].Token != "sha256:"+hash || cfg.Auth.Tokens[0].User != "carol" {
		t.Fatalf("a hashed token from the environment: %+v %v", cfg.Auth.Tokens, err)
	}
	if cfg.Auth.OIDC.Enabled() || cfg.Auth.TrustedHeader.User != "" || cfg.Auth.Audit.Retention <= 0 || !cfg.Auth.Audit.Log {
		t.Fatalf("the shipped config turns on more than tokens: %+v", cfg.Auth)
	}
	if th := cfg.Auth.Throttle; th.Failures != 10 || th.Window != time.Minute {
		t.Fatalf("the shipped bearer throttle: %+v, want 10 per 1m", th)
	}
	cfg, err = load(map[string]string{"TASKCENTER_AUTH_THROTTLE_FAILURES": "3", "TASKCENTER_AUTH_THROTTLE_WINDOW": "5m"})
	if th := cfg.Auth.Throttle; err != nil || th.Failures != 3 || th.Window != 5*time.Minute {
		t.Fatalf("the bearer throttle from the environment: %+v %v", th, err)
	}
	cfg, err = load(map[string]string{"TASKCENTER_AUTH_OIDC_ISSUER": "https://login.example.com/realms/acme",
		"TASKCENTER_AUTH_OIDC_AUDIENCE": "taskcenter", "TASKCENTER_AUTH_OIDC_ADMIN_VALUES": "ops,sre"})
	if err != nil || !cfg.Auth.OIDC.Enabled() || cfg.Auth.OIDC.ClientID != "" || len(cfg.Auth.OIDC.AdminValues) != 2 {
		t.Fatalf("oidc from the environment: %+v %v", cfg.Auth.OIDC, err)
	}
	// A removed key stops working within minutes: the keys are trusted for 5 minutes unless
	// set otherwise, the file and the built-in default agree.
	if got, def := cfg.Auth.OIDC.JWKSMaxAge, Default().Auth.OIDC.JWKSMaxAge; got != 5*time.Minute || def != got {
		t.Fatalf("jwks_max_age: the file says %s, the default %s; want 5m", got, def)
	}
	cfg, err = load(map[string]string{"TASKCENTER_AUTH_OIDC_ISSUER": "https://login.example.com", "TASKCENTER_AUTH_OIDC_AUDIENCE": "x",
		"TASKCENTER_AUTH_OIDC_JWKS_MAX_AGE": "2m"})
	if err != nil || cfg.Auth.OIDC.JWKSMaxAge != 2*time.Minute {
		t.Fatalf("jwks_max_age from the environment: %s %v", cfg.Auth.OIDC.JWKSMaxAge, err)
	}
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"TASKCENTER_AUTH_TOKENS": "sha256:abc:carol:admin"}, "64 hex digits"},
		{map[string]string{"TASKCENTER_AUTH_OIDC_ISSUER": "http://login.example.com", "TASKCENTER_AUTH_OIDC_AUDIENCE": "x"}, "https issuer"},
		{map[string]string{"TASKCENTER_AUTH_OIDC_ISSUER": "https://login.example.com"}, "needs audience"},
		{map[string]string{"TASKCENTER_AUTH_OIDC_ISSUER": "https://login.example.com", "TASKCENTER_AUTH_OIDC_AUDIENCE": "x",
			"TASKCENTER_AUTH_OIDC_ALGORITHMS": "RS256,HS256"}, "asymmetric algorithms only"},
		{map[string]string{"TASKCENTER_AUTH_OIDC_CLIENT_ID": "x"}, "need auth.oidc.issuer"},
		{map[string]string{"TASKCENTER_AUTH_OIDC_ISSUER": "https://login.example.com", "TASKCENTER_AUTH_OIDC_AUDIENCE": "x",
			"TASKCENTER_AUTH_OIDC_JWKS_MAX_AGE": "24h"}, "jwks_max_age (TASKCENTER_AUTH_OIDC_JWKS_MAX_AGE) must be at most 1h"},
		{map[string]string{"TASKCENTER_AUTH_OIDC_ISSUER": "https://login.example.com", "TASKCENTER_AUTH_OIDC_AUDIENCE": "x",
			"TASKCENTER_AUTH_OIDC_JWKS_MAX_AGE": "5s"}, "jwks_max_age at least jwks_refresh_interval"},
		{map[string]string{"TASKCENTER_AUTH_TRUSTED_HEADER_USER": "X-Forwarded-User"}, "proxies must list"},
		{map[string]string{"TASKCENTER_AUTH_TRUSTED_HEADER_USER": "X-Forwarded-User", "TASKCENTER_AUTH_TRUSTED_HEADER_PROXIES": "10.0.0.0/33"}, "not an address"},
		{map[string]string{"TASKCENTER_AUTH_THROTTLE_FAILURES": "0"}, "auth.throttle.failures must be at least 1"},
		{map[string]string{"TASKCENTER_AUTH_THROTTLE_WINDOW": "48h"}, "auth.throttle.window between 1s and 24h"},
		// Owner names: a config user is never named like another way in's user; a mapping
		// names a bare owner, and only for a source that is on.
		{map[string]string{"TASKCENTER_AUTH_OIDC_ISSUER": "https://login.example.com", "TASKCENTER_AUTH_OIDC_AUDIENCE": "x",
			"TASKCENTER_AUTH_OIDC_NAME": "Corp IdP"}, "auth.oidc.name (TASKCENTER_AUTH_OIDC_NAME) must be 1 to 64 lower-case letters"},
		{map[string]string{"TASKCENTER_AUTH_OIDC_ISSUER": "https://login.example.com", "TASKCENTER_AUTH_OIDC_AUDIENCE": "x",
			"TASKCENTER_AUTH_OIDC_MAP_SUBJECTS": "alice=gateway:alice"}, `the owner "gateway:alice" must be a bare name`},
		{map[string]string{"TASKCENTER_AUTH_OIDC_ISSUER": "https://login.example.com", "TASKCENTER_AUTH_OIDC_AUDIENCE": "x",
			"TASKCENTER_AUTH_OIDC_MAP_SUBJECTS": "alice="}, `the owner "" must be 1 to 200 characters`},
		{map[string]string{"TASKCENTER_AUTH_OIDC_MAP_SUBJECTS": "alice=alice"}, "map_subjects need auth.oidc.issuer"},
		{map[string]string{"TASKCENTER_AUTH_OIDC_MAP_SUBJECTS": "alice"}, "must be subject=owner"},
		{map[string]string{"TASKCENTER_AUTH_TRUSTED_HEADER_MAP_SUBJECTS": "alice=alice"}, "auth.trusted_header.map_subjects needs auth.trusted_header.user"},
	} {
		if _, err := load(c.env); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want an error saying %q", c.env, err, c.want)
		}
	}
}

// A provider's users are named oidc:<name>:<subject>: the name defaults to the issuer's host
// name; map_subjects from the file or the environment names chosen subjects as bare owners.
func TestOwnerNamesOfTheWaysIn(t *testing.T) {
	t.Parallel()
	oidc := map[string]string{"TASKCENTER_AUTH_OIDC_ISSUER": "https://Login.Example.com/realms/acme", "TASKCENTER_AUTH_OIDC_AUDIENCE": "x"}
	cfg, err := Load("../../configs/taskcenter.yaml", envMap(oidc))
	if err != nil || cfg.Auth.OIDC.OwnerPrefix() != "oidc:login.example.com:" || cfg.Auth.TrustedHeader.OwnerPrefix() != "gateway:" {
		t.Fatalf("the default name: %q %v", cfg.Auth.OIDC.OwnerPrefix(), err)
	}
	oidc["TASKCENTER_AUTH_OIDC_NAME"] = "acme"
	oidc["TASKCENTER_AUTH_OIDC_MAP_SUBJECTS"] = "alice@example.com=alice, c2FsdA== = carol"
	cfg, err = Load("../../configs/taskcenter.yaml", envMap(oidc))
	if err != nil || cfg.Auth.OIDC.OwnerPrefix() != "oidc:acme:" || len(cfg.Auth.OIDC.MapSubjects) != 2 ||
		cfg.Auth.OIDC.MapSubjects["alice@example.com"] != "alice" || cfg.Auth.OIDC.MapSubjects["c2FsdA=="] != "carol" {
		t.Fatalf("name and mapping from the environment: %q %v %v", cfg.Auth.OIDC.OwnerPrefix(), cfg.Auth.OIDC.MapSubjects, err)
	}
	p := filepath.Join(t.TempDir(), "c.yaml")
	file := `
auth:
  tokens: [{token: 0123456789abcdef, user: alice, role: user}]
  trusted_header:
    user: X-Forwarded-User
    proxies: [10.0.0.0/24]
    map_subjects: {"alice": "alice", "Bob Smith": "bob"}
`
	if err := os.WriteFile(p, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err = Load(p, envMap(nil))
	if err != nil || cfg.Auth.TrustedHeader.MapSubjects["Bob Smith"] != "bob" || cfg.Auth.TrustedHeader.MapSubjects["alice"] != "alice" {
		t.Fatalf("the gateway's mapping from the file: %v %v", cfg.Auth.TrustedHeader.MapSubjects, err)
	}
	// A config user is never named like another way in's user.
	if err := os.WriteFile(p, []byte("auth:\n  tokens: [{token: 0123456789abcdef, user: \"oidc:corp:alice\", role: user}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p, envMap(nil)); err == nil || !strings.Contains(err.Error(), `user "oidc:corp:alice" starts like the name of another way in`) {
		t.Fatalf("a config user named like a provider's: %v", err)
	}
}
