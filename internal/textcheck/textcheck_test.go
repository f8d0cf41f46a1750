package textcheck

import (
	"strings"
	"testing"
)

func TestProblemNamesWhatIsWrong(t *testing.T) {
	for _, c := range []struct {
		v, want string
		max     int
	}{
		{"Shanghai", "", 10},
		{"上海市", "", 3},
		{"上海市!", "must be at most 3 characters", 3},
		{"a\x00b", "must not contain control characters", 10},
		{"line\nbreak", "must not contain control characters", 20},
		{"\xff\xfe", "must be valid UTF-8", 10},
		{strings.Repeat("x", 201), "must be at most 200 characters", 200},
	} {
		if got := Problem(c.v, c.max); got != c.want {
			t.Errorf("Problem(%q, %d) = %q, want %q", c.v, c.max, got, c.want)
		}
	}
}
