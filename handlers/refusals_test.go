package handlers

import (
	"testing"

	"github.com/shop/shop/middleware"
	"github.com/shop/shop/problem"
)

// The shop renders the middleware's refusals as its own problems, so each
// must be one of its problem types, with a page at /problems: the same
// slug, status and title, or the shop's answers would change.
func TestEveryRefusalIsAProblemTypeOfTheShop(t *testing.T) {
	types := map[string]problem.Type{}
	for _, typ := range problem.All {
		types[typ.Slug] = typ
	}
	for _, r := range middleware.Refusals {
		typ, ok := types[r.Type]
		switch {
		case !ok:
			t.Errorf("refusal %q: no problem type of that slug", r.Type)
		case typ.Status != r.Status || typ.Title != r.Title:
			t.Errorf("refusal %q is %d %q, its problem type %d %q", r.Type, r.Status, r.Title, typ.Status, typ.Title)
		}
	}
}
