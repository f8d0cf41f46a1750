package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/text/encoding/simplifiedchinese"
)

// benchBigSubmit: the time POST /api/v1/imports takes to answer for a CSV of rows short rows
// (the Chinese header in GBK, as Excel on a Chinese Windows saves it, then one digit a line):
// how long the upload request is held by submit's checks (encoding=auto: the UTF-8 pass, then
// the GB18030 one). Over the row limit, the answer is 422 too_many_rows, or a 202 and a task
// the worker fails.
func benchBigSubmit(rows int) func(ctx context.Context, b *bench) (Figure, error) {
	return func(ctx context.Context, b *bench) (Figure, error) {
		file := filepath.Join(b.dataDir, fmt.Sprintf("big-gbk-%d.csv", rows))
		if err := writeBigCSV(file, rows); err != nil {
			return Figure{}, err
		}
		info, err := os.Stat(file)
		if err != nil {
			return Figure{}, err
		}
		if err := b.emptyQueueAnd(ctx, "customers, tasks"); err != nil {
			return Figure{}, err
		}
		// An api-only process: the answer is what is measured, not the import.
		svc, err := b.startRoles("api")
		if err != nil {
			return Figure{}, err
		}
		start := time.Now()
		code, body, err := svc.submitFile(file, nil)
		took := time.Since(start)
		rss, _ := svc.stop()
		if err != nil {
			return Figure{}, err
		}
		var answer struct{ Code, Detail string }
		json.Unmarshal(body, &answer) //nolint:errcheck // a 202 has neither
		if code != http.StatusAccepted && answer.Code != "too_many_rows" {
			return Figure{}, fmt.Errorf("submit answered %d %s", code, body)
		}
		return Figure{
			Name:    fmt.Sprintf("submit of a %d-row CSV (%.0f MB)", rows, float64(info.Size())/(1<<20)),
			Measure: map[string]float64{"seconds": took.Seconds(), "peak_rss_mb": rss},
			Target:  "answered within 2 s",
			Met:     took <= 2*time.Second,
			Note:    fmt.Sprintf("upload on loopback and submit's checks, until the answer: %d %s", code, answer.Detail),
		}, nil
	}
}

// writeBigCSV writes the Chinese header in GBK and rows lines of one digit.
func writeBigCSV(path string, rows int) error {
	return writeOnce(path, func(w *bufio.Writer) error {
		header, err := simplifiedchinese.GBK.NewEncoder().String("客户编号,客户名称,手机号\n")
		if err != nil {
			return err
		}
		w.WriteString(header) //nolint:errcheck // the buffer keeps its error for the flush
		for i := range rows {
			w.WriteByte(byte('0' + i%10)) //nolint:errcheck
			w.WriteByte('\n')             //nolint:errcheck
		}
		return nil
	})
}
