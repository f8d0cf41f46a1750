package textcheck

import (
	"strings"
	"testing"

	"github.com/taskcenter/taskcenter/internal/msg"
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
		m, bad := Problem(c.v, c.max)
		if got := m.English(); bad != (c.want != "") || (bad && got != c.want) {
			t.Errorf("Problem(%q, %d) = %q, want %q", c.v, c.max, got, c.want)
		}
	}
}

func TestEchoShortensAndQuotes(t *testing.T) {
	if got := Echo(strings.Repeat("x", 100) + "\xff"); len([]rune(got)) > maxEcho+3 || !strings.HasSuffix(got, `…"`) {
		t.Errorf("Echo of a long value: %s", got)
	}
	if got := Echo("a\x00b"); got != `"a\x00b"` {
		t.Errorf("Echo of a control character: %s", got)
	}
}

func TestOneOfNamesTheChoices(t *testing.T) {
	for _, c := range []struct {
		choices []string
		en, zh  string
	}{
		{[]string{"zh", "en"}, "must be zh or en", "必须是 zh 或 en"},
		{[]string{"upsert", "insert", "replace"}, "must be upsert, insert or replace", "必须是 upsert, insert 或 replace"},
	} {
		m := OneOf(c.choices...)
		if m.English() != c.en || m.In(msg.ZH) != c.zh {
			t.Errorf("OneOf(%q) = %q / %q, want %q / %q", c.choices, m.English(), m.In(msg.ZH), c.en, c.zh)
		}
	}
}
