package tests

import (
	"os/exec"
	"syscall"
)

// dieWithTests has the kernel kill the server if the test binary dies
// first (a panic, a timeout), so that no server outlives its tests.
func dieWithTests(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
