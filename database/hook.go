//go:build !groupcrash

package database

// beforeCommit runs just before a shared COMMIT of that many committed
// transactions: the package's one fault point, empty but in the test
// build -tags groupcrash (hook_groupcrash.go).
func beforeCommit(committed int) {}
