package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
)

// binary is the taskcenter command built once for the tests that kill real processes.
var binary string

func TestMain(m *testing.M) {
	// These tests spend most of their time waiting on what they watch (processes, Chromium,
	// servers, a task's next status), not computing: at go test's default, as many at once
	// as there are CPUs, the CPUs sat half idle. Twice as many, unless -parallel says.
	flag.Parse()
	parallel := false
	flag.Visit(func(f *flag.Flag) { parallel = parallel || f.Name == "test.parallel" })
	if !parallel {
		flag.Set("test.parallel", strconv.Itoa(2*runtime.GOMAXPROCS(0))) //nolint:errcheck // a valid number
	}
	dir, err := os.MkdirTemp("", "taskcenter-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "taskcenter")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build taskcenter for the process tests:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
