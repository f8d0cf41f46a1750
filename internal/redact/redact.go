// Package redact masks sensitive values before they reach logs or stored parameters: mobile
// phone numbers, secrets, and file paths outside the data directory.
package redact

import (
	"path/filepath"
	"regexp"
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
func IsSecretKey(key string) bool {
	k := strings.ToLower(key)
	for _, s := range secretKeys {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// String applies every mask to free text.
func String(s, dataDir string) string { return Paths(Phones(s), dataDir) }

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
