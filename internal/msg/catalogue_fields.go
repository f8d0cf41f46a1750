package msg

// fieldEntries say why one field of a request was refused (problem details' errors[]). A
// field error names the field beside its message, so a message starts with the verb.
var fieldEntries = map[string]entry{
	// One field and what is wrong with it, as the web page lists them.
	"field_error.at": {"{field}: {what}", "{field}：{what}"},

	// ---- text values (internal/textcheck) ------------------------------------------------
	"field_error.utf8":          {"must be valid UTF-8", "必须是有效的 UTF-8 文本"},
	"field_error.control_chars": {"must not contain control characters", "不能包含控制字符"},
	"field_error.too_long":      {"must be at most {max} characters", "最多 {max} 个字符"},
	"field_error.one_of":        {"must be {choices} or {last}", "必须是 {choices} 或 {last}"},
	"field_error.some_of":       {"must list some of: {choices}", "只能列出以下各项中的若干项：{choices}"},
	"field_error.between":       {"must be between {from} and {to}", "必须在 {from} 与 {to} 之间"},
	"field_error.too_short":     {"must be at least {min} characters", "至少 {min} 个字符"},
	"field_error.empty":         {"must not be empty", "不能为空"},
	"field_error.future":        {"must be in the future", "必须是将来的时间"},

	// ---- export filters (jobs/export) ----------------------------------------------------
	"field_error.not_a_level":       {"{value} is not a level; use normal, silver, gold, platinum or diamond", "{value} 不是客户等级；请使用 normal、silver、gold、platinum 或 diamond"},
	"field_error.too_many_statuses": {"must list at most {max} statuses", "最多列出 {max} 个状态"},
	"field_error.not_a_status":      {"{value} is not a task status", "{value} 不是任务状态"},
	"field_error.too_many_types":    {"must list at most {max} types", "最多列出 {max} 个类型"},
	"field_error.before":            {"must be before {other}", "必须早于 {other}"},

	// ---- import choices and column mappings (jobs/importer) ------------------------------
	"field_error.not_an_import":          {"must be an import task", "必须是导入任务"},
	"field_error.columns_too_many":       {"map at most {max} columns, one per field", "最多对应 {max} 列，每个字段一列"},
	"field_error.columns_empty_header":   {"a header in columns is empty", "列对应关系中有空的表头"},
	"field_error.columns_header":         {"header {header} {reason:field_error}", "表头 {header}：{reason:field_error}"},
	"field_error.columns_not_a_field":    {"columns[{header}]: {value} is not a field; the fields are {fields}", "列对应关系中的 {header}：{value} 不是字段；字段有 {fields}"},
	"field_error.columns_field_twice":    {"columns maps both {first} and {second} to {field}; map each field once", "列对应关系把 {first} 和 {second} 都对应到了{field:field}；每个字段只能对应一次"},
	"field_error.columns_header_twice":   {"columns names the header {header} twice (as {first} and {second})", "列对应关系两次提到表头 {header}（作为 {first} 和 {second}）"},
	"field_error.columns_not_json":       {`columns must be a JSON object of header to field, e.g. {"联系电话": "phone"}`, `列对应关系必须是从表头到字段的 JSON 对象，例如 {"联系电话": "phone"}`},
	"field_error.columns_unknown_header": {"columns names {missing}, which is not a header of the file; its headers are: {headers}", "列对应关系中的 {missing} 不是文件的表头；文件的表头有：{headers}"},

	// ---- request parameters and JSON bodies (httpapi/request) -----------------------------
	"field_error.rfc3339":             {"must be an RFC 3339 time such as {example}", "必须是 RFC 3339 格式的时间，例如 {example}"},
	"field_error.number_range":        {"must be a number from {min} to {max}", "必须是 {min} 到 {max} 之间的数字"},
	"field_error.bad_cursor":          {"is not a cursor this API returned", "不是本接口返回的翻页游标"},
	"field_error.not_a_field":         {"is not a field here", "不是此处的字段"},
	"field_error.json_type":           {"must not be a JSON {type}", "不能是 JSON {type}"},
	"field_error.json_too_deep":       {"is nested deeper than {max} levels", "嵌套超过了 {max} 层"},
	"field_error.nul":                 {"must not contain a NUL character", "不能包含空字符（NUL）"},
	"field_error.number_out_of_range": {"is a number out of range", "数字超出范围"},
	"field_error.nul_in_name":         {"has a NUL character in its name", "名称中含有空字符（NUL）"},
	"field_error.key_twice":           {"appears twice; send each key once", "出现了两次；每个键只能发送一次"},

	// ---- the API's own fields (httpapi) ----------------------------------------------------
	"field_error.date_or_time":        {"must be a date ({example}) or an RFC 3339 time", "必须是日期（{example}）或 RFC 3339 格式的时间"},
	"field_error.span_days":           {"the range may span at most {days} days", "时间范围最多 {days} 天"},
	"field_error.cursor_sort":         {"continues the sort {was}, not {sort}: start the listing again without a cursor", "该游标属于排序 {was}，而不是 {sort}：请不带游标重新开始列出"},
	"field_error.attempt":             {"must be an attempt number, 1 or more", "必须是尝试序号，从 1 开始"},
	"field_error.event_id":            {"must be a whole number ≥ 0", "必须是大于或等于 0 的整数"},
	"field_error.priority":            {"must be from {first} (runs first) to {last} (runs last)", "必须在 {first}（最先运行）到 {last}（最后运行）之间"},
	"field_error.title_text":          {"must be text (UTF-8, no NUL)", "必须是文本（UTF-8，不含 NUL 字符）"},
	"field_error.tasks_count":         {"must hold from 1 to {max} tasks", "必须包含 1 到 {max} 个任务"},
	"field_error.ids_count":           {"must hold from 1 to {max} task ids (it holds {n})", "必须包含 1 到 {max} 个任务编号（此处有 {n} 个）"},
	"field_error.from_task_required":  {"is required: the id of the import task whose file to import again", "必填：要重新导入其文件的导入任务的编号"},
	"field_error.others_tasks":        {"only an admin can list other users' tasks", "只有管理员可以列出其他用户的任务"},
	"field_error.others_schedules":    {"only an admin can list other users' schedules", "只有管理员可以列出其他用户的计划"},
	"field_error.others_tokens":       {"only an admin can list other users' tokens", "只有管理员可以列出其他用户的令牌"},
	"field_error.others_webhooks":     {"only an admin can list other users' webhooks", "只有管理员可以列出其他用户的 Webhook"},
	"field_error.follow_others":       {"only an admin can follow other users' tasks", "只有管理员可以关注其他用户的任务"},
	"field_error.token_name_required": {`is required: what the token is for, e.g. "nightly export job"`, "必填：令牌的用途，例如“每晚导出任务”"},
	"field_error.not_a_scope":         {"{value} is not a scope; use {scopes}", "{value} 不是权限范围；请使用 {scopes}"},
	"field_error.scope_required":      {"name at least one of {scopes}", "请至少指定其中之一：{scopes}"},
	"field_error.token_ttl":           {"may be at most {max} from now ({setting})", "最多为从现在起的 {max}（{setting}）"},
	"field_error.unknown_event":       {"unknown event {value}", "未知事件 {value}"},

	// ---- schedules (jobs/schedule, httpapi) ------------------------------------------------
	"field_error.cron_required":      {`is required, e.g. "0 9 * * 1" (Mondays 09:00)`, `必填，例如 "0 9 * * 1"（每周一 09:00）`},
	"field_error.not_a_timezone":     {"timezone {value} is not a time zone such as {a} or {b}", "{value} 不是时区，应为 {a} 或 {b} 这样的时区"},
	"field_error.cron_timezone":      {"{field} must not carry its own time zone; use the {other} field", "{field} 不能自带时区；请使用 {other} 字段"},
	"field_error.not_a_cron":         {`cron {value} is not a cron spec such as "0 9 * * 1" (Mondays 09:00) or {every}`, `{value} 不是定时表达式，应为 "0 9 * * 1"（每周一 09:00）或 {every} 这样的表达式`},
	"field_error.cron_too_often":     {"cron {value} fires every {gap} at times; a schedule may fire at most once every {min} ({setting})", "定时表达式 {value} 有时每 {gap} 就触发一次；计划最多每 {min} 触发一次（{setting}）"},
	"field_error.min_interval":       {"must be a duration of at least {min}, such as {a} or {b}", "必须是至少 {min} 的时长，例如 {a} 或 {b}"},
	"field_error.min_interval_admin": {"only an admin may set it; schedules fire at most once every {min}", "只有管理员可以设置；计划最多每 {min} 触发一次"},

	// ---- webhook URLs (jobs/webhook's policy) ----------------------------------------------
	"field_error.url_too_long":         {"the URL is longer than {max} characters", "网址超过 {max} 个字符"},
	"field_error.url_not_absolute":     {"the URL must be an absolute {http} or {https} URL", "网址必须是以 {http} 或 {https} 开头的完整网址"},
	"field_error.url_user":             {"the URL must not carry a user name or password; the signature authenticates deliveries", "网址不能包含用户名或密码；投递由签名认证"},
	"field_error.url_fragment":         {"the URL must not have a #fragment", "网址不能带有 # 片段"},
	"field_error.url_no_host":          {"the URL has no host", "网址没有主机名"},
	"field_error.url_host_not_allowed": {"{host} is not in {setting}; ask an admin to add it", "{host} 不在 {setting} 中；请让管理员添加"},
	"field_error.url_no_address":       {"{host} does not resolve to an address", "{host} 无法解析为地址"},
	"field_error.url_private":          {"{address} is a loopback, private or link-local address; only an address or range in {setting} may be one", "{address} 是回环、私有或链路本地地址；只有 {setting} 中列出的地址或网段可以是这类地址"},
	"field_error.url_unchecked":        {"cannot check the address {address}", "无法检查地址 {address}"},
}
