// Writes messy.json as an .xlsx with SheetJS (npm xlsx@0.18), inline strings (no SST).
const XLSX = require('xlsx');
const spec = require(require('path').resolve(process.argv[2]));
const aoa = [spec.header];
for (const r of spec.rows) aoa[r.row - 1] = r.cells;
for (let i = 0; i < aoa.length; i++) if (!aoa[i]) aoa[i] = [];
const ws = XLSX.utils.aoa_to_sheet(aoa);
const wb = XLSX.utils.book_new();
XLSX.utils.book_append_sheet(wb, ws, 'Sheet1');
XLSX.writeFile(wb, process.argv[3], { bookSST: false });
