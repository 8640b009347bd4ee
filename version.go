package main

import (
	"runtime/debug"
	"strings"
)

// version names the build, from what the Go toolchain stamped into the
// binary: the module's version ("(devel)" for a build from a checkout), the
// VCS revision and its time, and whether the tree had changes.
func version(info *debug.BuildInfo, ok bool) string {
	if !ok {
		return "shop: no build information"
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	parts := []string{"shop", info.Main.Version}
	if rev := settings["vcs.revision"]; rev != "" {
		parts = append(parts, "revision "+rev)
		if at := settings["vcs.time"]; at != "" {
			parts = append(parts, "of "+at)
		}
		if settings["vcs.modified"] == "true" {
			parts = append(parts, "with uncommitted changes")
		}
	} else {
		parts = append(parts, "(no VCS revision: built with -buildvcs=false or outside a checkout)")
	}
	return strings.Join(append(parts, info.GoVersion), " ")
}
