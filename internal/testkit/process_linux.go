package testkit

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill the server if its parent dies first,
// so that no server outlives its test or soak.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
