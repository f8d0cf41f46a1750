package testenv

import (
	"os/exec"
	"syscall"
)

// setDieWithParent has the kernel kill a child server if the test binary dies without
// running its cleanups (a panic, a timeout, SIGKILL).
func setDieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
