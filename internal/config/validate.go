package config

import (
	"net/url"
	"slices"
)

// isURL reports whether s is an absolute URL with a host and one of the schemes.
func isURL(s string, schemes ...string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Host != "" && slices.Contains(schemes, u.Scheme)
}
