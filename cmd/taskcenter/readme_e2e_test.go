package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The README's curl walk-through, run as written against a running server through a
// validating reverse proxy (every request and answer checked against the OpenAPI document, as
// a gateway such as Prism would): no contradiction, and each step answers what the README
// says it does.
func TestTheREADMEWalkThroughKeepsTheContract(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed (Debian package curl)")
	}
	e := newEnv(t, nil)
	e.seedCustomers(300)
	p := e.start("all")
	gateway, served := validatingGateway(t, p.base)

	dir := t.TempDir()
	xlsx, bad := customersXLSX(t, 500)
	if err := os.WriteFile(filepath.Join(dir, "customers.xlsx"), xlsx, 0o644); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	run := func(cmd string) string {
		t.Helper()
		c := exec.Command("sh", "-c", "set -e\n"+cmd)
		c.Dir = dir
		c.Env = append(os.Environ(), "TOKEN="+vars["TOKEN"], "ID="+vars["ID"])
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s\n→ %v\n%s", cmd, err, out)
		}
		return string(out)
	}
	taskOf := func(out string) string {
		var v struct{ Task struct{ ID string } }
		if err := json.Unmarshal([]byte(out), &v); err != nil || v.Task.ID == "" {
			t.Fatalf("not a submit answer: %s", out)
		}
		return v.Task.ID
	}
	steps := walkThrough(t)
	if len(steps) < 10 {
		t.Fatalf("found %d commands in the README's walk-through", len(steps))
	}
	for _, step := range steps {
		if name, value, ok := strings.Cut(step, "="); ok && !strings.Contains(name, " ") {
			if name == "TOKEN" {
				vars[name] = value
			}
			continue // ID=tsk_…: the test sets it from the answer, as a reader would
		}
		cmd := strings.ReplaceAll(step, "localhost:8080", strings.TrimPrefix(gateway, "http://"))
		switch {
		case strings.Contains(cmd, "/result"):
			p.waitStatus(aliceToken, vars["ID"], time.Minute, "SUCCESS")
		case strings.Contains(cmd, "/error-report"):
			p.waitStatus(aliceToken, vars["ID"], time.Minute, "PARTIAL_SUCCESS")
		}
		out := run(cmd)
		switch {
		case strings.Contains(cmd, `"type":"customers"`):
			vars["ID"] = taskOf(out)
		case strings.Contains(cmd, "/api/v1/imports -H"):
			vars["ID"] = taskOf(out)
		}
	}
	if n := served.Load(); n < 10 {
		t.Fatalf("only %d answers went through the validating proxy", n)
	}
	// The downloads landed under the names the server gave them.
	files, _ := filepath.Glob(filepath.Join(dir, "*.xlsx"))
	if len(files) < 4 || bad == 0 {
		t.Fatalf("files after the walk-through: %v", files)
	}
}

// readmeBlock is what the first group of pattern matches in the README; what names the block
// in the failure when there is none.
func readmeBlock(t *testing.T, pattern, what string) string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(pattern).FindSubmatch(readme)
	if m == nil {
		t.Fatalf("README.md has no %s", what)
	}
	return string(m[1])
}

// walkThrough is the README's curl walk-through: its commands in order, continuation lines
// joined and comments dropped.
func walkThrough(t *testing.T) []string {
	t.Helper()
	block := readmeBlock(t, "(?s)## Walk-through with curl.*?```sh\n(.*?)```", "walk-through block")
	var steps []string
	var cur strings.Builder
	for _, line := range strings.Split(block, "\n") {
		line, _, _ = strings.Cut(line, " # ") // a comment after the command
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if more, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(more + " ")
			continue
		}
		cur.WriteString(line)
		steps = append(steps, cur.String())
		cur.Reset()
	}
	return steps
}

// validatingGateway is a reverse proxy in front of the server at base that checks every
// request and answer against the OpenAPI document, as a validating gateway would, and fails
// t on a 5xx. It returns its URL and a count of the answers it passed on.
func validatingGateway(t *testing.T, base string) (string, *atomic.Int32) {
	t.Helper()
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = checkedClient(t).Transport
	served := &atomic.Int32{}
	proxy.ModifyResponse = func(res *http.Response) error {
		served.Add(1)
		if res.StatusCode >= 500 {
			t.Errorf("%s %s answered %d", res.Request.Method, res.Request.URL, res.StatusCode)
		}
		return nil
	}
	gateway := httptest.NewServer(proxy)
	t.Cleanup(gateway.Close)
	return gateway.URL, served
}
