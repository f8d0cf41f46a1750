package storage_test

import (
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/testenv"
)

func get(t *testing.T, u string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("GET presigned URL: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func TestPresign(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storage.BackendS3, nil)
	data := randomBytes(21, 300<<10)
	put(t, e, "results/tsk_P-a1.xlsx", data, int64(len(data)))
	for _, name := range []string{"客户导出.xlsx", "émigré 报表 2026.xlsx", `report "Q1"; final.xlsx`, "plain.csv", "100% done.xlsx"} {
		u, ok, err := e.store.Presign(t.Context(), "results/tsk_P-a1.xlsx", name, 0)
		if err != nil || !ok {
			t.Fatalf("presign %q: %q, %v, %v", name, u, ok, err)
		}
		if strings.Contains(u, e.cfg.SecretKey) {
			t.Fatal("the presigned URL carries the secret key")
		}
		resp, body := get(t, u)
		if resp.StatusCode != http.StatusOK || string(body) != string(data) {
			t.Fatalf("GET presigned URL for %q: %s, %d bytes; want 200 and the object", name, resp.Status, len(body))
		}
		cd := resp.Header.Get("Content-Disposition")
		disp, params, err := mime.ParseMediaType(cd)
		if err != nil || disp != "attachment" || params["filename"] != name {
			t.Errorf("Content-Disposition %q parses to %q %q (%v), want an attachment called %q", cd, disp, params["filename"], err, name)
		}
		if !strings.Contains(cd, `filename="`) {
			t.Errorf("Content-Disposition %q has no ASCII fallback for old clients", cd)
		}
		if ct := resp.Header.Get("Content-Type"); !strings.Contains(ct, "spreadsheetml") {
			t.Errorf("Content-Type %q, want the xlsx type stored with the object", ct)
		}
	}
}

func TestPresignExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storage.BackendS3, nil)
	put(t, e, "results/tsk_E-a1.xlsx", []byte("soon gone"), -1)
	start := time.Now()
	u, ok, err := e.store.Presign(t.Context(), "results/tsk_E-a1.xlsx", "e.xlsx", 2*time.Second)
	if err != nil || !ok {
		t.Fatalf("presign: %v, %v", ok, err)
	}
	if resp, body := get(t, u); resp.StatusCode != http.StatusOK || string(body) != "soon gone" {
		t.Fatalf("fresh presigned URL: %s %q", resp.Status, body)
	}
	var status int
	testenv.Eventually(t, 20*time.Second, "the presigned URL to expire", func() bool {
		resp, _ := get(t, u)
		status = resp.StatusCode
		return status != http.StatusOK
	})
	if status != http.StatusForbidden {
		t.Fatalf("expired presigned URL answers %d, want 403", status)
	}
	if since := time.Since(start); since < time.Second {
		t.Fatalf("the URL stopped working after %s, before its 2s TTL", since)
	}
	if _, _, err := e.store.Presign(t.Context(), "results/tsk_E-a1.xlsx", "e.xlsx", 8*24*time.Hour); err == nil {
		t.Fatal("presign for 8 days succeeded; S3 allows at most 7")
	}
}

func TestPresignOffOrElsewhere(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storage.BackendS3, func(c *storage.Config) { c.Presign = false })
	if u, ok, err := e.store.Presign(t.Context(), "results/x.xlsx", "x.xlsx", 0); ok || u != "" || err != nil {
		t.Fatalf("presign with Presign off = %q, %v, %v; want ok=false", u, ok, err)
	}

	// Browsers may reach the service by another name: the URL is signed for that host.
	cfg := e.cfg
	cfg.Presign = true
	_, port, _ := net.SplitHostPort(e.gw.Endpoint)
	cfg.PresignEndpoint = "http://localhost:" + port
	st, err := storage.New(t.Context(), cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	put(t, &env{backend: storage.BackendS3, store: st}, "results/y.xlsx", []byte("y"), 1)
	u, ok, err := st.Presign(t.Context(), "results/y.xlsx", "y.xlsx", 0)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	pu, err := url.Parse(u)
	if err != nil || pu.Host != "localhost:"+port {
		t.Fatalf("presigned URL %q does not name the presign endpoint", u)
	}
	if resp, body := get(t, u); resp.StatusCode != http.StatusOK || string(body) != "y" {
		t.Fatalf("GET through the presign endpoint: %s %q", resp.Status, body)
	}
}

