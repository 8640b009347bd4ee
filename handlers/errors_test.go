package handlers

import (
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/shop/shop/models"
	"github.com/shop/shop/problem"
)

// Each code of a domain error has its status; a code nobody mapped is the
// server's fault, 500, never a client's.
func TestProblemOfCodes(t *testing.T) {
	for code, want := range map[models.Code]int{
		models.EINVALID:      http.StatusUnprocessableEntity,
		models.ENOTFOUND:     http.StatusNotFound,
		models.ECONFLICT:     http.StatusConflict,
		models.EUNAUTHORIZED: http.StatusUnauthorized,
		"made-up":            http.StatusInternalServerError,
	} {
		if got := problemOf(&models.Error{Code: code, Message: "m"}).Status; got != want {
			t.Errorf("problemOf(code %q) = %d, want %d", code, got, want)
		}
	}
}

// docs/idempotency.md lists the final answers; the code declares them. The
// two lists are the same, and no final answer is among the released ones.
func TestFinalAnswersAreTheDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/idempotency.md")
	if err != nil {
		t.Fatal(err)
	}
	stored, released, ok := strings.Cut(string(doc), "Every other answer is released")
	if !ok {
		t.Fatal("docs/idempotency.md no longer says which answers are released")
	}
	_, stored, ok = strings.Cut(stored, "- the final answers")
	if !ok {
		t.Fatal("docs/idempotency.md no longer lists the final answers")
	}
	released, _, _ = strings.Cut(released, "\n\n")
	slugs := func(text string) []string {
		var out []string
		for _, m := range regexp.MustCompile("`([a-z-]+)`").FindAllStringSubmatch(text, -1) {
			if models.Declared(problem.Type{Slug: m[1]}.URI()) != nil {
				out = append(out, m[1])
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	var final []string
	for _, typ := range models.FinalTypes() {
		final = append(final, typ.Slug)
	}
	slices.Sort(final)
	if got := slugs(stored); !slices.Equal(got, final) {
		t.Errorf("docs/idempotency.md lists the final answers %v; the code declares %v", got, final)
	}
	for _, slug := range slugs(released) {
		if slices.Contains(final, slug) {
			t.Errorf("docs/idempotency.md lists the final %s among the released answers", slug)
		}
	}
}
