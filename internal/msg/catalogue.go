package msg

// catalogue is every message the product says to a person, code → English and 简体中文
// template. It is the one home of these words: Go renders from it, and the web page gets it
// whole (Texts). Codes are grouped by the first part of their name:
//
//   - status, trigger, type, mode, level, field: enum values as a person reads them
//     (templates refer to them as {name:status}, {name:trigger}…);
//   - log: task log lines;
//   - error: why a task or an attempt failed (tasks.error_code, with error_params);
//   - problem: API refusals (problem+json code, with params);
//   - row: rejected-row messages of an import (task_items, first_errors, error reports);
//   - reason: a row message said of many rows, without their values (the breakdown by
//     field and reason);
//   - export, report: exported files' headers and sheet names.
//
// An English template, rendered, is the exact text stored and sent before codes existed:
// clients and tests read those words, so they do not change.
var catalogue = joinEntries(coreEntries, titleEntries, fieldEntries, cliEntries)

// coreEntries are the enum values, log lines, errors, problems, rows and exported words.
var coreEntries = map[string]entry{
	CodePlain: {"{text}", "{text}"},

	// ---- enum values -------------------------------------------------------------------
	"status.PENDING":          {"Pending", "排队中"},
	"status.RUNNING":          {"Running", "运行中"},
	"status.RETRY_WAIT":       {"Waiting to retry", "等待重试"},
	"status.SUCCESS":          {"Succeeded", "成功"},
	"status.PARTIAL_SUCCESS":  {"Partially succeeded", "部分成功"},
	"status.FAILED":           {"Failed", "失败"},
	"status.TIMEOUT":          {"Timed out", "超时"},
	"status.CANCELLED":        {"Cancelled", "已取消"},
	"status.SUPERSEDED":       {"Superseded", "已被接替"},
	"status.cancel_requested": {"cancelling…", "正在取消…"},

	"trigger.first":        {"first run", "首次执行"},
	"trigger.manual_retry": {"manual retry", "手动重试"},
	"trigger.resume":       {"resume", "恢复"},
	"trigger.retry":        {"automatic retry", "自动重试"},
	"trigger.takeover":     {"takeover", "接管"},

	"type.export:customers":      {"Customer export", "客户导出"},
	"type.export:tasks":          {"Task list export", "任务列表导出"},
	"type.import:customers":      {"Customer import", "客户导入"},
	"type.report:customer-stats": {"Customer statistics", "客户统计报表"},
	"type.maintenance:cleanup":   {"Cleanup", "清理"},
	"type.bench:noop":            {"No-op", "空任务"},
	"mode.insert":                {"insert", "仅新增"},
	"mode.upsert":                {"upsert", "新增或更新"},
	"mode.replace":               {"replace", "替换"},
	"problem.bad_columns":        {"The column mapping is not valid.", "列对应关系无效。"},
	"problem.not_an_import":      {"Only an import can be imported again.", "只有导入任务可以重新导入。"},
	"problem.unknown_column":     {"The column mapping names a header the file does not have.", "列对应关系中的表头在文件中不存在。"},
	"problem.upload_missing":     {"The uploaded file is no longer kept; upload it again.", "上传的文件已不再保留，请重新上传。"},
	"type.import:customers-undo": {"Import undo", "导入撤销"},
	"level.diamond":              {"Diamond", "钻石"},
	"level.gold":                 {"Gold", "黄金"},
	"level.normal":               {"Normal", "普通"},
	"level.platinum":             {"Platinum", "铂金"},
	"level.silver":               {"Silver", "白银"},
	"field.city":                 {"city", "城市"},
	"field.code":                 {"code", "客户编号"},
	"field.email":                {"email", "邮箱"},
	"field.level":                {"level", "等级"},
	"field.name":                 {"name", "客户名称"},
	"field.phone":                {"phone", "手机号"},
	"interrupt.draining":         {"worker shutting down", "执行节点正在关闭"},
	"interrupt.lease_lost":       {"worker lost its queue lease", "执行节点失去了队列租约"},
	"error.retries_exhausted":    {"the task failed too many times and was given up", "任务多次失败，已放弃"},
	"error.timeout":              {"the task stopped reporting progress and timed out", "任务长时间没有报告进展，已超时"},
	"error.all_rows_rejected":    {"all {total} rows were rejected; nothing was imported (the error report says why for each row)", "全部 {total} 行均被拒绝，未导入任何数据（错误报告中有每一行的原因）"},
	"error.no_rows":              {"the sheet has a header row but no data rows below it", "工作表只有表头，下面没有数据行"},
	"error.too_many_rows":        {"the export would contain {total} rows, more than the limit of {limit}; narrow the filter", "导出将包含 {total} 行，超过 {limit} 行的上限；请缩小筛选范围"},
	"error.interrupted":          {"the worker stopped before the task ended; it resumes", "执行节点在任务结束前停止；任务将继续"},
	"error.transient":            {"a temporary error interrupted the task", "一次临时故障中断了任务"},
	"error.bad_data":             {"the task's data cannot be processed", "任务的数据无法处理"},
	"error.bad_filter":           {"the filter is not valid", "筛选条件无效"},
	"error.bad_params":           {"the task's parameters are not valid", "任务参数无效"},
	"error.forbidden_owner":      {"only an admin can export other users' tasks", "只有管理员可以导出其他用户的任务"},
	"error.stalled":              {"the task stalled: it made no progress and was stopped; it can be retried", "任务停滞：长时间没有进展，已被停止；可以重试"},
	"error.superseded":           {"another worker took the task over", "另一个执行节点接管了该任务"},
	"log.attempt_started":        {"attempt {attempt} started on {worker} ({trigger})", "第 {attempt} 次尝试在 {worker} 上开始（{trigger:trigger}）"},
	"log.cancelled_unresponsive": {"cancelled as requested; its worker had stopped responding", "已按请求取消；其执行节点已失去响应"},
	"log.cancelled_unreported":   {"cancelled as requested; its worker had stopped reporting", "已按请求取消；其执行节点已停止报告"},
	"log.cancelled_ending":       {"cancelled as requested; the attempt was ending: {then}", "已按请求取消；该次尝试当时正在结束：{then_code:log|then}"},
	"log.cancelled_running":      {"cancelled while running", "运行中被取消"},
	"log.cancel_requested_by":    {"cancel requested by {who}", "{who} 请求取消"},
	"log.cancelled_by":           {"cancelled by {who}", "{who} 已取消"},
	"log.retry_requested_by":     {"retry requested by {who}", "{who} 请求重试"},
	"log.retry_expedited_by":     {"retry brought forward by {who}", "{who} 将重试提前"},
	"log.failed":                 {"failed: {error}", "失败：{code:error,problem|error}"},
	"log.retrying":               {"attempt failed, retrying in {delay}: {error}", "该次尝试失败，{delay} 后重试：{code:error,problem|error}"},
	"log.interrupted":            {"interrupted, will resume: {reason:interrupt}", "已中断，将继续：{reason:interrupt}"},
	"log.timed_out":              {"timed out: {error}", "超时：{code:error,problem|error}"},
	"log.timed_out_stale":        {"timed out: no heartbeat for {seconds}s", "超时：{seconds} 秒没有心跳"},
	"log.cancel_after_work":      {"the cancel came after the work was done; the task ends by its outcome", "取消请求在工作完成之后才到达；任务按其结果结束"},
	"log.cancel_too_late":        {"cancel requested after the last rows were written: the import is complete, so it ends with its own outcome (the cancel came too late)", "取消请求在最后的行写入之后才到达：导入已完成，因此按其结果结束（取消来得太晚）"},
	"log.import_summary":         {"{head:import_head}{removal:import_removal}{cut:import_cut}", "{head:import_head}{removal:import_removal}{cut:import_cut}"},
	"log.cancel_before_removal":  {"cancelled before the customers not in the file were removed: nothing removed", "在删除文件之外的客户之前已取消：未删除任何客户"},
	"log.removed_missing":        {"removed {removed} customers not in the file", "已删除不在文件中的 {removed} 个客户"},
	"log.saved_mapping_applied":  {"applied your saved column mapping from {at}", "已应用你在 {at} 保存的列对应关系"},
	"log.mapping_saved":          {"saved your column mapping for files with these headers", "已为具有这些表头的文件保存你的列对应关系"},
	"log.undone":                 {"undid import {import}: restored {success} customers to what they were before it; {failed} were changed since and left as they are", "已撤销导入 {import}：{success} 个客户已恢复为导入前的样子；{failed} 个之后又被修改，保持现状"},
	"log.undone_nothing":         {"undid import {import}: it changed no customer, so nothing was restored", "已撤销导入 {import}：该导入未改变任何客户，因此没有需要恢复的内容"},

	"import_head.imported":         {"imported {success} of {total} rows ({inserted} inserted, {updated} updated, {unchanged} unchanged); {failed} failed", "已导入 {total} 行中的 {success} 行（新增 {inserted}，更新 {updated}，未变 {unchanged}）；{failed} 行失败"},
	"import_head.dry_run":          {"dry run, nothing was written: {success} of {total} rows would be imported ({inserted} inserted, {updated} updated, {unchanged} unchanged); {failed} would be rejected", "试运行，未写入任何数据：{total} 行中的 {success} 行将被导入（新增 {inserted}，更新 {updated}，未变 {unchanged}）；{failed} 行将被拒绝"},
	"import_head.all_rejected":     {"all {total} rows were rejected; nothing was imported (the error report says why for each row)", "全部 {total} 行均被拒绝，未导入任何数据（错误报告中有每一行的原因）"},
	"import_head.dry_all_rejected": {"dry run: all {total} rows would be rejected; nothing was written (the error report says why for each row)", "试运行：全部 {total} 行都将被拒绝，未写入任何数据（错误报告中有每一行的原因）"},
	"import_removal.removed":       {"; removed {removed} customers not in the file", "；已删除不在文件中的 {removed} 个客户"},
	"import_removal.dry_removed":   {"; {removed} customers not in the file would be removed", "；不在文件中的 {removed} 个客户将被删除"},
	"import_removal.rejected":      {"; {removal:nothing_removed}", "；{removal:nothing_removed}"},
	"import_removal.dry_rejected":  {"; {removal:nothing_removed}", "；{removal:nothing_removed}"},
	"import_removal.cut":           {"; {removal:nothing_removed}", "；{removal:nothing_removed}"},
	"import_removal.dry_cut":       {"; {removal:nothing_removed}", "；{removal:nothing_removed}"},
	"import_removal.no_rows":       {"; {removal:nothing_removed}", "；{removal:nothing_removed}"},
	"import_removal.dry_no_rows":   {"; {removal:nothing_removed}", "；{removal:nothing_removed}"},
	// Why a replace removed no customer: the summary's clause above and the result's
	// nothing_removed.
	"nothing_removed.rejected":     {"nothing removed: {failed} rows were rejected", "未删除任何客户：{failed} 行被拒绝"},
	"nothing_removed.dry_rejected": {"nothing would be removed: {failed} rows were rejected", "不会删除任何客户：{failed} 行被拒绝"},
	"nothing_removed.cut":          {"nothing removed: the file was not read to its end", "未删除任何客户：文件未被读完"},
	"nothing_removed.dry_cut":      {"nothing would be removed: the file was not read to its end", "不会删除任何客户：文件未被读完"},
	"nothing_removed.no_rows":      {"nothing removed: the file has no rows", "未删除任何客户：文件没有数据行"},
	"nothing_removed.dry_no_rows":  {"nothing would be removed: the file has no rows", "不会删除任何客户：文件没有数据行"},
	"import_cut.cut":               {"; " + rowLimitEN, "；" + rowLimitZH},
	"log.resuming":                 {"resuming after row {row}", "从第 {row} 行之后继续"},
	"log.imported":                 {"imported {success} of {total} rows; {failed} failed", "已导入 {total} 行中的 {success} 行；{failed} 行失败"},
	"log.imported_cut":             {"imported {success} of {total} rows; {failed} failed; " + rowLimitEN, "已导入 {total} 行中的 {success} 行；{failed} 行失败；" + rowLimitZH},
	"log.all_rejected":             {"all {total} rows were rejected; nothing was imported (the error report says why for each row)", "全部 {total} 行均被拒绝，未导入任何数据（错误报告中有每一行的原因）"},
	"log.all_rejected_cut":         {"all {total} rows were rejected; nothing was imported (the error report says why for each row); " + rowLimitEN, "全部 {total} 行均被拒绝，未导入任何数据（错误报告中有每一行的原因）；" + rowLimitZH},
	"log.row_limit":                {rowLimitEN, rowLimitZH},
	"log.exported":                 {"exported {rows} rows", "已导出 {rows} 行"},
	"log.reported":                 {"reported {rows} rows on {sheets} sheets", "已在 {sheets} 个工作表中写入 {rows} 行"},

	// ---- API refusals: the problem+json code; a template with params reads as the detail
	"problem.bad_filter":             {"The filter is not valid.", "筛选条件无效。"},
	"problem.bad_mode":               {"Choose upsert or insert.", "请选择“新增或更新”或“仅新增”。"},
	"problem.body_too_slow":          {"The upload was too slow and was stopped.", "上传速度过慢，已被中止。"},
	"problem.csrf_failed":            {"The page is out of date; reload it and try again.", "页面已过期，请刷新后重试。"},
	"problem.damaged_file":           {"The file is damaged and cannot be read.", "文件已损坏，无法读取。"},
	"problem.empty_file":             {"The file is empty.", "文件是空的。"},
	"problem.missing_columns":        {"The header lacks required columns.", "表头缺少必需的列。"},
	"problem.missing_header":         {"No header row was found.", "未找到表头行。"},
	"problem.no_sheets":              {"The workbook has no sheets.", "工作簿中没有工作表。"},
	"problem.not_utf8":               {"The CSV is not UTF-8: save it as \"CSV UTF-8\" or upload the .xlsx.", "CSV 不是 UTF-8 编码：请另存为“CSV UTF-8”或上传 .xlsx。"},
	"problem.owner_waiting_limit":    {"You already have the most waiting tasks allowed; wait for some to finish.", "你排队中的任务已达上限，请等待部分任务完成。"},
	"problem.queue_busy":             {"The queue is busy; try again in a moment.", "队列繁忙，请稍后再试。"},
	"problem.report_expired":         {"The error report has expired.", "错误报告已过期。"},
	"problem.result_expired":         {"The result has expired; export again.", "结果文件已过期，请重新导出。"},
	"problem.row_too_large":          {"A row is too large.", "某一行过大。"},
	"problem.sheet_not_found":        {"That sheet is not in the file.", "文件中没有该工作表。"},
	"problem.status_conflict":        {"The task's status does not allow this any more.", "任务当前状态（{status:status}）已不允许{op:op}。"},
	"op.cancel":                      {"cancel", "取消"},
	"op.retry":                       {"retry", "重试"},
	"op.run now":                     {"run now", "立即运行"},
	"problem.task_not_found":         {"Not found: no task with this id is visible to you.", "未找到：没有你可以查看的此编号任务。"},
	"problem.too_large":              {"The file is larger than the {limit} {unit:size_unit} upload limit.", "文件超过了 {limit} {unit:size_unit} 的上传大小限制。"},
	"size_unit.MB":                   {"MB", "MB"},
	"size_unit.KB":                   {"KB", "KB"},
	"size_unit.bytes":                {"bytes", "字节"},
	"problem.too_large_uncompressed": {"The file expands to more than the server allows.", "文件解压后超过服务器允许的大小。"},
	"problem.too_many_columns":       {"The sheet has too many columns.", "工作表的列数过多。"},
	"problem.too_many_rows":          {"The file has more rows than allowed.", "文件行数超过上限。"},
	"problem.too_many_streams":       {"Too many open pages; close some.", "打开的页面过多，请关闭一些。"},
	"problem.too_many_uploads":       {"You have too many uploads in progress; wait for one to finish.", "你同时上传的文件过多，请等待其中一个完成。"},
	"problem.unavailable":            {"The service is temporarily unavailable; try again shortly.", "服务暂时不可用，请稍后再试。"},
	"problem.unsupported_format":     {"This is not a spreadsheet: upload an .xlsx or a UTF-8 .csv.", "这不是表格文件：请上传 .xlsx 或 UTF-8 编码的 .csv。"},
	"problem.no_error_report":        {"this task has no error report: no row was rejected", "此任务没有错误报告：没有被拒绝的行"},
	"problem.report_not_ready":       {"the task is {status}; the error report is written when it ends", "任务状态为{status:status}；错误报告在任务结束时生成"},
	"problem.result_not_ready":       {"the task is {status}; the result is not ready yet", "任务状态为{status:status}；结果尚未就绪"},
	"problem.no_result":              {"the task ended {status} without a result file", "任务以{status:status}结束，没有结果文件"},
	"problem.webhook_not_found":      {"no webhook with this id is visible to you", "没有你可以查看的此编号 Webhook"},
	"problem.schedule_not_found":     {"no schedule with this id is visible to you", "没有你可以查看的此编号计划"},
	"problem.token_not_found":        {"no token with this id is visible to you", "没有你可以查看的此编号令牌"},
	"problem.delivery_not_found":     {"this webhook has no delivery with this id", "此 Webhook 没有该编号的投递记录"},
	"problem.database_timeout":       {"the task database did not answer in time; try again shortly", "任务数据库未能及时响应，请稍后再试"},
	"problem.database_unavailable":   {"the task database cannot be reached; try again shortly", "无法连接任务数据库，请稍后再试"},
	"problem.internal":               {"an internal error occurred; quote the request id when reporting it", "发生内部错误；报告问题时请提供请求编号"},
	"problem.unauthorized":           {"send a valid token: Authorization: Bearer <token>", "请提供有效的令牌：Authorization: Bearer <token>"},
	"problem.forbidden":              {"you may not do this", "你无权执行此操作"},
	"problem.invalid_ids":            {"some ids cannot be task ids", "部分编号不可能是任务编号"},
	"problem.unknown_type":           {"that is not a task type you can submit", "这不是你可以提交的任务类型"},
	"problem.idempotency_key_reused": {"the Idempotency-Key was used before with another request", "该 Idempotency-Key 已用于另一个请求"},
	"problem.no_route":               {"no such endpoint", "没有这个接口"},
	"problem.streams_unavailable":    {"live events are not available now; the page refreshes by itself", "实时事件暂不可用；页面会自动刷新"},
	"problem.body_too_large":         {"the request body is too large", "请求内容过大"},
	"problem.invalid_upload":         {"the upload form is not valid", "上传表单无效"},
	"problem.bad_sheet":              {"that sheet cannot be used", "无法使用该工作表"},
	"problem.bad_encoding":           {"the encoding must be utf-8, gb18030 or auto", "编码必须是 utf-8、gb18030 或 auto"},
	"problem.all_rows_rejected":      {"every row of this import was rejected; fix the rows and upload the file anew", "本次导入的每一行都被拒绝了；请修正后重新上传文件"},

	// ---- rejected rows ----------------------------------------------------------------
	"row.at":               {"row {n}, {what}", "第 {n} 行，{what}"},
	"row.prefix":           {"row {n}", "第 {n} 行"},
	"row.part":             {"{field}: {what}", "{field:field}：{what}"},
	"row.sep":              {"; ", "；"},
	"row.required":         {"is required", "必填"},
	"row.code":             {codeRuleEN + ", starting with a letter or digit", codeRuleZH + "，并以字母或数字开头"},
	"row.phone":            {phoneRuleEN, phoneRuleZH},
	"row.email":            {"is not a valid email address", "不是有效的邮箱地址"},
	"row.level":            {levelRuleEN, levelRuleZH},
	"row.too_long":         {"must be at most {max} characters (this one has {n})", "最多 {max} 个字符（此处有 {n} 个）"},
	"row.rounded":          {"{value} is a rounded number; format the column as text and enter all 11 digits", "{value} 是被四舍五入的数字；请把该列设为文本格式，并填写完整的 11 位号码"},
	"row.duplicate":        {"{value} already appears in row {row}", "{value} 已在第 {row} 行出现"},
	"row.exists":           {"{value} already exists", "{value} 已存在"},
	"row.cut_code":         {codeRuleEN + cutEN, codeRuleZH + cutZH},
	"row.cut_phone":        {phoneRuleEN + cutEN, phoneRuleZH + cutZH},
	"row.cut_level":        {levelRuleEN + cutEN, levelRuleZH + cutZH},
	"row.cut_text":         {"must be at most {max} characters (this one has more than {n})", "最多 {max} 个字符（此处超过 {n} 个字符）"},
	"row.changed_since":    {"{value} was changed after the import; left as it is", "{value} 在导入之后又被修改，保持现状"},
	"row.deleted_since":    {"{value} was deleted after the import; not restored", "{value} 在导入之后被删除，未恢复"},
	"row.added_since":      {"{value} was added again after the import removed it; left as it is", "{value} 被导入删除后又被重新添加，保持现状"},
	"report.row":           {"row", "行号"},
	"report.field":         {"field", "字段"},
	"report.reason":        {"reason", "原因"},
	"report.errors_sheet":  {"errors", "错误"},
	"report.summary_sheet": {"summary", "汇总"},
	"report.rejected_rows": {"rejected rows", "被拒行数"},

	// ---- reasons: a row message said of many rows, without the values each row's names
	// (the breakdown by field and reason, when its rows' params differ) -------------------
	"reason.too_long":      {"is too long", "过长"},
	"reason.rounded":       {"is a rounded number; format the column as text and enter all 11 digits", "是被四舍五入的数字；请把该列设为文本格式，并填写完整的 11 位号码"},
	"reason.duplicate":     {"already appears in an earlier row", "已在前面的行出现"},
	"reason.exists":        {"already exists", "已存在"},
	"reason.cut_code":      {codeRuleEN + cutAnyEN, codeRuleZH + cutAnyZH},
	"reason.cut_phone":     {phoneRuleEN + cutAnyEN, phoneRuleZH + cutAnyZH},
	"reason.cut_level":     {levelRuleEN + cutAnyEN, levelRuleZH + cutAnyZH},
	"reason.cut_text":      {"is longer than a cell may be", "超过单元格的长度上限"},
	"reason.changed_since": {"was changed after the import; left as it is", "在导入之后又被修改，保持现状"},
	"reason.deleted_since": {"was deleted after the import; not restored", "在导入之后被删除，未恢复"},
	"reason.added_since":   {"was added again after the import removed it; left as it is", "被导入删除后又被重新添加，保持现状"},
	"export.sheet":         {"Sheet1", "数据"},
	"export.col.code":      {"code", "客户编号"},

	"export.col.name":             {"name", "客户名称"},
	"export.col.phone":            {"phone", "手机号"},
	"export.col.email":            {"email", "邮箱"},
	"export.col.city":             {"city", "城市"},
	"export.col.level":            {"level", "等级"},
	"export.col.updated_at":       {"updated_at", "更新时间"},
	"export.col.task_no":          {"task_no", "任务编号"},
	"export.col.type":             {"type", "类型"},
	"export.col.owner":            {"owner", "所有者"},
	"export.col.status":           {"status", "状态"},
	"export.col.progress_current": {"progress_current", "当前进度"},
	"export.col.progress_total":   {"progress_total", "进度总数"},
	"export.col.total":            {"total", "总行数"},
	"export.col.success":          {"success", "成功行数"},
	"export.col.failed":           {"failed", "失败行数"},
	"export.col.attempts":         {"attempts", "尝试次数"},
	"export.col.error":            {"error", "错误"},
	"export.col.created_at":       {"created_at", "创建时间"},
	"export.col.started_at":       {"started_at", "开始时间"},
	"export.col.finished_at":      {"finished_at", "结束时间"},
	"export.col.title":            {"title", "标题"},

	// ---- what an import did to the customers, one figure at a time (the page and tc join
	// them, and a dry run's list reads as what it would do)
	"import_split.inserted":  {"{n} inserted", "新增 {n}"},
	"import_split.updated":   {"{n} updated", "更新 {n}"},
	"import_split.unchanged": {"{n} unchanged", "未变 {n}"},
	"import_split.removed":   {"{n} removed", "删除 {n}"},
	"import_split.would":     {"would be: {list}", "预计：{list}"},
}