func TestNewSaysWhatToDo(t *testing.T) {
	t.Parallel()
	gw := testenv.NewS3(t)
	good := storage.Config{
		Backend: storage.BackendS3, Endpoint: gw.Endpoint, Bucket: "tc-new", Region: gw.Region,
		AccessKey: gw.AccessKey, SecretKey: gw.SecretKey, PathStyle: true,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	for _, c := range []struct {
		name  string
		tweak func(*storage.Config)
		want  []string
	}{
		{"unknown backend", func(c *storage.Config) { c.Backend = "ftp" }, []string{`unknown backend "ftp"`, "TASKCENTER_STORAGE_BACKEND"}},
		{"no credentials", func(c *storage.Config) { c.SecretKey = "" }, []string{"TASKCENTER_STORAGE_ACCESS_KEY", "TASKCENTER_STORAGE_SECRET_KEY"}},
		{"nothing listens", func(c *storage.Config) { c.Endpoint = closed }, []string{"storage.s3: endpoint " + closed + " unreachable", "scripts/services.sh", "TASKCENTER_STORAGE_ENDPOINT"}},
		{"wrong secret", func(c *storage.Config) { c.SecretKey = "wrong" }, []string{"refused the credentials", "TASKCENTER_STORAGE_SECRET_KEY"}},
		{"missing bucket", func(c *storage.Config) {}, []string{`bucket "tc-new" does not exist`, "create_bucket"}},
		{"bad bucket name", func(c *storage.Config) { c.Bucket = "Bad_Bucket" }, []string{"TASKCENTER_STORAGE_BUCKET"}},
		{"endpoint with a path", func(c *storage.Config) { c.Endpoint = "http://" + gw.Endpoint + "/s3" }, []string{"must be host:port"}},
		{"tiny parts", func(c *storage.Config) { c.PartSize = 1 << 20 }, []string{"5 MiB"}},
		{"TLS to a plain server", func(c *storage.Config) { c.TLS = true }, []string{"TASKCENTER_STORAGE_TLS=false"}},
	} {
		cfg := good
		c.tweak(&cfg)
		_, err := storage.New(t.Context(), cfg, t.TempDir())
		if err == nil {
			t.Errorf("%s: New succeeded", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", c.name, err, w)
			}
		}
		if strings.Contains(err.Error(), gw.SecretKey) {
			t.Errorf("%s: the error shows the secret key", c.name)
		}
	}

	// Allowed to, New creates the bucket; a second replica finds it.
	good.CreateBucket = true
	for range 2 {
		st, err := storage.New(t.Context(), good, t.TempDir())
		if err != nil {
			t.Fatalf("New with CreateBucket: %v", err)
		}
		if err := st.Ping(t.Context()); err != nil {
			t.Fatalf("ping: %v", err)
		}
	}
	// The scheme sets TLS.
	good.Endpoint = "http://" + gw.Endpoint
	good.TLS = true
	if _, err := storage.New(t.Context(), good, t.TempDir()); err != nil {
		t.Fatalf("New with an http:// endpoint: %v", err)
	}
}

func TestContentDisposition(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{"plain.xlsx", `attachment; filename="plain.xlsx"`},
		{"客户导出.xlsx", `attachment; filename="____.xlsx"; filename*=UTF-8''%E5%AE%A2%E6%88%B7%E5%AF%BC%E5%87%BA.xlsx`},
		{`a "q".csv`, `attachment; filename="a _q_.csv"; filename*=UTF-8''a%20%22q%22.csv`},
		{"a/b\\c\r\n.xlsx", `attachment; filename="a_b_c__.xlsx"`},
		{"", "attachment"},
	} {
		if got := storage.ContentDisposition(c.name); got != c.want {
			t.Errorf("ContentDisposition(%q) = %s, want %s", c.name, got, c.want)
		}
	}
}
