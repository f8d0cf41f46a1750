// Writes messy.json as an .xlsx with exceljs (npm exceljs@4), shared strings and styles.
const ExcelJS = require('exceljs');
const spec = require(require('path').resolve(process.argv[2]));
(async () => {
  const wb = new ExcelJS.Workbook();
  const ws = wb.addWorksheet('Customers');
  ws.getRow(1).values = spec.header;
  ws.getRow(1).font = { bold: true };
  for (const r of spec.rows) ws.getRow(r.row).values = r.cells;
  ws.getCell('H1').value = '注册日期';
  ws.getCell('H2').value = new Date(Date.UTC(2026, 0, 15));
  await wb.xlsx.writeFile(process.argv[3]);
})();
