package taskview_test

import (
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/jobs/taskview"
	"github.com/taskcenter/taskcenter/store"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// A title the product made is shown in the reader's language, with its message for readers
// that render it themselves; in English it is the text stored. A submitter's title is theirs
// in every language, with no message.
func TestAViewSaysTheTitleInTheReadersLanguage(t *testing.T) {
	t.Parallel()
	said := msg.New("title.import", "filename", "a.xlsx", "mode", "replace", "dry_run", "")
	product := &store.Task{TaskNo: "tsk_1", Title: "Import a.xlsx (replace)", TitleCode: said.Code, TitleParams: said.Params}
	own := &store.Task{TaskNo: "tsk_2", Title: "Quarterly upload"}
	for _, tc := range []struct {
		task    *store.Task
		lang    msg.Lang
		title   string
		message bool
	}{
		{product, msg.EN, "Import a.xlsx (replace)", true},
		{product, msg.ZH, "导入 a.xlsx（替换）", true},
		{own, msg.EN, "Quarterly upload", false},
		{own, msg.ZH, "Quarterly upload", false},
	} {
		v := taskview.Of(tc.task, nil, t0, tc.lang)
		if v.Title != tc.title || (v.TitleMessage != nil) != tc.message {
			t.Errorf("%s in %s: title %q, message %+v; want %q", tc.task.TaskNo, tc.lang, v.Title, v.TitleMessage, tc.title)
		}
	}
}

func TestAViewOfARunningTaskCarriesItsSpeed(t *testing.T) {
	t.Parallel()
	started := t0
	row := &store.Task{TaskNo: "tsk_1", Status: store.StatusRunning, ProgressCurrent: 400, ProgressTotal: 1000,
		StartedAt: &started, UpdatedAt: t0.Add(40 * time.Second), CreatedAt: t0}
	t.Run("from the row: since the start, at zero", func(t *testing.T) {
		v := taskview.Of(row, nil, t0.Add(time.Minute), msg.EN)
		if v.Progress.RatePerS != 10 || !sameTime(v.Progress.ETA, ptr(t0.Add(100*time.Second))) {
			t.Errorf("rate %v eta %v", v.Progress.RatePerS, v.Progress.ETA)
		}
	})
	t.Run("from the live board: since its first sample", func(t *testing.T) {
		live := &task.Live{Progress: task.Progress{Current: 600, Total: 1000, UpdatedAt: t0.Add(50 * time.Second)},
			First: &task.Sample{Current: 100, At: t0.Add(25 * time.Second)}}
		v := taskview.Of(row, live, t0.Add(time.Minute), msg.EN)
		if v.Progress.RatePerS != 20 || !sameTime(v.Progress.ETA, ptr(t0.Add(70*time.Second))) {
			t.Errorf("rate %v eta %v", v.Progress.RatePerS, v.Progress.ETA)
		}
	})
	t.Run("a waiting task has no speed", func(t *testing.T) {
		pending := *row
		pending.Status, pending.StartedAt = store.StatusPending, nil
		if v := taskview.Of(&pending, nil, t0, msg.EN); v.Progress.RatePerS != 0 || v.Progress.ETA != nil {
			t.Errorf("rate %v eta %v", v.Progress.RatePerS, v.Progress.ETA)
		}
	})
}

func ptr(t time.Time) *time.Time { return &t }

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// An import's first rejected rows are said from the messages its result keeps (whatever
// its English says); a result written before it kept them is read back from its English.
func TestFirstErrorsAreSaidFromTheirMessages(t *testing.T) {
	t.Parallel()
	kept := &store.Task{TaskNo: "tsk_1", Status: store.StatusPartialSuccess, Params: []byte(`{"lang":"zh"}`),
		Result: []byte(`{"summary":{"total":2},"first_errors":["row 7, code: K1 is a repeat"],
			"first_error_messages":[{"row":7,"parts":[{"field":"code","code":"row.duplicate","params":{"value":"K1","row":"2"}}]}]}`)}
	old := &store.Task{TaskNo: "tsk_2", Status: store.StatusPartialSuccess, Params: []byte(`{"lang":"zh"}`),
		Result: []byte(`{"summary":{"total":2},"first_errors":["row 3, phone: must be 11 digits starting with 1"]}`)}
	for _, tc := range []struct {
		task *store.Task
		want string
		code string
	}{
		{kept, "第 7 行，客户编号：K1 已在第 2 行出现", "row.duplicate"},
		{old, "第 3 行，手机号：必须是以 1 开头的 11 位数字", "row.phone"},
	} {
		v := taskview.Of(tc.task, nil, t0, msg.ZH)
		if v.Result == nil || len(v.Result.FirstErrors) != 1 || v.Result.FirstErrors[0] != tc.want ||
			len(v.Result.FirstErrorMessages) != 1 || v.Result.FirstErrorMessages[0].Parts[0].Code != tc.code {
			t.Errorf("%s: result %+v", tc.task.TaskNo, v.Result)
		}
	}
}
