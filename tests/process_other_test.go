//go:build !linux

package tests

import "os/exec"

// dieWithTests: only Linux can tie the server's life to the tests'; elsewhere
// the tests' cleanup alone kills it.
func dieWithTests(*exec.Cmd) {}

// ownGroup and killGroup: elsewhere only the process itself is killed.
func ownGroup(*exec.Cmd) {}

func killGroup(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
