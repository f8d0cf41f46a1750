package msg

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Every message is written in both languages, and the Chinese one leaves no English word
// untranslated: only names a person types or reads as they are (formats, standards,
// headers, values the import takes) stay in Latin letters.
func TestEveryMessageIsInBothLanguages(t *testing.T) {
	t.Parallel()
	keep := map[string]bool{"CSV": true, "UTF": true, "xlsx": true, "csv": true, "Webhook": true, "Idempotency": true,
		"Key": true, "Authorization": true, "Bearer": true, "token": true, "utf": true, "gb": true, "auto": true,
		"normal": true, "silver": true, "gold": true, "platinum": true, "diamond": true, "phone": true,
		"JSON": true, "RFC": true, "NUL": true, "MB": true, "KB": true}
	word := regexp.MustCompile(`[A-Za-z]+`)
	if len(Codes()) < 100 {
		t.Fatalf("only %d messages", len(Codes()))
	}
	for _, code := range Codes() {
		en, zh := Text(EN, code), Text(ZH, code)
		if en == "" || zh == "" {
			t.Errorf("%s: en %q, zh %q", code, en, zh)
			continue
		}
		for _, w := range word.FindAllString(placeholder.ReplaceAllString(zh, ""), -1) {
			if !keep[w] {
				t.Errorf("%s: the Chinese %q leaves %q in English", code, zh, w)
			}
		}
		// A param read through the catalogue names a kind it holds.
		for _, g := range placeholder.FindAllStringSubmatch(en+zh, -1) {
			for kind := range strings.SplitSeq(g[2], ",") {
				if kind != "" && !slices.ContainsFunc(Codes(), func(c string) bool { return strings.HasPrefix(c, kind+".") }) {
					t.Errorf("%s reads {%s} as a %q, which the catalogue has none of", code, g[1], kind)
				}
			}
		}
		// The English names every param the Chinese shows as it is (the Chinese may read one
		// through the catalogue instead, or show another in its place).
		for _, n := range Names(en) {
			if !strings.Contains(zh, "{"+n) && !strings.Contains(zh, "|"+n+"}") {
				t.Errorf("%s: the Chinese %q does not say {%s}", code, zh, n)
			}
		}
	}
}

// Messages render with their params, enum values read through the catalogue (one by one in a
// list), and a param a template reads through an entry the catalogue lacks falls back to the
// named param.
func TestMessagesRenderInEachLanguage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		m      Message
		en, zh string
	}{
		{New("log.imported", "success", "18968", "total", "20000", "failed", "1032"),
			"imported 18968 of 20000 rows; 1032 failed", "已导入 20000 行中的 18968 行；1032 行失败"},
		{New("log.cancel_requested_by", "who", "alice"), "cancel requested by alice", "alice 请求取消"},
		{New("log.attempt_started", "attempt", "2", "worker", "w1", "trigger", "manual_retry"),
			"attempt 2 started on w1 (manual_retry)", "第 2 次尝试在 w1 上开始（手动重试）"},
		{New("log.failed", "code", "all_rows_rejected", "error", "all 3 rows were rejected; nothing was imported (the error report says why for each row)", "total", "3"),
			"failed: all 3 rows were rejected; nothing was imported (the error report says why for each row)",
			"失败：全部 3 行均被拒绝，未导入任何数据（错误报告中有每一行的原因）"},
		{New("log.failed", "code", "something_new", "error", "a new failure"), "failed: a new failure", "失败：a new failure"},
		{New("log.failed", "code", "missing_header", "error", "no header row found"), "failed: no header row found", "失败：未找到表头行。"},
		{New("problem.result_not_ready", "status", "RUNNING"), "the task is RUNNING; the result is not ready yet", "任务状态为运行中；结果尚未就绪"},
		{New("log.cancelled_ending", "then", "exported 3 rows", "then_code", "exported", "rows", "3"),
			"cancelled as requested; the attempt was ending: exported 3 rows", "已按请求取消；该次尝试当时正在结束：已导出 3 行"},
		{Plain("counted 5"), "counted 5", "counted 5"},
		{New("title.export_tasks", "owner", "alice", "owner_part", "first", "statuses", "FAILED TIMEOUT", "statuses_part", "next"),
			"Tasks of alice, status Failed, Timed out", "任务列表导出：alice，状态为失败、超时"},
		{New("title.export_tasks", "owner", "", "owner_part", "", "statuses", "SUCCESS", "statuses_part", "first"),
			"Tasks with status Succeeded", "任务列表导出：状态为成功"},
	} {
		if got := tc.m.English(); got != tc.en {
			t.Errorf("%s in English: %q, want %q", tc.m.Code, got, tc.en)
		}
		if got := tc.m.In(ZH); got != tc.zh {
			t.Errorf("%s in Chinese: %q, want %q", tc.m.Code, got, tc.zh)
		}
	}
}

func TestParseLangReadsTagsAndAcceptLanguage(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]Lang{"zh": ZH, "zh-CN": ZH, "zh_Hans": ZH, "en-US": EN, "": EN, "fr": EN,
		"en;q=0.8, zh-CN;q=0.9": ZH, "zh;q=0.3, en": EN} {
		if got := ParseLang(in); got != want {
			t.Errorf("ParseLang(%q) = %q, want %q", in, got, want)
		}
	}
}

// Every code the product's Go names where it says something is in the catalogue: the
// messages it builds (msg.New), the problems it says (problem.Say: "problem.<code>"), the
// failures it says (jobs.BadInputSaid: "error.<code>"), the row messages (defMessage), the
// lines its SQL writes beside their English ('log.…') and every field error it names
// ("field_error.…", wherever the code is written: a message, a constant, a helper's argument).
func TestEveryCodeTheProductUsesIsInTheCatalogue(t *testing.T) {
	t.Parallel()
	uses := []struct {
		re     *regexp.Regexp
		prefix string
	}{
		{regexp.MustCompile(`msg\.New\("([^"]+)"`), ""},
		{regexp.MustCompile(`defMessage\("([^"]+)"`), ""},
		{regexp.MustCompile(`problem\.Say\([^,]+, "([^"]+)"`), "problem."},
		{regexp.MustCompile(`BadInputSaid\("([^"]+)"`), "error."},
		{regexp.MustCompile(`'((?:log|error|problem|row|interrupt)\.[a-z_]+)'`), ""},
		{regexp.MustCompile(`"(field_error\.[^"]+)"`), ""},
	}
	found, fieldErrors := 0, 0
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// The repository's own files: not test data, tools or the services' data dir (where
		// the databases of the tests running meanwhile come and go).
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".") || path == "../../data") && path != "../.." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, u := range uses {
			for _, m := range u.re.FindAllStringSubmatch(string(b), -1) {
				found++
				if strings.HasPrefix(m[1], "field_error.") {
					fieldErrors++
				}
				if code := u.prefix + m[1]; !Known(code) {
					t.Errorf("%s says %q, which the catalogue lacks", path, code)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 30 || fieldErrors < 30 {
		t.Fatalf("found only %d uses of codes, %d of field errors", found, fieldErrors)
	}
}
