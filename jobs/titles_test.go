package jobs_test

import (
	"regexp"
	"strings"
	"testing"
	"text/template"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/export"
	"github.com/taskcenter/taskcenter/jobs/importer"
	"github.com/taskcenter/taskcenter/jobs/report"
	"github.com/taskcenter/taskcenter/store"
)

// The titles the product gives tasks are catalogue messages: in English each reads exactly
// as the text the type wrote before (clients and the list's search read it), and in Chinese
// it says everything in Chinese but the values it names (a city, an owner, a file).
func TestProductTitlesReadInEachLanguage(t *testing.T) {
	t.Parallel()
	// The titles as the types wrote them before they were messages.
	old := func(tmpl string) func(any) string {
		parsed := template.Must(template.New("title").Option("missingkey=zero").Parse(tmpl))
		return func(p any) string {
			var b strings.Builder
			if err := parsed.Execute(&b, p); err != nil {
				t.Fatal(err)
			}
			return task.TitleText(b.String())
		}
	}
	customers := old(`Customers{{with .Filter.City}} in {{.}}{{end}}{{with .Filter.Level}}, level {{.}}{{end}}{{with .Filter.CodePrefix}}, codes {{.}}…{{end}}`)
	// A task-list export's statuses read as its filter, in words: "Tasks FAILED" beside its own
	// chip ("Succeeded") read as a contradiction.
	tasks := func(p any) string {
		f := p.(*export.TaskParams).Filter
		title := "Tasks"
		if f.Owner != "" {
			title += " of " + f.Owner
		}
		if len(f.Statuses) > 0 {
			names := make([]string, len(f.Statuses))
			for i, s := range f.Statuses {
				names[i] = msg.Text(msg.EN, "status."+string(s))
			}
			if f.Owner != "" {
				title += ", status " + strings.Join(names, ", ")
			} else {
				title += " with status " + strings.Join(names, ", ")
			}
		}
		return title
	}
	stats := old(`Customer statistics (imports over {{.Days}} days)`)
	imported := func(p any) string {
		ip := p.(*importer.Params)
		title := "Import " + ip.Filename
		switch ip.Mode {
		case importer.ModeInsert:
			title += " (insert only)"
		case importer.ModeReplace:
			title += " (replace)"
		}
		if ip.DryRun {
			title += " (dry run)"
		}
		return task.TitleText(title)
	}
	undone := func(p any) string { return task.TitleText("Undo import " + p.(*importer.UndoParams).Filename) }

	type titled interface {
		jobs.Params
		jobs.Titled
	}
	for _, tc := range []struct {
		params titled
		was    func(any) string
		zh     string   // "" when only checked for English left over
		data   []string // the values the title names, as they are in every language
	}{
		{&export.CustomerParams{}, customers, "客户导出", nil},
		{&export.CustomerParams{Filter: export.CustomerFilter{City: "Shanghai"}}, customers, "客户导出：Shanghai", []string{"Shanghai"}},
		{&export.CustomerParams{Filter: export.CustomerFilter{Level: "gold"}}, customers, "客户导出：黄金", nil},
		{&export.CustomerParams{Filter: export.CustomerFilter{CodePrefix: "VIP"}}, customers, "客户导出：编号 VIP…", []string{"VIP"}},
		{&export.CustomerParams{Filter: export.CustomerFilter{City: "上海", Level: "diamond", CodePrefix: "VIP"}}, customers,
			"客户导出：上海，钻石，编号 VIP…", []string{"VIP"}},
		{&export.CustomerParams{Filter: export.CustomerFilter{Level: "silver", CodePrefix: "AB"}}, customers, "客户导出：白银，编号 AB…", []string{"AB"}},
		{&export.CustomerParams{Filter: export.CustomerFilter{City: "  New   York "}}, customers, "客户导出：New York", []string{"New", "York"}},
		{&export.TaskParams{}, tasks, "任务列表导出", nil},
		{&export.TaskParams{Filter: export.TaskFilter{Owner: "alice"}}, tasks, "任务列表导出：alice", []string{"alice"}},
		{&export.TaskParams{Filter: export.TaskFilter{Statuses: []store.Status{store.StatusFailed}}}, tasks, "任务列表导出：状态为失败", nil},
		{&export.TaskParams{Filter: export.TaskFilter{Owner: "bob", Statuses: []store.Status{store.StatusFailed, store.StatusTimeout, store.StatusFailed}}},
			tasks, "任务列表导出：bob，状态为失败、超时、失败", []string{"bob"}},
		{&report.CustomerStatsParams{Days: 30}, stats, "客户统计报表（近 30 天的导入）", nil},
		{&report.CustomerStatsParams{Days: 7}, stats, "客户统计报表（近 7 天的导入）", nil},
		{&importer.Params{Filename: "customers.xlsx", Mode: importer.ModeUpsert}, imported, "导入 customers.xlsx", []string{"customers.xlsx"}},
		{&importer.Params{Filename: "customers.xlsx"}, imported, "导入 customers.xlsx", []string{"customers.xlsx"}},
		{&importer.Params{Filename: "customers.xlsx", Mode: importer.ModeInsert}, imported, "导入 customers.xlsx（仅新增）", []string{"customers.xlsx"}},
		{&importer.Params{Filename: "customers.xlsx", Mode: importer.ModeReplace, DryRun: true}, imported, "导入 customers.xlsx（替换）（试运行）", []string{"customers.xlsx"}},
		{&importer.Params{Filename: "my  file.csv", Mode: importer.ModeUpsert, DryRun: true}, imported, "导入 my file.csv（试运行）", []string{"my", "file.csv"}},
		{&importer.UndoParams{Import: "tsk_1", Filename: "customers.xlsx"}, undone, "撤销导入 customers.xlsx", []string{"customers.xlsx"}},
	} {
		typ := jobs.Type{Name: "title:test", Queue: "q", NewParams: func() jobs.Params { return tc.params }}
		reg := jobs.NewRegistry()
		reg.Register(typ)
		registered, _ := reg.Lookup("title:test")
		title := registered.TitleOf(tc.params)
		if want := tc.was(tc.params); title.Text != want {
			t.Errorf("%T %+v: English %q, was %q", tc.params, tc.params, title.Text, want)
		}
		if title.Message == nil || title.Message.Code == msg.CodePlain {
			t.Errorf("%T: the title %q is not a catalogue message", tc.params, title.Text)
			continue
		}
		zh := task.TitleText(title.Message.In(msg.ZH))
		if zh != tc.zh {
			t.Errorf("%T %+v: Chinese %q, want %q", tc.params, tc.params, zh, tc.zh)
		}
		rest := zh
		for _, v := range tc.data {
			rest = strings.ReplaceAll(rest, v, " ")
		}
		if w := regexp.MustCompile(`[A-Za-z]{2,}`).FindString(rest); w != "" {
			t.Errorf("%T: the Chinese %q leaves %q in English", tc.params, zh, w)
		}
	}
}
