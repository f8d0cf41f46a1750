package redact

import "testing"

func TestMasks(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"row 12 phone 13800138000 bad":            "row 12 phone 138****8000 bad",
		"13800138000,13900139000":                 "138****8000,139****9000",
		"order 2138001380001 stays":               "order 2138001380001 stays",
		"open /etc/passwd: permission denied":     "open <path>: permission denied",
		"open /data/tc/uploads/x.xlsx: EOF":       "open /data/tc/uploads/x.xlsx: EOF",
		"path=/root/secret.txt":                   "path=<path>",
		"no numbers or paths here":                "no numbers or paths here",
		"12345678901 is not a mobile (starts 12)": "12345678901 is not a mobile (starts 12)",
	} {
		if got := String(in, "/data/tc"); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
	for key, want := range map[string]bool{"token": true, "Authorization": true, "db_password": true, "task_no": false, "phone": false} {
		if IsSecretKey(key) != want {
			t.Errorf("IsSecretKey(%q) = %v", key, !want)
		}
	}
}

// URLs in log lines keep what an operator needs to find the service (scheme, host, port,
// path) and lose what would let a reader of the log use it (passwords, signed queries,
// OAuth codes, webhook secrets).
func TestURLsKeepTheirAddressAndLoseTheirSecrets(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, in, want string }{
		{"an issuer with a port",
			"identity provider http://127.0.0.1:18500 is unreachable",
			"identity provider http://127.0.0.1:18500 is unreachable"},
		{"a discovery error quoting its URL",
			`discovery at http://127.0.0.1:18500: Get "http://127.0.0.1:18500/.well-known/openid-configuration": dial tcp 127.0.0.1:18500: connect: connection refused`,
			`discovery at http://127.0.0.1:18500: Get "http://127.0.0.1:18500/.well-known/openid-configuration": dial tcp 127.0.0.1:18500: connect: connection refused`},
		{"a realm path",
			"issuer https://login.example.com/realms/acme, audience taskcenter-api",
			"issuer https://login.example.com/realms/acme, audience taskcenter-api"},
		{"a password in the user info",
			"open postgres://taskcenter:s3cret-pw@db.internal:5432/taskcenter?sslmode=disable failed",
			"open postgres://taskcenter:***@db.internal:5432/taskcenter?sslmode=disable failed"},
		{"a user without a password",
			"redis://default@cache:6379/0",
			"redis://default@cache:6379/0"},
		{"a presigned download",
			"GET http://127.0.0.1:7070/taskcenter/results/report.xlsx?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAEXAMPLE%2F20261201%2Fus-east-1&X-Amz-Expires=300&X-Amz-Signature=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
			"GET http://127.0.0.1:7070/taskcenter/results/report.xlsx?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=***&X-Amz-Expires=300&X-Amz-Signature=***"},
		{"an OAuth callback",
			"callback https://tc.example.com/auth/callback?code=SplxlOBeZQQYbYS6WxSbIA&state=af0ifjsldkj&lang=en",
			"callback https://tc.example.com/auth/callback?code=***&state=***&lang=en"},
		{"a token in the query",
			`Post "https://hooks.example.com/notify?access_token=abc&channel=ops": EOF`,
			`Post "https://hooks.example.com/notify?access_token=***&channel=ops": EOF`},
		{"a chat webhook's secret in the path",
			`Post "https://hooks.slack.com/services/T0001/B0002/8fQn3Kx7Pz2Lm9Vw4Rt6Yb1c": context deadline exceeded`,
			`Post "https://hooks.slack.com/services/T0001/B0002/***": context deadline exceeded`},
		{"a fragment",
			"https://tc.example.com/#id_token=eyJhbGciOi",
			"https://tc.example.com/#***"},
		{"an IPv6 host",
			"dial http://[::1]:8080/readyz: refused",
			"dial http://[::1]:8080/readyz: refused"},
		{"a URL in parentheses at the end of a sentence",
			"see the docs (https://docs.example.com/ops).",
			"see the docs (https://docs.example.com/ops)."},
		{"a file path after a URL is still a file path",
			`Get "http://127.0.0.1:9000/x": open /etc/ssl/certs/ca.pem: permission denied`,
			`Get "http://127.0.0.1:9000/x": open <path>: permission denied`},
		{"a file URL is a file path",
			"read file:///etc/passwd",
			"read file://<path>"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := String(c.in, "/data/tc"); got != c.want {
				t.Errorf("String:\n got %s\nwant %s", got, c.want)
			}
			// URLs alone (attributes that are not paths) masks the same URLs.
			if c.name != "a file path after a URL is still a file path" && c.name != "a file URL is a file path" {
				if got := URLs(c.in); got != c.want {
					t.Errorf("URLs:\n got %s\nwant %s", got, c.want)
				}
			}
		})
	}
}
