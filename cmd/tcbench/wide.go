package main

import (
	"archive/zip"
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// benchWideImport: a hostile workbook of rows × cells, six named columns and every other
// cell a shared string, imported end to end (upload → terminal). The figure is the service's
// CPU time (submit's checks and the worker), which must grow with the columns the import
// uses, not with the cells a row holds.
func benchWideImport(rows, cells int) func(ctx context.Context, b *bench) (Figure, error) {
	return func(ctx context.Context, b *bench) (Figure, error) {
		file := filepath.Join(b.dataDir, fmt.Sprintf("wide-%dx%d.xlsx", rows, cells))
		if err := writeWideFile(file, rows, cells); err != nil {
			return Figure{}, err
		}
		info, err := os.Stat(file)
		if err != nil {
			return Figure{}, err
		}
		if _, err := b.db.ExecContext(ctx, "TRUNCATE customers; TRUNCATE tasks CASCADE"); err != nil {
			return Figure{}, err
		}
		svc, err := b.startService()
		if err != nil {
			return Figure{}, err
		}
		cpu0 := procCPU(svc.cmd.Process.Pid)
		start := time.Now()
		b.profile(svc, "import-wide", 10*time.Second)
		id, err := svc.upload(file, nil)
		if err != nil {
			svc.stop()
			return Figure{}, err
		}
		final, err := svc.waitTerminal(id, 30*time.Minute)
		took := time.Since(start)
		cpu := float64(procCPU(svc.cmd.Process.Pid)-cpu0) / 100 // clock ticks of 10 ms
		rss, _ := svc.stop()
		if err != nil {
			return Figure{}, err
		}
		if final.Status != "SUCCESS" {
			return Figure{}, fmt.Errorf("wide import ended %s: %+v\n%s", final.Status, final.Error, svc.logs)
		}
		return Figure{
			Name:    fmt.Sprintf("import %d rows × %d cells (%.1f MB .xlsx)", rows, cells, float64(info.Size())/(1<<20)),
			Measure: map[string]float64{"seconds": took.Seconds(), "peak_rss_mb": rss, "cpu_seconds": cpu},
			Target:  "≤10 s of service CPU",
			Met:     cpu <= 10,
			Note:    fmt.Sprintf("service CPU %.1f s (submit's checks and the worker) over %.1f s", cpu, took.Seconds()),
		}, nil
	}
}

// writeWideFile writes a workbook of rows data rows under a header naming the six customer
// columns, every row cells wide: six valid values, then shared strings.
func writeWideFile(path string, rows, cells int) error {
	return writeOnce(path, func(bw *bufio.Writer) error {
		zw := zip.NewWriter(bw)
		var err error
		put := func(name, body string) {
			if err == nil {
				var w interface{ Write([]byte) (int, error) }
				if w, err = zw.Create(name); err == nil {
					_, err = w.Write([]byte(body))
				}
			}
		}
		put("[Content_Types].xml", `<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>`)
		put("xl/workbook.xml", `<workbook xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>`)
		put("xl/_rels/workbook.xml.rels", `<Relationships><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/>`+
			`<Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/></Relationships>`)
		put("xl/sharedStrings.xml", `<sst><si><t>filler</t></si><si><t>a &amp; b</t></si></sst>`)
		if err != nil {
			return err
		}
		w, err := zw.Create("xl/worksheets/sheet1.xml")
		if err != nil {
			return err
		}
		inline := func(s string) string { return `<c t="inlineStr"><is><t>` + s + `</t></is></c>` }
		filler := strings.Repeat(`<c t="s"><v>0</v></c><c t="s"><v>1</v></c>`, (cells-6)/2)
		fmt.Fprint(w, `<worksheet><sheetData><row>`+inline("code")+inline("name")+inline("phone")+inline("email")+inline("city")+inline("level")+`</row>`)
		for i := 1; i <= rows; i++ {
			fmt.Fprintf(w, `<row>%s%s<c><v>%d</v></c>%s%s%s%s</row>`, inline(fmt.Sprintf("W%07d", i)), inline(fmt.Sprintf("wide %d", i)), 13000000000+i,
				inline(fmt.Sprintf("w%d@example.com", i)), inline("上海"), inline("gold"), filler)
		}
		if _, err := fmt.Fprint(w, `</sheetData></worksheet>`); err != nil {
			return err
		}
		return zw.Close()
	})
}
