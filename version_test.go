package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// version says what the build information says: the module's version,
// the revision, its time, and uncommitted changes.
func TestVersionIsTheBuildInformation(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.4.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.time", Value: "2026-12-01T08:00:00Z"}, {Key: "vcs.modified", Value: "true"},
	}}
	if got, want := version(info, true), "shop v1.4.0 revision 0123abcd of 2026-12-01T08:00:00Z with uncommitted changes go1.26.8"; got != want {
		t.Fatalf("version %q, want %q", got, want)
	}
	info.Settings = nil
	if got := version(info, true); !strings.HasPrefix(got, "shop v1.4.0 (no VCS revision") {
		t.Fatalf("without VCS: %q", got)
	}
}

// `shop -version`, built from a clone of this repository's last commit as
// docs/operations.md says, prints the clone's revision and serves nothing.
// (A clone, because Go stamps no revision in a git worktree.)
func TestVersionFlagPrintsTheRevision(t *testing.T) {
	dir := t.TempDir()
	clone := exec.Command("git", "clone", "--quiet", "--no-local", ".", dir)
	if out, err := clone.CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	head, err := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-buildvcs=true", "-o", filepath.Join(dir, "shop"), ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // a shop without -version would serve
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(dir, "shop"), "-version").Output()
	if err != nil {
		t.Fatalf("shop -version: %v %s", err, out)
	}
	if !strings.Contains(string(out), "revision "+strings.TrimSpace(string(head))) {
		t.Fatalf("shop -version printed %q, want the revision %s", out, head)
	}
}
