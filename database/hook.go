//go:build !groupcrash

package database

// beforeCommit, before a shared COMMIT, is empty but in the test build
// -tags groupcrash (hook_groupcrash.go): the package's one fault point.
func beforeCommit(committed int) {}
