package msg

// cliEntries are the words of the command-line client, tc. An English template is tc's text
// as it always was (scripts and tests read it), so it names only data as params; the
// Chinese one takes the names a person types (commands, flags, variables, values) as params
// too, so that no English word stands in it.
var cliEntries = map[string]entry{
	// ---- help ---------------------------------------------------------------------------
	"tc.usage_title": {"tc — the taskcenter command line", "{tc} — {product} 命令行"},
	"tc.usage":       {"usage: {synopsis}", "用法：{synopsis}"},
	"tc.help.import": {"import customers from .xlsx or .csv", "从 .xlsx 或 .csv 导入客户"},
	"tc.help.import_from": {"import an earlier import's file again",
		"再次导入之前某次导入的文件"},
	"tc.help.export":       {"export to .xlsx (-o to download when done)", "导出为 .xlsx（加 {o} 在完成后下载）"},
	"tc.help.submit":       {"submit a task of another type", "提交其他类型的任务"},
	"tc.help.ls":           {"list your tasks, newest first", "列出你的任务，最新的在前"},
	"tc.help.show":         {"a task with its attempts and log", "一个任务及其各次尝试和日志"},
	"tc.help.watch":        {"follow a task to its end", "跟随一个任务直到结束"},
	"tc.help.act":          {"cancel, or run again as a new attempt", "取消，或作为新的一次尝试重新运行"},
	"tc.help.undo":         {"undo a finished import (restore what it changed)", "撤销已结束的导入（恢复它改动的内容）"},
	"tc.help.download":     {"the result file (-o - for stdout)", "结果文件（{stdout} 输出到标准输出）"},
	"tc.help.error_report": {"an import's rejected rows as .xlsx", "导入中被拒绝的行，.xlsx 格式"},
	"tc.help.notes": {"The server and token come from TASKCENTER_URL (default http://localhost:8080) and\n" +
		"TASKCENTER_TOKEN, or --url and --token. --json prints the task as JSON for scripts.\n" +
		"With a terminal, --wait and watch draw a progress bar with the server's rows/s and ETA (a\n" +
		"waiting task: its place in line and expected start); otherwise they print a line per change. ls --search finds tasks by the start of their id or part of their\n" +
		"title or file name; --sort is created (newest first), duration (longest first) or failed\n" +
		"(most rejected rows first), reversed with a leading - (-created: oldest first). cancel and\n" +
		"retry take several ids and say what happened to each (exit 1 unless every one was done).\n" +
		"import --dry-run checks everything and writes nothing; --mode replace also removes the\n" +
		"customers the file does not hold, only when every row was accepted. undo ID starts the undo\n" +
		"of an import (asked again, the same undo comes back).\n" +
		"Exit codes: 0 SUCCESS, 2 PARTIAL_SUCCESS, 1 FAILED, TIMEOUT or CANCELLED (or a failed\n" +
		"request), 3 usage or authentication error, 130 interrupted (Ctrl-C: the task keeps running;\n" +
		"tc watch ID follows it again).\n" +
		"--lang en|zh picks the language tc speaks; without it TC_LANG, else LC_ALL, LC_MESSAGES or\n" +
		"LANG (zh_CN.UTF-8: Chinese); English by default.",
		"服务器和令牌来自 {url_env}（默认 {default_url}）和 {token_env}，或 {url_flag} 和 {token_flag}。\n" +
			"{json_flag} 把任务以 {json} 格式输出，供脚本读取。\n" +
			"在终端中，{wait_flag} 和 {watch} 会画出进度条，显示服务器算出的每秒行数和预计剩余时间（排队中的任务：\n" +
			"它在队列中的位置和预计开始时间）；否则每次变化打印一行。{ls_search} 按编号开头或标题、文件名的一部分查找任务；\n" +
			"{sort_flag} 可以是 {created}（最新的在前）、{duration}（最久的在前）或 {failed}（被拒绝的行最多的在前），\n" +
			"前面加 {minus} 则反过来（{minus_created}：最早的在前）。{cancel} 和 {retry} 可以接多个编号，并逐个说明结果\n" +
			"（除非每一个都完成，否则退出码为 1）。\n" +
			"{dry_run} 检查所有内容但不写入任何数据；{replace} 还会删除文件中没有的客户，但只在每一行都被接受时才删除。\n" +
			"{undo} 开始撤销一次导入（再次请求时返回同一个撤销任务）。\n" +
			"退出码：0 {success:status}，2 {partial:status}，1 {failed_s:status}、{timeout:status} 或 {cancelled:status}（或请求失败），\n" +
			"3 用法或认证错误，130 已中断（{ctrl_c}：任务继续运行；{watch_cmd} 可再次跟随它）。\n" +
			"{lang_flag} 选择 {tc} 使用的语言；未指定时依次读取 {tc_lang}、{lc_all}、{lc_messages} 或 {lang_env}\n" +
			"（{zh_cn}：中文）；默认英文。"},

	// ---- mistakes in the command line ----------------------------------------------------
	"tc.flag_error":      {"{error}", "参数有误：{error}"},
	"tc.flag_error_in":   {"{cmd}: {error}", "{cmd}：参数有误：{error}"},
	"tc.no_token":        {"no token: set TASKCENTER_TOKEN or pass --token", "没有令牌：请设置 {env} 或使用 {flag}"},
	"tc.unknown_command": {"unknown command {cmd}; run tc help", "未知命令 {cmd}；请运行 {help}"},
	"tc.bad_mode": {"--mode must be upsert, insert or replace",
		"{flag} 必须是 {upsert}（{upsert:mode}）、{insert}（{insert:mode}）或 {replace}（{replace:mode}）"},
	"tc.bad_column":    {"--column {arg}: write HEADER=FIELD, e.g. --column 联系电话=phone", "{flag} {arg}：请写成 {form}，例如 {example}"},
	"tc.column_twice":  {"--column names the header {header} twice", "{flag} 两次指定了表头 {header}"},
	"tc.cannot_read":   {"cannot read {file}: {error}", "无法读取 {file}：{error}"},
	"tc.bad_export":    {"export customers or export tasks, not {what}", "只能导出 {customers} 或 {tasks}，而不是 {what}"},
	"tc.bad_filter":    {"--filter takes key=value, not {arg}", "{flag} 的格式是 {form}，而不是 {arg}"},
	"tc.bad_params":    {"--params is not valid JSON: {params}", "{flag} 不是有效的 {json}：{params}"},
	"tc.token_refused": {"the server refused the token: check TASKCENTER_TOKEN (or --token)", "服务器拒绝了令牌：请检查 {env}（或 {flag}）"},

	// ---- submitting and following ----------------------------------------------------------
	"tc.submitted":              {"submitted {id} ({type}), {status}", "已提交 {id}（{type:type}），{status:status}"},
	"tc.already_submitted":      {"already submitted {id} ({type}), {status}", "已提交过 {id}（{type:type}），{status:status}"},
	"tc.submitted_wait":         {"submitted {id} ({type})", "已提交 {id}（{type:type}）"},
	"tc.already_submitted_wait": {"already submitted {id} ({type})", "已提交过 {id}（{type:type}）"},
	"tc.webhook_secret":         {"webhook {id} secret {secret} (shown once)", "Webhook {id} 的密钥 {secret}（只显示这一次）"},
	"tc.type":                   {"{type}", "{type:type}"},
	"tc.status":                 {"{status}", "{status:status}"},
	"tc.waiting":                {"waiting", "等待中"},
	"tc.retrying_soon":          {"retrying soon", "即将重试"},
	"tc.cancelling":             {"cancelling", "正在取消"},
	"tc.rate":                   {"{n} rows/s", "每秒 {n} 行"},
	"tc.eta":                    {"ETA {t}", "预计还需 {t}"},
	// The Chinese counts a place by its number: nothing reads {nth}, so n stands in.
	"tc.in_line":           {"{nth} in line", "排在第 {nth:tc|n} 位"},
	"tc.start_unknown":     {"start unknown (no recent work in the queue)", "开始时间未知（队列最近没有完成的任务）"},
	"tc.starts_in":         {"starts in ~{t}", "约 {t} 后开始"},
	"tc.line_rows":         {"{percent}% {current}/{total} rows", "{percent}% {current}/{total} 行"},
	"tc.list_sep":          {", ", "，"},
	"tc.hours":             {"{n}h", "{n} 小时"},
	"tc.minutes":           {"{n}m", "{n} 分"},
	"tc.seconds":           {"{n}s", "{n} 秒"},
	"tc.milliseconds":      {"{n}ms", "{n} 毫秒"},
	"tc.stopped_following": {"stopped following {id}; the task keeps running on the server.", "已停止跟随 {id}；任务仍在服务器上运行。"},
	"tc.follow_again":      {"{command}    follow it again", "{command}    再次跟随它"},
	"tc.stop_it":           {"{command}   stop it", "{command}   停止它"},
	"tc.interrupted":       {"interrupted", "已中断"},

	// ---- how a task ended --------------------------------------------------------------
	"tc.summary":        {"{status} {id} {type}{counts}{took}", "{status:status} {id} {type:type}{counts}{took}"},
	"tc.summary_counts": {": {total} rows, {success} ok, {failed} rejected", "：共 {total} 行，成功 {success}，拒绝 {failed}"},
	"tc.summary_rows":   {": {rows} rows", "：{rows} 行"},
	"tc.took":           {" in {duration}", "，用时 {duration}"},
	"tc.error":          {"error {code}: {message}", "错误：{code:error,problem|message}"},
	"tc.map_hint":       {"map the columns: {command}", "对应各列：{command}"},
	"tc.dry_run":        {"dry run: nothing was written", "试运行：未写入任何数据"},
	"tc.hint_undo":      {"undo: {command}", "撤销：{command}"},
	"tc.hint_download":  {"download: {command}", "下载：{command}"},
	"tc.hint_rejected":  {"rejected rows: {command}", "被拒绝的行：{command}"},
	"tc.request_failed": {"{error}", "请求失败：{error}"},
	"tc.try_again_in":   {"try again in {duration}", "请在 {duration} 后重试"},
	"tc.problem_ref":    {"({status} {code}, request {request})", "（{status} {code}，请求 {request}）"},
	"tc.wrote":          {"wrote {file} ({size} bytes)", "已写入 {file}（{size} 字节）"},
	"tc.cancel_running": {"RUNNING, cancel requested: it stops at its next batch", "{status:status}，已请求取消：将在下一批次时停止"},
	"tc.not_found":      {"{id} not found", "{id} 未找到"},
	"tc.not_cancelled":  {"{id} not cancelled: {reason}", "{id} 未取消：{reason}"},
	"tc.not_retried":    {"{id} not retried: {reason}", "{id} 未重试：{reason}"},

	// ---- ls and show -------------------------------------------------------------------
	"tc.col.id":          {"ID", "编号"},
	"tc.col.type":        {"TYPE", "类型"},
	"tc.col.status":      {"STATUS", "状态"},
	"tc.col.progress":    {"PROGRESS", "进度"},
	"tc.col.created":     {"CREATED", "创建时间"},
	"tc.ls_more":         {"{shown} of {total} tasks (--limit 0 for all)", "共 {total} 个任务，显示了 {shown} 个（{all} 显示全部）"},
	"tc.show_owner":      {"owner {owner}, queue {queue}, attempt {attempt} (retries {retries} of {max})", "所有者 {owner}，队列 {queue}，第 {attempt} 次尝试（已重试 {retries} 次，最多 {max} 次）"},
	"tc.show_progress":   {"progress {current}/{total} ({percent}%), rows {rows} ok {success} rejected {failed}", "进度 {current}/{total}（{percent}%），共 {rows} 行，成功 {success}，拒绝 {failed}"},
	"tc.show_speed":      {"speed {speed}", "速度 {speed}"},
	"tc.show_queue":      {"queue {where}", "队列 {where}"},
	"tc.show_created":    {"created {at}", "创建于 {at}"},
	"tc.show_finished":   {", finished {at}", "，结束于 {at}"},
	"tc.show_result":     {"result {name} ({rows} rows, {size} bytes)", "结果 {name}（{rows} 行，{size} 字节）"},
	"tc.show_report":     {"error report ({command})", "错误报告（{command}）"},
	"tc.show_expired":    {", expired", "，已过期"},
	"tc.show_until":      {", until {at}", "，保留至 {at}"},
	"tc.show_attempt":    {"attempt {attempt} ({trigger}) on {worker}: {status} {error}", "第 {attempt} 次尝试（{trigger:trigger}）在 {worker} 上：{status:status} {code:error,problem|error}"},
	"tc.log_level.debug": {"debug", "调试"},
	"tc.log_level.info":  {"info", "信息"},
	"tc.log_level.warn":  {"warn", "警告"},
	"tc.log_level.error": {"error", "错误"},
}
