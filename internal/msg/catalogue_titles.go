package msg

// titleEntries are the titles the product gives the tasks it names itself (a user's own title
// stays their text): "title.<what>", with the clauses a title says when its params have them
// ("title_<clause>.<variant>", empty when a param is ""; in Chinese the first clause follows
// a colon and the next ones a comma, so a variant says which it is), and the separator of the
// lists they name.
var titleEntries = map[string]entry{
	codeListSep: {", ", "、"},

	"title.export_customers": {"Customers{city_part:title_city}{level_part:title_level}{code_prefix_part:title_codes}",
		"客户导出{city_part:title_city}{level_part:title_level}{code_prefix_part:title_codes}"},
	"title_city.first":  {" in {city}", "：{city}"},
	"title_level.first": {", level {level}", "：{level:level}"},
	"title_level.next":  {", level {level}", "，{level:level}"},
	"title_codes.first": {", codes {code_prefix}…", "：编号 {code_prefix}…"},
	"title_codes.next":  {", codes {code_prefix}…", "，编号 {code_prefix}…"},

	"title.export_tasks":        {"Tasks{owner_part:title_owner}{statuses_part:title_statuses}", "任务列表导出{owner_part:title_owner}{statuses_part:title_statuses}"},
	"title_owner.first":         {" of {owner}", "：{owner}"},
	"title_statuses.first":      {" with status {statuses:status*}", "：状态为{statuses:status*}"},
	"title_statuses.next":       {", status {statuses:status*}", "，状态为{statuses:status*}"},
	"title.customer_stats":      {"Customer statistics (imports over {days} days)", "客户统计报表（近 {days} 天的导入）"},
	"title.import":              {"Import {filename}{mode:title_import_mode}{dry_run:title_import_dry}", "导入 {filename}{mode:title_import_mode}{dry_run:title_import_dry}"},
	"title_import_mode.insert":  {" (insert only)", "（{mode:mode}）"},
	"title_import_mode.replace": {" (replace)", "（{mode:mode}）"},
	"title_import_dry.dry_run":  {" (dry run)", "（试运行）"},
	"title.import_undo":         {"Undo import {filename}", "撤销导入 {filename}"},
}
