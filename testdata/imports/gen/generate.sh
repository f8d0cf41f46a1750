#!/usr/bin/env bash
# Regenerates the committed import fixtures from messy.json with real producers.
set -euo pipefail
cd "$(dirname "$0")/.."
NODE_DIR=${NODE_DIR:-/tmp/npmgen}
/usr/bin/python3 gen/openpyxl_gen.py messy.json messy-openpyxl.xlsx
NODE_PATH=$NODE_DIR/node_modules node gen/exceljs_gen.js messy.json messy-exceljs.xlsx
NODE_PATH=$NODE_DIR/node_modules node gen/sheetjs_gen.js messy.json messy-sheetjs.xlsx
tmp=$(mktemp -d)
soffice --headless --calc --convert-to xlsx:"Calc MS Excel 2007 XML" --outdir "$tmp" messy-openpyxl.xlsx >/dev/null
mv "$tmp/messy-openpyxl.xlsx" messy-libreoffice.xlsx
rm -rf "$tmp"
/usr/bin/python3 - <<'PY'
import csv, io, json
spec = json.load(open("messy.json", encoding="utf-8"))
out = io.StringIO()
w = csv.writer(out, lineterminator="\r\n")
w.writerow(spec["header"])
rows = {r["row"]: r["cells"] for r in spec["rows"]}
for n in range(2, max(rows) + 1):
    w.writerow(["" if v is None else v for v in rows.get(n, [])])
text = out.getvalue()
open("messy-bom.csv", "w", encoding="utf-8-sig", newline="").write(text)
open("messy-gbk.csv", "w", encoding="gb18030", newline="").write(text)
PY
ls -l messy-*
