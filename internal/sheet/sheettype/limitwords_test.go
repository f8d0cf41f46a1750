package sheettype

import "testing"

// A limit reads as it was set, never rounded down to one that was not ("the 0 MB limit").
func TestLimitWordsSayTheLimitAsSet(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{
		100 << 20: "100 MB", 1 << 30: "1,024 MB", 512 << 10: "512 KB", 1_500_000: "1,500,000 bytes",
		(1 << 20) + 1: "1,048,577 bytes", 900: "900 bytes", 3 << 10: "3 KB",
	} {
		if got := LimitWords(n); got != want {
			t.Errorf("LimitWords(%d) = %q, want %q", n, got, want)
		}
	}
}
