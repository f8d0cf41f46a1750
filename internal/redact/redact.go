// Package redact masks sensitive values before they reach logs or stored parameters: mobile
// phone numbers, secrets, file paths outside the data directory, and the secrets inside URLs.
package redact

import (
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// mobile matches a mainland mobile number not embedded in a longer run of digits.
var mobile = regexp.MustCompile(`(^|[^0-9])(1[3-9][0-9])([0-9]{4})([0-9]{4})([^0-9]|$)`)

// Phones masks mobile numbers as 138****8000.
func Phones(s string) string {
	if !hasElevenDigits(s) {
		return s // the common case, decided without the regexp: it runs on every log attribute
	}
	// Twice: adjacent numbers share a separator, which one pass consumes.
	for range 2 {
		s = mobile.ReplaceAllString(s, "${1}${2}****${4}${5}")
	}
	return s
}

// absPath matches an absolute path in free text.
var absPath = regexp.MustCompile(`(^|[\s"'=(:])(/[^\s"'):,]+)`)

// Paths replaces absolute paths outside dataDir with "<path>".
func Paths(s, dataDir string) string {
	if !strings.Contains(s, "/") {
		return s
	}
	root := filepath.Clean(dataDir)
	return absPath.ReplaceAllStringFunc(s, func(m string) string {
		loc := absPath.FindStringSubmatchIndex(m)
		prefix, p := m[:loc[3]], m[loc[4]:loc[5]]
		if root != "" && root != "." && (p == root || strings.HasPrefix(p, root+"/")) {
			return m
		}
		return prefix + "<path>"
	})
}

// secretKeys are attribute names whose values are never shown.
var secretKeys = []string{"token", "authorization", "password", "secret", "cookie", "webhook_url"}

// IsSecretKey reports whether a field named key holds a secret.
func IsSecretKey(key string) bool { return namesAny(key, secretKeys) }

// namesAny reports whether name, in any case, contains one of words.
func namesAny(name string, words []string) bool {
	n := strings.ToLower(name)
	return slices.ContainsFunc(words, func(w string) bool { return strings.Contains(n, w) })
}

// String applies every mask to free text: URLs are masked as URLs (URLs) and the text between
// them as text (Paths), so a URL's "//host" is never taken for a file path.
func String(s, dataDir string) string {
	s = Phones(s)
	if !strings.Contains(s, "://") {
		return Paths(s, dataDir)
	}
	var b strings.Builder
	last := 0
	for _, m := range urlPattern.FindAllStringIndex(s, -1) {
		if m[0] < last {
			continue
		}
		raw := trimURL(s[m[0]:m[1]])
		b.WriteString(Paths(s[last:m[0]], dataDir))
		b.WriteString(maskURL(raw, dataDir))
		last = m[0] + len(raw)
	}
	b.WriteString(Paths(s[last:], dataDir))
	return b.String()
}

// urlPattern matches an absolute URL with an authority (scheme://…) in free text, up to a
// character a URL in a log line does not hold; trimURL then gives back trailing punctuation.
var urlPattern = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s"'<>{}\x60\\]+`)

// URLs masks the secrets of every URL in s and leaves the rest of the text alone: each URL
// keeps its scheme, host, port and path, while a password in it, the values of query
// parameters that hold credentials (token, signature, code, state, key, …) and path segments
// or query values that look like keys (long random strings, such as a chat webhook's secret)
// become "***", and a fragment becomes "***". A URL that does not parse keeps its scheme
// only.
func URLs(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	return urlPattern.ReplaceAllStringFunc(s, func(m string) string {
		raw := trimURL(m)
		return maskURL(raw, "") + m[len(raw):]
	})
}

// trimURL gives back what the pattern took beyond the URL: the punctuation that ends a
// sentence or a quoted phrase, and closing brackets that the URL did not open.
func trimURL(m string) string {
	for m != "" {
		last := m[len(m)-1]
		switch {
		case strings.IndexByte(".,;:!?", last) >= 0:
		case last == ')' && strings.Count(m, "(") < strings.Count(m, ")"):
		case last == ']' && strings.Count(m, "[") < strings.Count(m, "]"):
		default:
			return m
		}
		m = m[:len(m)-1]
	}
	return m
}

// maskURL masks one URL (see URLs); a file URL's path is masked as a file path.
func maskURL(raw, dataDir string) string {
	scheme, rest, _ := strings.Cut(raw, "://")
	u, err := url.Parse(raw)
	if err != nil {
		return scheme + "://<url>"
	}
	if u.Host == "" {
		return scheme + "://" + Paths(rest, dataDir)
	}
	var b strings.Builder
	b.WriteString(scheme + "://")
	if u.User != nil {
		b.WriteString(url.PathEscape(u.User.Username()))
		if _, ok := u.User.Password(); ok {
			b.WriteString(":***")
		}
		b.WriteByte('@')
	}
	b.WriteString(u.Host)
	for i, seg := range strings.Split(u.EscapedPath(), "/") {
		if i > 0 {
			b.WriteByte('/')
		}
		if dec, err := url.PathUnescape(seg); err == nil && looksLikeKey(dec) {
			seg = "***"
		}
		b.WriteString(seg)
	}
	if u.RawQuery != "" || u.ForceQuery {
		b.WriteByte('?')
		for i, pair := range strings.Split(u.RawQuery, "&") {
			if i > 0 {
				b.WriteByte('&')
			}
			k, v, hasValue := strings.Cut(pair, "=")
			b.WriteString(k)
			if !hasValue {
				continue
			}
			dk, _ := url.QueryUnescape(k)
			dv, _ := url.QueryUnescape(v)
			if v != "" && (IsSecretKey(dk) || isCredentialParam(dk) || looksLikeKey(dv)) {
				v = "***"
			}
			b.WriteString("=" + v)
		}
	}
	if u.Fragment != "" {
		b.WriteString("#***")
	}
	return b.String()
}

// credentialParams are words in query parameter names whose values are credentials: OAuth's
// code and state, presigned URLs' X-Amz-Signature and X-Amz-Credential, api keys.
var credentialParams = []string{"sig", "key", "code", "state", "credential", "auth", "session", "pass", "nonce", "verifier"}

func isCredentialParam(name string) bool { return namesAny(name, credentialParams) }

// looksLikeKey reports whether a path segment or value looks like a generated secret rather
// than a word a person chose: 20 characters or more of letters mixed with digits, or 32 or
// more without a separator.
func looksLikeKey(s string) bool {
	if len(s) < 20 {
		return false
	}
	letters, digits := false, false
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9':
			digits = true
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
			letters = true
		case r == '-' || r == '_' || r == '.' || r == '~' || r == '+' || r == '=' || r == '/':
		default:
			return false // text with spaces or punctuation is prose, not a key
		}
	}
	return letters && digits || len(s) >= 32 && !strings.ContainsAny(s, ".-")
}

// hasElevenDigits reports whether s holds a run of exactly eleven ASCII digits.
func hasElevenDigits(s string) bool {
	run := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] >= '0' && s[i] <= '9' {
			run++
			continue
		}
		if run == 11 {
			return true
		}
		run = 0
	}
	return false
}
