"""Writes messy.json as an .xlsx with openpyxl (Debian package python3-openpyxl; run it with /usr/bin/python3)."""
import json, sys
from openpyxl import Workbook
from openpyxl.styles import Font

spec = json.load(open(sys.argv[1], encoding="utf-8"))
wb = Workbook()
ws = wb.active
ws.title = "客户"
ws.append(spec["header"])
for c in ws[1]:
    c.font = Font(bold=True)
for r in spec["rows"]:
    for i, v in enumerate(r["cells"]):
        ws.cell(row=r["row"], column=i + 1, value=v)
wb.create_sheet("说明").append(["This sheet is not imported"])
wb.save(sys.argv[2])
