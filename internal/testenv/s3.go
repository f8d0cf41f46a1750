package testenv

import (
	"cmp"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// S3 is one test's private S3 service: a Versity S3 Gateway (versitygw) serving a temp
// directory on a free loopback port, stopped when the test ends. Buckets are directories
// under Dir; create them through the S3 API (storage.Config.CreateBucket).
type S3 struct {
	Endpoint  string // host:port, plain HTTP, path-style
	AccessKey string
	SecretKey string
	Region    string
	Dir       string // the gateway's posix root

	cmd     *exec.Cmd
	done    chan struct{}
	log     *SyncBuffer
	stopped sync.Once
}

// VersityGWInstall is how scripts/services.sh installs the gateway, for messages.
const VersityGWInstall = "go install github.com/versity/versitygw/cmd/versitygw@v1.8.0"

// VersityGW finds the versitygw binary: $TASKCENTER_VERSITYGW, then PATH, then $GOBIN,
// $GOPATH/bin (default ~/go/bin, where `scripts/services.sh tools` installs it) and the
// repository's bin/.
func VersityGW() (string, error) {
	if p := os.Getenv("TASKCENTER_VERSITYGW"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	var dirs []string
	if gobin := os.Getenv("GOBIN"); gobin != "" {
		dirs = append(dirs, gobin)
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		if home, err := os.UserHomeDir(); err == nil {
			gopath = filepath.Join(home, "go")
		}
	}
	for p := range strings.SplitSeq(gopath, string(os.PathListSeparator)) {
		if p != "" {
			dirs = append(dirs, filepath.Join(p, "bin"))
		}
	}
	if root, err := ModuleRoot(); err == nil {
		dirs = append(dirs, filepath.Join(root, "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "versitygw")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("versitygw not found on PATH, in $GOBIN, $GOPATH/bin or bin/: run `scripts/services.sh tools` (it runs %s, about 90 s), or set TASKCENTER_NO_S3=1 to skip the S3 tests", VersityGWInstall)
}

// NewS3 starts a gateway for the test. Without versitygw the test fails, saying how to
// install it; it is skipped only when TASKCENTER_NO_S3=1.
func NewS3(t testing.TB) *S3 {
	t.Helper()
	if os.Getenv("TASKCENTER_NO_S3") == "1" {
		t.Skip("TASKCENTER_NO_S3=1: skipping the test that needs an S3 service")
	}
	bin, err := VersityGW()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	dir := t.TempDir()
	s := &S3{AccessKey: "taskcenter-test", SecretKey: "taskcenter-test-secret", Region: "us-east-1", Dir: filepath.Join(dir, "root")}
	if err := os.MkdirAll(s.Dir, 0o750); err != nil {
		t.Fatal(err)
	}
	// The free port may be taken between our probe and the gateway's bind: try again.
	for try := 1; ; try++ {
		err := s.start(bin, dir)
		if err == nil {
			break
		}
		if try == 3 {
			t.Fatalf("testenv: start versitygw: %v", err)
		}
	}
	t.Cleanup(s.Stop)
	return s
}

func (s *S3) start(bin, dir string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.Endpoint = ln.Addr().String()
	ln.Close()
	s.log = &SyncBuffer{Limit: 1 << 20}
	cmd := exec.Command(bin, "--port", s.Endpoint, "--region", s.Region, "--quiet", "posix", s.Dir)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s.AccessKey, "ROOT_SECRET_KEY="+s.SecretKey)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = s.log, s.log
	setDieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", bin, err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(s.done) }() //nolint:errcheck // the exit is reported through done
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-s.done:
			return fmt.Errorf("versitygw exited at start: %s", strings.TrimSpace(s.log.String()))
		default:
		}
		// Any HTTP answer (403 to an anonymous request) means it serves.
		if resp, err := client.Get("http://" + s.Endpoint + "/"); err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("versitygw did not answer on %s within 30s: %s", s.Endpoint, strings.TrimSpace(s.log.String()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop ends the gateway (SIGTERM, then SIGKILL after 5 s); the test's cleanup calls it.
func (s *S3) Stop() {
	s.stopped.Do(func() {
		if s.cmd == nil || s.cmd.Process == nil {
			return
		}
		s.cmd.Process.Signal(os.Interrupt) //nolint:errcheck // it may have exited already
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			s.cmd.Process.Kill() //nolint:errcheck // as above
			<-s.done
		}
	})
}

// Log is what the gateway printed, for failure messages.
func (s *S3) Log() string { return s.log.String() }

// URL is the gateway's base URL.
func (s *S3) URL() string { return "http://" + s.Endpoint }

// String describes the gateway without its secret.
func (s *S3) String() string {
	return fmt.Sprintf("versitygw at %s (access key %s, dir %s)", s.Endpoint, cmp.Or(s.AccessKey, "-"), s.Dir)
}
