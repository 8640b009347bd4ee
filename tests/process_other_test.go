//go:build !linux

package tests

import "os/exec"

// dieWithTests: only Linux can tie the server's life to the tests'; elsewhere
// the tests' cleanup alone kills it.
func dieWithTests(*exec.Cmd) {}