const (
	levelRuleEN = "must be normal, silver, gold, platinum or diamond (普通, 白银, 黄金, 铂金, 钻石)"
	levelRuleZH = "必须是 普通、白银、黄金、铂金 或 钻石（normal、silver、gold、platinum、diamond）"
	codeRuleEN  = "must be 1 to 32 letters, digits, '-' or '_'"
	codeRuleZH  = "必须是 1 到 32 个字母、数字、“-”或“_”"
	phoneRuleEN = "must be 11 digits starting with 1"
	phoneRuleZH = "必须是以 1 开头的 11 位数字"
	cutEN       = " (this one has more than {n})"
	cutZH       = "（此处超过 {n} 个字符）"
	cutAnyEN    = " (this one is longer than a cell may be)"
	cutAnyZH    = "（此处超过单元格的长度上限）"
	rowLimitEN  = "rows after row {last_row} were not imported: the sheet has more than {limit} data rows, the most one import takes; split the file and import the rest"
	rowLimitZH  = "第 {last_row} 行之后的行未导入：工作表超过 {limit} 行数据，这是单次导入的上限；请拆分文件后导入其余部分"
)

// joinEntries is the catalogue made of its parts (one file each); a code defined in two
// parts is a mistake caught when the package loads.
func joinEntries(parts ...map[string]entry) map[string]entry {
	out := make(map[string]entry)
	for _, part := range parts {
		for code, e := range part {
			if _, dup := out[code]; dup {
				panic("msg: the catalogue defines " + code + " twice")
			}
			out[code] = e
		}
	}
	return out
}
