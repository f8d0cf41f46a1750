//go:build !linux

package testenv

import "os/exec"

// setDieWithParent is Linux-only; elsewhere the test's cleanup alone stops the child.
func setDieWithParent(*exec.Cmd) {}
