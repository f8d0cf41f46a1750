package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"path/filepath"

	"golang.org/x/text/encoding/simplifiedchinese"
)

// benchCSVEncodings: the same N customers as a UTF-8 CSV and as a GBK CSV (what Excel on a
// Chinese Windows saves), each imported end to end (upload → SUCCESS), twice in alternating
// order; the best of each is compared. The target: GBK within 1.2× of
// UTF-8. The GBK file goes through `encoding=auto`: the strict GB18030 check of the whole
// file at submit and the streaming transcoder while it imports.
func benchCSVEncodings(rows int) func(ctx context.Context, b *bench) (Figure, error) {
	return func(ctx context.Context, b *bench) (Figure, error) {
		utf8File := filepath.Join(b.dataDir, fmt.Sprintf("import-%d-utf8.csv", rows))
		gbkFile := filepath.Join(b.dataDir, fmt.Sprintf("import-%d-gbk.csv", rows))
		if err := writeImportCSV(utf8File, rows, false); err != nil {
			return Figure{}, err
		}
		if err := writeImportCSV(gbkFile, rows, true); err != nil {
			return Figure{}, err
		}
		best, rss := map[string]float64{}, 0.0
		for i, file := range []string{utf8File, gbkFile, gbkFile, utf8File} {
			r, err := b.importOnce(ctx, file, rows, importFlavours()[0], fmt.Sprintf("import-csv-%d", i))
			if err != nil {
				return Figure{}, fmt.Errorf("%s: %w", filepath.Base(file), err)
			}
			if cur, ok := best[file]; !ok || r.took.Seconds() < cur {
				best[file] = r.took.Seconds()
			}
			rss = max(rss, r.rss)
		}
		u, g := best[utf8File], best[gbkFile]
		ratio := g / u
		return Figure{
			Name:     fmt.Sprintf("import %d rows, GBK CSV vs UTF-8 CSV", rows),
			Measure:  map[string]float64{"seconds": g, "per_second": float64(rows) / g, "peak_rss_mb": rss},
			Baseline: map[string]float64{"seconds": u, "per_second": float64(rows) / u},
			Ratio:    ratio,
			Target:   "GBK ≤1.2× UTF-8",
			Met:      ratio <= 1.2,
			Note:     "best of two imports of each file, alternating; peak RSS is the highest of the four services'",
		}, nil
	}
}

// writeImportCSV writes the rows writeImportFile writes, as CSV with the Chinese header (the
// one a user of the 中文 template has), in GBK or in UTF-8.
func writeImportCSV(path string, rows int, gbk bool) error {
	return writeOnce(path, func(bw *bufio.Writer) error {
		var w io.Writer = bw
		if gbk {
			// Line by line: every write ends a line, so the encoder holds nothing back.
			w = simplifiedchinese.GBK.NewEncoder().Writer(bw)
		}
		fmt.Fprintln(w, "客户编号,客户名称,手机号,邮箱,城市,客户等级")
		cities := []string{"上海", "北京", "广州", "深圳", "杭州"}
		levels := []string{"normal", "silver", "gold", "platinum", "diamond"}
		for i := 1; i <= rows; i++ {
			if _, err := fmt.Fprintf(w, "B%07d,客户 %d,%d,b%d@example.com,%s,%s\n", i, i, 13000000000+i, i, cities[i%5], levels[i%5]); err != nil {
				return err
			}
		}
		return nil
	})
}
