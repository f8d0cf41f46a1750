package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/taskcenter/taskcenter/internal/testenv"
)

// benchImportS3 imports the same N-row .xlsx twice in one run, through the whole service: with
// storage.backend local (the data dir) and with s3 (a Versity S3 Gateway this benchmark starts
// over a temp dir): the upload streams into the bucket, submit checks it there with ranged
// reads, the worker imports it with ranged reads. The ratio is s3 over local; RSS is the
// service's peak.
func benchImportS3(ctx context.Context, b *bench, rows int) (Figure, error) {
	file, err := b.importFile(rows)
	if err != nil {
		return Figure{}, err
	}
	local, err := b.importOnce(ctx, file, rows, importFlavours()[0], fmt.Sprintf("import-local-%d", rows))
	if err != nil {
		return Figure{}, fmt.Errorf("local: %w", err)
	}
	gw, err := startGateway(ctx, filepath.Join(b.dataDir, "s3"))
	if err != nil {
		return Figure{}, err
	}
	defer gw.stop()
	s3, err := b.importOnce(ctx, file, rows, importFlavours()[0], fmt.Sprintf("import-s3-%d", rows), gw.env()...)
	if err != nil {
		return Figure{}, fmt.Errorf("s3: %w", err)
	}
	ratio := s3.took.Seconds() / local.took.Seconds()
	return Figure{
		Name: fmt.Sprintf("import %d rows on s3", rows),
		Note: fmt.Sprintf("s3: upload+checks %.2fs, run %.2fs; local: upload+checks %.2fs, run %.2fs (versitygw on this machine)",
			s3.phases.Upload, s3.phases.Run, local.phases.Upload, local.phases.Run),
		Measure:  map[string]float64{"seconds": s3.took.Seconds(), "peak_rss_mb": s3.rss, "per_second": float64(rows) / s3.took.Seconds()},
		Baseline: map[string]float64{"seconds": local.took.Seconds(), "peak_rss_mb": local.rss, "per_second": float64(rows) / local.took.Seconds()},
		Ratio:    ratio,
		Target:   "≤1.5× local, ≤200 MB",
		Met:      ratio <= 1.5 && s3.rss <= 200,
	}, nil
}

// gateway is a Versity S3 Gateway the benchmark runs over a directory.
type gateway struct {
	cmd      *exec.Cmd
	endpoint string
	done     chan struct{}
}

const (
	gwAccessKey = "tcbench"
	gwSecretKey = "tcbench-secret-key"
)

func startGateway(ctx context.Context, dir string) (*gateway, error) {
	bin, err := testenv.VersityGW()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	endpoint := ln.Addr().String()
	ln.Close()
	var logs bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "--port", endpoint, "--quiet", "posix", dir)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+gwAccessKey, "ROOT_SECRET_KEY="+gwSecretKey)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	g := &gateway{cmd: cmd, endpoint: endpoint, done: make(chan struct{})}
	go func() { cmd.Wait(); close(g.done) }() //nolint:errcheck // reported through done
	client := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		select {
		case <-g.done:
			return nil, fmt.Errorf("versitygw exited: %s", logs.String())
		default:
		}
		if res, err := client.Get("http://" + endpoint + "/"); err == nil {
			res.Body.Close()
			return g, nil
		}
		if time.Now().After(deadline) {
			g.stop()
			return nil, fmt.Errorf("versitygw did not answer on %s", endpoint)
		}
	}
}

// env is the service's storage settings for this gateway.
func (g *gateway) env() []string {
	return []string{"TASKCENTER_STORAGE_BACKEND=s3", "TASKCENTER_STORAGE_ENDPOINT=" + g.endpoint, "TASKCENTER_STORAGE_BUCKET=tcbench",
		"TASKCENTER_STORAGE_ACCESS_KEY=" + gwAccessKey, "TASKCENTER_STORAGE_SECRET_KEY=" + gwSecretKey, "TASKCENTER_STORAGE_CREATE_BUCKET=true"}
}

func (g *gateway) stop() {
	g.cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // it may be gone
	select {
	case <-g.done:
	case <-time.After(5 * time.Second):
		g.cmd.Process.Kill() //nolint:errcheck
		<-g.done
	}
}
