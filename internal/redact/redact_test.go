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
