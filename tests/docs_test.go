package tests

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docs/guarantees.md and the tests name each other: every test it names
// exists, and every test of the suite is named there, so the index cannot
// drift from the tests either way.
func TestGuaranteesNameRealTests(t *testing.T) {
	doc, err := os.ReadFile("../docs/guarantees.md")
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	funcs := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark|Example)\w*)\(`)
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".") && d.Name() != "..") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		for _, m := range funcs.FindAllStringSubmatch(string(src), -1) {
			defined[m[1]] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile("`((?:Test|Fuzz|Benchmark)[A-Z]\\w*)").FindAllStringSubmatch(string(doc), -1)
	if len(named) < 50 {
		t.Fatalf("docs/guarantees.md names %d tests; the index has lost its tests", len(named))
	}
	listed := map[string]bool{}
	for _, m := range named {
		listed[m[1]] = true
		if !defined[m[1]] {
			t.Errorf("docs/guarantees.md names %s, which no test file defines", m[1])
		}
	}
	for name := range defined {
		if strings.HasPrefix(name, "Test") && name != "TestMain" && !listed[name] {
			t.Errorf("%s is not in docs/guarantees.md: say there what it proves", name)
		}
	}
}

// The reading order of docs/architecture.md names files and folders that
// exist.
func TestReadingOrderNamesRealFiles(t *testing.T) {
	doc, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, found := strings.Cut(string(doc), "\n## Read the code in this order\n")
	section, _, _ = strings.Cut(section, "\n## ")
	paths := regexp.MustCompile("`([a-z]+/[a-z_./]*)`").FindAllStringSubmatch(section, -1)
	if !found || len(paths) < 4 {
		t.Fatalf("docs/architecture.md has no reading order naming files (%d found)", len(paths))
	}
	for _, m := range paths {
		if _, err := os.Stat(filepath.Join("..", m[1])); err != nil {
			t.Errorf("the reading order names %s: %v", m[1], err)
		}
	}
}
