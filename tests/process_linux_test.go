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

// ownGroup starts cmd as the leader of a process group of its own, so that
// killGroup ends it and everything it started (a shell's jobs, go run's
// child).
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func killGroup(cmd *exec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}
